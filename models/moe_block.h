// The sparse MoE block of Qwen3-MoE (Qwen3MoeSparseMoeBlock), Mixtral (MixtralSparseMoeBlock) and
// DeepSeek-V2/V3 (DeepseekV3MoE): a router picks each token's top-k experts (Backend::moe_route
// with ModelConfig::moe_routing: softmax top-k for Qwen3 and Mixtral; DeepSeek's softmax/sigmoid
// scoring, score-correction bias, expert groups and routed_scaling_factor), and the token's
// output is the routing-weighted sum of those
// experts' SwiGLU MLPs (Backend::moe_experts), plus shared experts: one dense SwiGLU that every
// token runs, DeepSeek's of n_shared_experts * moe_intermediate_size, Qwen2-MoE's
// (Qwen2MoeSparseMoeBlock) of shared_expert_intermediate_size with its output scaled by
// sigmoid(x · shared_expert_gate) per token. That gated one runs as a one-expert MoE
// (moe_route's sigmoid scoring, k 1, then moe_experts), so every backend with MoE ops runs it. It
// replaces the dense MLP in the layers that ModelConfig::is_moe_layer names (models/llama.cpp,
// models/deepseek.cpp).
#pragma once

#include <optional>

#include "core/backend.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// Which part of each sparse layer a tensor-parallel rank holds (docs/architecture.md "Expert
// parallelism"). Without expert parallelism every rank holds all E experts, each cut to its
// 1/size of the I intermediate columns (as a dense MLP is); with it, rank r holds E/size whole
// experts, [r E/size, (r+1) E/size). Either way each rank's output is a partial sum that the
// layer's all-reduce completes. Shared experts (DeepSeek's, Qwen2-MoE's) are always cut by columns.
struct MoeShard {
  int first_expert = 0;    // this rank's experts: [first_expert, first_expert + n_experts)
  int n_experts = 0;
  int64_t inter_begin = 0; // this rank's columns of each routed expert: [inter_begin, inter_begin + inter)
  int64_t inter = 0;
  int64_t shared_begin = 0;  // this rank's columns of the shared experts' ModelConfig::shared_width()
  int64_t shared = 0;
};

// Rank `rank` of `size`'s part of c's sparse layers (the whole of them for size 1). The model's
// load checks the divisibility first (check_moe_parallel).
MoeShard moe_shard(const ModelConfig& c, int rank, int size, bool expert_parallel);

// Whether `size` ranks split c's sparse layers evenly (true without sparse layers), and, for a
// refusal, the fields they must divide with their values, e.g. "moe_intermediate_size (768)".
bool moe_splits(const ModelConfig& c, int size, bool expert_parallel);
std::string moe_split_fields(const ModelConfig& c, bool expert_parallel);

// One sparse layer's weights (a rank's part: MoeShard); E experts, I = moe_intermediate_size.
struct MoeBlock {
  OwnedTensor router;   // [E, hidden] (mlp.gate.weight; gpt-oss: mlp.router.weight; LongCat: [E + Z, hidden], its
                        // zero experts' rows after the real ones, ModelConfig::n_zero_experts, and so bias)
  OwnedTensor router_bias;  // [E] f32 added to the router logits (gpt-oss: mlp.router.bias), or empty
  OwnedTensor bias;     // [E] f32 (mlp.gate.e_score_correction_bias, DeepSeek-V3), or empty
  OwnedTensor gate_up;  // [E * 2I, hidden]: per expert its gate rows, then its up rows (relu2 experts: its
                        // up rows alone, [E * I, hidden]); or empty, and
  OwnedTensor gate;     // [E * I, hidden] and
  OwnedTensor up;       // [E * I, hidden]: GGUF's experts, each in its stored type (Backend::moe_experts_split)
  OwnedTensor down;     // [E * hidden, I]: per expert its down_proj
  OwnedTensor gate_up_bias;  // [E * 2I] f32 per held expert its gate then up biases (gpt-oss), or empty
  OwnedTensor down_bias;     // [E * hidden] f32 (gpt-oss; empty on ranks but 0 when the experts are cut by columns)
  OwnedTensor shared_gate_up;  // [2 Is, hidden] (mlp.shared_experts; qwen2_moe mlp.shared_expert; Nemotron 3's
                               // relu2 shared expert: its up_proj [Is, hidden]), Is =
                               // ModelConfig::shared_width(); or empty
  OwnedTensor shared_down;     // [hidden, Is]
  OwnedTensor shared_gate;     // [1, hidden] (qwen2_moe mlp.shared_expert_gate), or empty
  bool empty() const { return router.tensor.empty(); }
  // Bytes of the routed experts as loaded (gate_up or gate and up, and down).
  size_t expert_bytes() const {
    return gate_up.tensor.nbytes() + gate.tensor.nbytes() + up.tensor.nbytes() + down.tensor.nbytes();
  }
};

