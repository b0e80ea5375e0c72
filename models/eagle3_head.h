// Internal to models/: an EAGLE-3 draft head (LlamaForCausalLMEagle3: yuhuili/EAGLE3-*, SpecForge's
// checkpoints; or the speculators layout, Eagle3Speculator: RedHatAI's), loaded beside a llama,
// qwen2, qwen3 or qwen3_moe target (LoadOptions::eagle3) and run by its forward_mtp, as vLLM's
// llama_eagle3.py runs it:
//   x = fc([a_0; a_1; a_2])  (first draft: the target's residual stream entering its aux layers)
//     or the head's own pre-norm output at the previous position (chained drafts);
//   h = r + o(attn([input_layernorm(embed(token)); hidden_norm(x)]))   (q|k|v over 2 hidden columns;
//     r = x, or hidden_norm(x) with norm_before_residual)
//   pre = h + mlp(post_attention_layernorm(h));  logits = lm_head(norm(pre))  over the draft vocabulary,
// whose column i is target token i + d2t[i]. The head's K/V is one more layer of the target's
// pool (index target n_layers), so its kv heads and head_dim must be the target's.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/step_inputs.h"

namespace brigade {

struct Eagle3Config {
  ModelConfig layer;              // the head's decoder layer as a llama config (heads, head_dim, rope, eps)
  int64_t draft_vocab = 0;        // draft_vocab_size (vocab_size when absent)
  std::vector<int> aux_layers;    // eagle_aux_hidden_state_layer_ids, else vLLM's (2, L / 2, L - 3)
  bool norm_before_residual = false;  // the residual is hidden_norm(x) (speculators' default: true)
  bool speculators = false;       // the speculators layout (speculators_model_type eagle3)
  bool own_embedding = false;     // set at load: the checkpoint stores embed_tokens
};

// config.json of a head for `target`, in either layout (the speculators one read as vLLM's
// SpeculatorsConfig does: transformer_layer_config is the layer, draft_vocab_size,
// target_hidden_size, norm_before_residual (default true) and the aux ids at the top level).
// Refuses, by name, other architectures and speculators_model_types, a transformer_layer_config
// of another model_type than llama, more than one layer, norm_before_fc, fc_norm, norm_output,
// biases, no aux hidden states, another vocabulary or hidden size than the target's, aux layer
// ids outside the target, and kv heads / head_dim other than the target's.
Expected<Eagle3Config> parse_eagle3_config(const std::string& json_text, const ModelConfig& target);

class Eagle3Head {
 public:
  // Loads `dir` (config.json, model.safetensors) for `target` on `backend`; target_embed is the
  // target's embedding table, used when the head stores no embed_tokens (it must then have the
  // target's hidden size). Errors name the file and what was wrong.
  static Expected<std::unique_ptr<Eagle3Head>> load(const std::string& dir, const ModelConfig& target,
                                                    Backend& backend, const Tensor& target_embed,
                                                    std::optional<DType> weight_dtype, int max_batch_tokens);

  const Eagle3Config& config() const { return config_; }
  Model::DraftHead shape() const;

  // Target forward hooks: checks batch.aux_rows / aux_hidden (nothing to do when aux_rows is
  // empty) and uploads the rows; capture(l, residual) then copies the listed rows of the residual
  // entering target layer l into their planes.
  Status begin_capture(const StepBatch& batch);
  void capture(int layer, const Tensor& residual);

  // One forward over the head's K/V (kv.layer(kv_layer)): row j feeds batch.tokens[j] (the token
  // after positions[j]) with prev_hidden: the aux planes [3 n, target hidden] (a first draft) or
  // [n, hidden] (a chained draft: the head's pre-norm output). Writes logits [logit_rows, draft
  // vocab] f32 and batch.hidden [hidden_rows, hidden] (pre-norm: the next chained prev_hidden).
  Status forward(const StepBatch& batch, const KvCache& kv, int kv_layer, const Tensor& logits);

 private:
  Eagle3Head(Backend& backend, Eagle3Config config, const ModelConfig& target, int max_batch_tokens)
      : backend_(backend), config_(std::move(config)), target_(target), max_batch_tokens_(max_batch_tokens) {}
  Status load_weights(const Checkpoint& ck, const Tensor& target_embed, std::optional<DType> weight_dtype);
  Status allocate_scratch();
  // x [n, hidden]: fc over the aux planes, or prev_hidden itself for a chained draft.
  Expected<Tensor> base(const StepBatch& batch, int n);

  Backend& backend_;
  Eagle3Config config_;
  const ModelConfig& target_;
  int max_batch_tokens_;
  std::shared_ptr<MappedFile> file_;  // model.safetensors (or pytorch_model.bin), mapped while the head lives
  std::vector<std::vector<uint8_t>> derived_;  // pytorch_model.bin's tensors copied at read (torch_checkpoint.h)
  OwnedTensor own_embed_;          // [vocab, hidden] when stored
  Tensor embed_;                   // own_embed_ or the target's
  OwnedTensor fc_[3];              // [hidden, target hidden]: fc's column blocks, one per aux plane
  OwnedTensor input_norm_, hidden_norm_, post_attn_norm_, final_norm_;  // [hidden] f32
  OwnedTensor qkv_embed_, qkv_hidden_;  // [(H + 2 KV) hd, hidden]: q|k|v's columns over each half
  OwnedTensor o_, gate_up_, down_;
  OwnedTensor lm_head_;            // [draft vocab, hidden]
  std::vector<int32_t> to_target_;  // [draft vocab]: i + d2t[i]
  RopeConfig rope_;
  StepInputs ints_;
  OwnedTensor aux_rows_;            // i32 [max_batch_tokens]
  Tensor aux_hidden_;               // this step's StepBatch::aux_hidden
  int64_t n_aux_rows_ = 0;
  struct {
    OwnedTensor x, embed, normed, qkv, qkv_part, attn, delta, gate_up, act, selected;
  } s_;
};

}  // namespace brigade
