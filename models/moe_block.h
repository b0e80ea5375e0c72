// The Qwen3-MoE sparse block (Qwen3MoeSparseMoeBlock): a router picks each token's top-k
// experts by softmax (Backend::moe_route), and the token's output is the routing-weighted sum of
// those experts' SwiGLU MLPs (Backend::moe_experts). It replaces MlpBlock in the layers that
// ModelConfig::is_moe_layer names; attention, norms and the layer loop are the Llama decoder's
// (models/llama.cpp).
#pragma once

#include "core/backend.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// One sparse layer's weights; E experts, I = moe_intermediate_size.
struct MoeBlock {
  OwnedTensor router;   // [E, hidden] (mlp.gate.weight)
  OwnedTensor gate_up;  // [E * 2I, hidden]: per expert its gate rows, then its up rows
  OwnedTensor down;     // [E * hidden, I]: per expert its down_proj
  bool empty() const { return router.tensor.empty(); }
};

// Per-step buffers for up to T tokens, allocated once with the model's scratch.
struct MoeScratch {
  OwnedTensor router_logits;  // [T, E] f32
  OwnedTensor ids;            // [T, k] i32
  OwnedTensor weights;        // [T, k] f32
  OwnedTensor workspace;      // Backend::moe_workspace_bytes(T, k, hidden, I) bytes
};

// Loads layer l's router, model.layers.{l}.mlp.gate.weight [E, hidden], and its experts in either
// layout: mlp.experts.{e}.{gate,up,down}_proj.weight (what save_pretrained writes, and the Hub's
// checkpoints), stacked at load into the tensors above, or transformers 5's fused
// mlp.experts.gate_up_proj [E, 2I, hidden] and mlp.experts.down_proj [E, hidden, I], which are
// that layout already. Shapes are checked against the config.
Expected<MoeBlock> load_moe_block(WeightLoader& w, const ModelConfig& c, int l);

// delta [n, hidden] = the sparse block applied to normed [n, hidden] (n <= the scratch's T).
void run_moe_block(Backend& backend, const ModelConfig& c, const MoeBlock& block, const MoeScratch& s,
                   const Tensor& normed, const Tensor& delta);

}  // namespace brigade