// Per-step buffers for up to T tokens, allocated once with the model's scratch (for a rank's part).
struct MoeScratch {
  OwnedTensor router_logits;  // [T, E (+ Z zero experts)] f32
  OwnedTensor ids;            // [T, k] i32
  OwnedTensor weights;        // [T, k] f32
  OwnedTensor workspace;      // Backend::moe_workspace_bytes(T, k, hidden, I) bytes
  OwnedTensor shared_gate_up; // [T, 2 Is] with shared experts
  OwnedTensor shared_act;     // [T, Is]
  OwnedTensor shared_out;     // [T, hidden]
  OwnedTensor gate_logits;    // [T, 1] f32, with a gated shared expert: x · shared_expert_gate,
  OwnedTensor gate_ids;       // [T, 1] i32 (all 0: the one expert)
  OwnedTensor gate_weights;   // [T, 1] f32 (the sigmoid)
  OwnedTensor gate_workspace; // moe_workspace_bytes(T, 1, hidden, Is)
};

// The scratch of up to max_tokens tokens for c's sparse layers.
Expected<MoeScratch> allocate_moe_scratch(Backend& backend, const ModelConfig& c, const MoeShard& shard,
                                          int64_t max_tokens);

// Loads layer l's router, model.layers.{l}.mlp.gate.weight [E, hidden], and its experts in either
// layout: mlp.experts.{e}.{gate,up,down}_proj.weight (what save_pretrained writes, and the Hub's
// checkpoints), stacked at load into the tensors above, or transformers 5's fused
// mlp.experts.gate_up_proj [E, 2I, hidden] and mlp.experts.down_proj [E, hidden, I], which are
// that layout already; or GGUF's (models/gguf_checkpoint.h), mlp.experts.{gate,up}_proj [E, I,
// hidden] and mlp.experts.down_proj [E, hidden, I], kept apart and block-quantized as stored where
// the backend multiplies the type (else q8_0, or the float type asked for). Mixtral's Hub names
// are block_sparse_moe.gate.weight and block_sparse_moe.experts.{e}.w1 (gate), w3 (up) and w2
// (down); LFM2-MoE's feed_forward.gate.weight, feed_forward.expert_bias [E] (the selection bias)
// and feed_forward.experts.{e}.w1 / w3 / w2; AFMoE's mlp.router.gate.weight and mlp.expert_bias [E]; LongCat-Flash's mlp.router.classifier.weight and mlp.router.e_score_correction_bias, [E + Z] rows both (ModelConfig::n_zero_experts). gpt-oss's are mlp.router.{weight,bias} and mlp.experts.gate_up_proj [E, hidden, 2I]
// (transposed, each expert's gate and up columns interleaved: gate j at 2j, up j at 2j + 1),
// gate_up_proj_bias [E, 2I] (interleaved alike), down_proj [E, I, hidden] (transposed) and
// down_proj_bias [E, hidden]. DeepSeek adds mlp.gate.e_score_correction_bias [E] (V3) and
// mlp.shared_experts.{gate,up,down}_proj.weight; Qwen2-MoE mlp.shared_expert.{gate,up,down}_proj.weight
// and mlp.shared_expert_gate.weight [1, hidden]. Shapes are checked against the config.
// Only the rank's part (`shard`) is loaded; the experts other ranks hold are checked and counted
// (WeightLoader::skip).
// quantize_experts (`weights: q8_0` / q4_0 where the backend multiplies the type, and the
// backend's moe_experts takes it): the float routed experts are quantized to the loader's block
// type, gate_up and down each when its rows are whole blocks (a rank's columns of down_proj
// included), else kept float; the router, the shared experts and GGUF's experts (already block
// types) are loaded as without it. w's quantize_linear is left on.
Expected<MoeBlock> load_moe_block(WeightLoader& w, const ModelConfig& c, int l, const MoeShard& shard,
                                  std::optional<DType> quantize_experts = std::nullopt);

// delta [n, hidden] = the sparse block applied to normed [n, hidden] (n <= the scratch's T): this
// rank's part of it, to be all-reduced by the caller when the model is split.
void run_moe_block(Backend& backend, const ModelConfig& c, const MoeShard& shard, const MoeBlock& block,
                   const MoeScratch& s, const Tensor& normed, const Tensor& delta);

}  // namespace brigade
