// Model: an architecture written once over the Backend ops, with weights loaded from a
// checkpoint (DESIGN.md §4).
//
// A Model is immutable after load and used by one executor thread. forward() runs one step of a
// flattened batch (prefill chunks and decode tokens together) against a paged KV cache.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/status.h"
#include "kvstore/kv_layout.h"
#include "models/lora_adapter.h"
#include "models/model_config.h"

namespace brigade {

// An image in a step (a model whose ModelConfig::vision is loaded, Model::has_vision): its
// tokens first, first + 1, ... are the rows row, row + 1, ... of one sequence, each the image
// token, up to the image's last token (VisionConfig::image_tokens of its grid) or the sequence's
// last row in the step, whichever comes first. The model encodes the pixels and puts the image's
// features in those rows' place (not their token embeddings). Gemma 3 lets those rows attend to
// one another (AttentionMeta::attend_until), so its images lie whole in one step (first = 0);
// the Qwen2-VL family's attend causally, so one image may be split over several steps (chunked
// prefill): the model keeps the features of an image it has begun until its last token
// (models/image_feature_cache.h), and places its rows in M-RoPE's 3D positions (models/mrope.h).
// The rest of the sequence attends to them causally.
struct StepImage {
  int32_t row = 0;  // the step row of the image's token `first`
  // Fixed-size images (Gemma 3, grid_h = grid_w = 0): [3, image_size, image_size] f32, channels
  // first, normalised as the model's image processor does (models/image_processor.h).
  // Dynamic-resolution images (Qwen2-VL family, VisionConfig::dynamic()): grid_h x grid_w patches
  // as the processor flattens them, [grid_h * grid_w, VisionConfig::patch_width()] f32, and the
  // image has (grid_h / merge) * (grid_w / merge) tokens. Shared, so a sequence's images are not
  // copied per step.
  std::shared_ptr<const std::vector<float>> pixels;
  int32_t grid_h = 0;
  int32_t grid_w = 0;
  int32_t first = 0;  // the image's tokens in earlier steps (its tokens before row)
};

// One step, host-side. n_tokens rows, grouped by sequence (see AttentionMeta for the rules).
struct StepBatch {
  std::vector<int32_t> tokens;       // [n_tokens] token ids
  std::vector<int32_t> positions;    // [n_tokens] position of each token in its sequence
  std::vector<int32_t> slots;        // [n_tokens] KV slot: page * page_size + offset
  std::vector<int32_t> q_start;      // [n_seqs + 1]
  std::vector<int32_t> ctx_len;      // [n_seqs]
  std::vector<int32_t> block_table;  // [n_seqs * max_blocks] page ids, row-major
  int max_blocks = 0;
  std::vector<int32_t> logit_rows;   // token rows whose logits are wanted, in output order
  // Token rows whose final-norm hidden state is wanted (pooling: embeddings), in output order,
  // and where forward() writes them: [hidden_rows.size(), hidden_size] in the backend's
  // activation dtype, device memory. Tensor-parallel ranks other than 0 pass none (as logits).
  std::vector<int32_t> hidden_rows;
  Tensor hidden;
  // When not empty: the step's token ids already on the backend, i32 [n_tokens], which the
  // forward reads instead of uploading `tokens` (the executor feeds tokens it sampled on the
  // device this way). `tokens` is then still checked (any valid ids as placeholders will do).
  Tensor device_tokens;
  // Model::forward_mtp only: row j's previous hidden state [n_tokens, hidden_size] in the
  // activation dtype, device memory (the target's final-norm hidden state at positions[j], or
  // the MTP module's own output for a chained draft).
  Tensor prev_hidden;
  // An EAGLE-3 head's target step (LoadOptions::eagle3): the rows whose auxiliary hidden states
  // forward() writes into aux_hidden, [n_aux * aux_rows.size(), hidden_size] in the activation
  // dtype, device memory: plane i (rows [i * r, (i + 1) * r)) holds, for each listed row, the
  // residual stream entering target layer Model::draft_head().aux_layers[i] (vLLM's
  // aux_hidden_states). Empty: none written. forward_mtp's first forward takes these planes, of
  // its own rows in order, as prev_hidden.
  std::vector<int32_t> aux_rows;
  Tensor aux_hidden;
  // LoRA adapter of each sequence ([n_seqs]; 0 = the base model, i = LoadOptions::loras[i - 1]);
  // empty: every sequence runs the base (models/lora.h).
  std::vector<int32_t> lora;
  // Images whose tokens are rows of this step (StepImage), in any order; empty for text.
  std::vector<StepImage> images;
  // M-RoPE models (ModelConfig::mrope_section; models/mrope.h): [n_seqs], how far sequence s's
  // rotary positions run behind its token positions at its first row in this step, the sum of
  // mrope_image_shift over its images before that row (each image of a merged h x w grid spans
  // max(h, w) positions for its h * w tokens). Empty: 0 for every sequence.
  std::vector<int32_t> rope_delta;
  // Recurrent models (Model::state_slots() > 0; models/state_space.h): [n_seqs], the state slot of
  // each sequence, in [0, state_slots()), distinct within a step. A sequence whose first row is
  // position 0 starts its state afresh; any other must continue its slot exactly where its last
  // step left it (the model checks). The executor assigns slots and frees them on release.
  // Empty: sequence s uses slot s (one caller running its own sequences, as the tests do).
  std::vector<int32_t> state_slots;
  // Snapshots of those states (a recurrent model's prefix cache; each [n_seqs], or empty for
  // none). state_from[s] >= 0: before the step, sequence s's slot takes the state held in slot
  // state_from[s] (a snapshot), which must end exactly where the sequence's first row starts.
  // state_save[s] >= 0: the state after the sequence's first state_save_rows[s] rows of the step
  // (1 to its rows) is also copied into slot state_save[s], which no sequence of the step holds.
  // Restores happen before any save, so one slot may be restored from and saved into in a step.
  std::vector<int32_t> state_from;
  std::vector<int32_t> state_save;
  std::vector<int32_t> state_save_rows;

