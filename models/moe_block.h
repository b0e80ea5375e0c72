// The sparse MoE block of Qwen3-MoE (Qwen3MoeSparseMoeBlock) and DeepSeek-V2/V3 (DeepseekV3MoE):
// a router picks each token's top-k experts (Backend::moe_route with ModelConfig::moe_routing:
// softmax top-k for Qwen3; DeepSeek's softmax/sigmoid scoring, score-correction bias, expert
// groups and routed_scaling_factor), and the token's output is the routing-weighted sum of those
// experts' SwiGLU MLPs (Backend::moe_experts), plus DeepSeek's shared experts: one dense SwiGLU
// of n_shared_experts * moe_intermediate_size that every token runs. It replaces the dense MLP in
// the layers that ModelConfig::is_moe_layer names (models/llama.cpp, models/deepseek.cpp).
#pragma once

#include "core/backend.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// One sparse layer's weights; E experts, I = moe_intermediate_size.
struct MoeBlock {
  OwnedTensor router;   // [E, hidden] (mlp.gate.weight)
  OwnedTensor bias;     // [E] f32 (mlp.gate.e_score_correction_bias, DeepSeek-V3), or empty
  OwnedTensor gate_up;  // [E * 2I, hidden]: per expert its gate rows, then its up rows
  OwnedTensor down;     // [E * hidden, I]: per expert its down_proj
  OwnedTensor shared_gate_up;  // [2 Is, hidden] (mlp.shared_experts), Is = n_shared * I; or empty
  OwnedTensor shared_down;     // [hidden, Is]
  bool empty() const { return router.tensor.empty(); }
};

// Per-step buffers for up to T tokens, allocated once with the model's scratch.
struct MoeScratch {
  OwnedTensor router_logits;  // [T, E] f32
  OwnedTensor ids;            // [T, k] i32
  OwnedTensor weights;        // [T, k] f32
  OwnedTensor workspace;      // Backend::moe_workspace_bytes(T, k, hidden, I) bytes
  OwnedTensor shared_gate_up; // [T, 2 Is] with shared experts
  OwnedTensor shared_act;     // [T, Is]
  OwnedTensor shared_out;     // [T, hidden]
};

// The scratch of up to max_tokens tokens for c's sparse layers.
Expected<MoeScratch> allocate_moe_scratch(Backend& backend, const ModelConfig& c, int64_t max_tokens);

// Loads layer l's router, model.layers.{l}.mlp.gate.weight [E, hidden], and its experts in either
// layout: mlp.experts.{e}.{gate,up,down}_proj.weight (what save_pretrained writes, and the Hub's
// checkpoints), stacked at load into the tensors above, or transformers 5's fused
// mlp.experts.gate_up_proj [E, 2I, hidden] and mlp.experts.down_proj [E, hidden, I], which are
// that layout already. DeepSeek adds mlp.gate.e_score_correction_bias [E] (V3) and
// mlp.shared_experts.{gate,up,down}_proj.weight. Shapes are checked against the config.
Expected<MoeBlock> load_moe_block(WeightLoader& w, const ModelConfig& c, int l);

// delta [n, hidden] = the sparse block applied to normed [n, hidden] (n <= the scratch's T).
void run_moe_block(Backend& backend, const ModelConfig& c, const MoeBlock& block, const MoeScratch& s,
                   const Tensor& normed, const Tensor& delta);

}  // namespace brigade