  int n_tokens() const { return static_cast<int>(tokens.size()); }
  int n_seqs() const { return static_cast<int>(ctx_len.size()); }
  void clear();
};

// How many rows of batch the image im holds (see StepImage): its tokens from im.first up to its
// last (image_tokens in all) or up to its sequence's last row in the step, whichever comes
// first. check_step_images checks the rest (im.row inside the step, first < image_tokens).
inline int step_image_rows(const StepBatch& batch, const StepImage& im, int image_tokens) {
  const auto next = std::upper_bound(batch.q_start.begin(), batch.q_start.end(), im.row);
  const int seq_end = next == batch.q_start.end() ? batch.n_tokens() : *next;
  return std::max(0, std::min(image_tokens - im.first, seq_end - im.row));
}

// The work of one forward step by the roofline model (DESIGN.md §9): the bytes it must move at
// least and the floating-point operations it must do. The executor compares them with the
// device's measured ceilings to say which one bound the step and how close it came.
struct StepCost {
  double flops = 0.0;
  double bytes = 0.0;
};

struct LoadOptions {
  // Weight element type after load; nullopt keeps the checkpoint's (f16 is kept as f16; the FP8
  // matrices of an fp8 checkpoint are dequantized to f32, models/weight_quant.h; a GPU keeps bf16).
  // f8e4m3 quantizes the linear layers (q|k|v, o, gate|up, down) to fp8 with a per-tensor scale
  // (core/backend.h) and keeps the embedding table and lm_head bf16; only a backend whose
  // supports_weight_dtype(f8e4m3) is true takes it (a CUDA GPU of compute capability >= 8.9),
  // others fail the load with unsupported before any weight is read.
  std::optional<DType> weight_dtype;
  int max_batch_tokens = 2048;  // largest n_tokens a step may have (sizes the scratch buffers)
  bool progress = true;         // show a progress bar when stderr is a terminal
  // Tensor parallelism: this model is rank communicator->rank() of communicator->size() and
  // loads only its shard (attention heads, MLP columns; see docs/architecture.md). Not owned; it
  // must outlive the model. nullptr: the whole model, no collectives.
  Communicator* communicator = nullptr;
  // Mixture-of-experts layers under tensor parallelism: false cuts every expert by columns over
  // the ranks (each rank runs every expert, 1/size of it); true gives each rank E/size whole
  // experts (expert parallelism: a rank runs only the tokens routed to its experts). Attention
  // and dense layers are split by heads and columns either way; ignored without a communicator.
  bool expert_parallel = false;
  // LoRA adapters to serve (models/lora.h; Llama-family dense decoders, each tp rank its part):
  // StepBatch::lora id i + 1 is loras[i]. Each adapter's r must be <= max_lora_rank. max_loras > 0
  // keeps that many slots (at least loras.size()) for adapters loaded at run time
  // (Model::load_lora), even when loras is empty; 0: just loras.
  std::vector<LoraModule> loras;
  int max_lora_rank = 16;
  int max_loras = 0;
  bool lora_enabled() const { return !loras.empty() || max_loras > 0; }
  // Multi-token prediction: also load the checkpoint's MTP module (DeepSeek-V3's or GLM-4.5's
  // num_nextn_predict_layers, the first one), run by forward_mtp() to draft tokens. Its K/V is one
  // more layer of kv_layout. Fails the load for a model without one, or under tensor parallelism.
  bool mtp = false;
  // EAGLE-3 speculative decoding: a draft head directory (LlamaForCausalLMEagle3 or speculators'), loaded
  // with the target (models/eagle3_head.h) and run by forward_mtp() as the MTP module is. Its K/V is one
  // more layer of kv_layout. llama, qwen2, qwen3 and qwen3_moe targets only, tp 1; empty: none.
  std::string eagle3;
  // Recurrent models (ModelConfig::recurrent): sequences whose state is kept at once (the
  // scheduler's max_running), each a slot of state memory allocated at load.
  int state_slots = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  // Loads a checkpoint: a directory with config.json + model.safetensors (or a sharded index),
  // or a llama2.c .bin file. Errors name the file and what was wrong with it.
  static Expected<std::unique_ptr<Model>> load(const std::string& path, Backend& backend,
                                               const LoadOptions& options);

  virtual const ModelConfig& config() const = 0;
  // KV layout for n_pages pages of page_size tokens in dtype (this rank's kv heads only).
  virtual KvLayout kv_layout(int n_pages, int page_size, DType dtype) const = 0;
  // Runs one step: writes the step's K/V into `kv` and fills logits [logit_rows.size(), vocab]
  // (f32, device memory of this backend) and batch.hidden (StepBatch::hidden_rows). Fails (invalid_argument) on ids outside the vocabulary
  // or a step larger than max_batch_tokens; the KV cache is then unchanged. Under tensor
  // parallelism every rank runs the same step at the same time (the collectives pair them up);
  // only rank 0 computes logits, so other ranks must pass a batch without logit_rows. A failed
  // collective (a peer stopped) returns its error and leaves this rank's KV cache undefined.
  virtual Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) = 0;
  // The MTP module (LoadOptions::mtp; DeepSeek-V3's or GLM-4.5's, as SGLang's DeepseekModelNextN
  // and Glm4MoeModelNextN run them, models/mtp_module.h): 1 when loaded, else 0. Its K/V is the
  // last layer of kv_layout (index config().n_layers), in the same pages as the sequence's own:
  // position p's entry is computed from the token at p + 1 and the hidden state at p.
  virtual int n_mtp_layers() const { return 0; }
  // One forward of the MTP module. Row j feeds batch.tokens[j] (the token that FOLLOWS position
  // positions[j]) with batch.prev_hidden row j: x = eh_proj([enorm(embed(token)); hnorm(prev)]),
  // one decoder layer of the model's own kind over the module's K/V (written at slots[j]), then
  // shared_head.norm. Fills logits [logit_rows.size(), vocab] through the model's lm_head (row
  // argmax: the token two places after the position) and batch.hidden (hidden_rows) with the
  // normed output, which is the prev_hidden of a chained draft at the next position. Errors as
  // forward(); unsupported without the module.
  virtual Status forward_mtp(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
    (void)batch, (void)kv, (void)logits;
    return unsupported("this model has no MTP module loaded (LoadOptions::mtp)");
  }
  // What the executor feeds forward_mtp and reads back (n_mtp_layers() > 0). An MTP module takes
  // the final-norm hidden rows (StepBatch::hidden_rows) first; an EAGLE-3 head the planes of its
  // aux_layers (StepBatch::aux_rows), aux_width wide, and maps its draft vocabulary to the
  // target's.
  struct DraftHead {
    std::vector<int> aux_layers;       // empty: an MTP module
    int64_t aux_width = 0;             // the target's hidden size
    int64_t hidden = 0;                // forward_mtp's batch.hidden width: a chained prev_hidden
    int64_t vocab = 0;                 // forward_mtp's logits width
    const std::vector<int32_t>* to_target = nullptr;  // logit column -> target token id; null: identity
  };
  virtual DraftHead draft_head() const { return {{}, 0, config().hidden_size, config().vocab_size, nullptr}; }
  // Recurrent models: the state slots (StepBatch::state_slots) loaded, and the bytes of one; 0
  // for models whose past is all in the KV pages.
  virtual int state_slots() const { return 0; }
  virtual int64_t state_bytes_per_slot() const { return 0; }
  // Whether forward() takes StepBatch::images: the checkpoint has a vision tower
  // (ModelConfig::vision) and the backend runs it (Backend::supports_vision).
  virtual bool has_vision() const { return false; }
  // What the vision tower did so far (has_vision): the images it encoded, and the steps that
  // took an image's features from the encoder cache instead (an image split over steps,
  // models/image_feature_cache.h).
  struct VisionStats {
    int64_t images_encoded = 0;
    int64_t cache_hits = 0;
  };
  virtual VisionStats vision_stats() const { return {}; }
  // Total parameter count and weight bytes as loaded.
  virtual int64_t n_params() const = 0;
  virtual int64_t weight_bytes() const = 0;
  // What forward(batch) costs this rank (its shard under tensor parallelism):
  //   bytes: every linear weight once, the embedding rows of the step's tokens, the whole lm_head
  //          when a row wants logits, the KV attention reads (each sequence's visible context,
  //          once per layer) and writes (its new tokens); kv_bytes_per_token is K and V of all
  //          layers of this rank (KvLayout::page_bytes() / page_size, scales included);
  //   flops: 2 per linear weight per token, 2 per lm_head weight per logits row, and attention's
  //          4 * head_dim per query head per (query, visible key) pair.
  // Mixture-of-experts layers count k of the E experts' weights per token for the flops, and
  // min(E, n_tokens * k) experts per layer for the bytes (an upper bound on the distinct experts
  // the step touches; the routing is not known before the step). MLA (DeepSeek) attention counts
  // 2 (R + rope) + 2 R flops per pair and head over the latent cache rows (models/deepseek.cpp).
  // Norms, RoPE and activations are left out: they add under 1% at any batch.
  virtual StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const = 0;

  // LoRA adapters at run time (LoadOptions::max_loras slots): reads `module` and uploads it into
  // slot (1..max_loras), or frees a slot. Between steps, on the executor's thread. unsupported for
  // a model loaded without LoRA slots; the errors of read_lora_adapter.
  virtual Status load_lora(int slot, const LoraModule& module) {
    (void)slot;
    return unsupported("this model was loaded without LoRA slots: cannot load adapter '" + module.name + "'");
  }
  virtual Status unload_lora(int slot) {
    return unsupported("this model was loaded without LoRA slots (slot " + std::to_string(slot) + ")");
  }
};

}  // namespace brigade
