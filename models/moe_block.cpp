#include "models/moe_block.h"

#include <string>
#include <vector>

#include "models/step_inputs.h"

namespace brigade {

Expected<MoeBlock> load_moe_block(WeightLoader& w, const ModelConfig& c, int l) {
  const std::string pre = "model.layers." + std::to_string(l) + ".mlp.";
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size;
  MoeBlock b;
  BRIGADE_ASSIGN_OR_RETURN(b.router, w.matrix(pre + "gate.weight", c.n_experts, hidden));
  if (c.moe_score_bias) {
    BRIGADE_ASSIGN_OR_RETURN(b.bias, w.vector_f32({pre + "gate.e_score_correction_bias"}, {c.n_experts}));
  }
  if (c.n_shared_experts > 0) {
    const int64_t shared = int64_t{c.n_shared_experts} * inter;
    BRIGADE_ASSIGN_OR_RETURN(b.shared_gate_up, w.fused({pre + "shared_experts.gate_proj.weight",
                                                        pre + "shared_experts.up_proj.weight"},
                                                       {shared, shared}, hidden));
    BRIGADE_ASSIGN_OR_RETURN(b.shared_down, w.matrix(pre + "shared_experts.down_proj.weight", hidden, shared));
  }
  if (w.has(pre + "experts.gate_up_proj")) {  // transformers 5's fused layout: already ours
    BRIGADE_ASSIGN_OR_RETURN(b.gate_up, w.stacked(pre + "experts.gate_up_proj", c.n_experts, 2 * inter, hidden));
    BRIGADE_ASSIGN_OR_RETURN(b.down, w.stacked(pre + "experts.down_proj", c.n_experts, hidden, inter));
    return b;
  }
  std::vector<std::string> gate_up_names, down_names;
  std::vector<int64_t> gate_up_rows, down_rows;
  for (int e = 0; e < c.n_experts; ++e) {
    const std::string ex = pre + "experts." + std::to_string(e) + ".";
    gate_up_names.insert(gate_up_names.end(), {ex + "gate_proj.weight", ex + "up_proj.weight"});
    gate_up_rows.insert(gate_up_rows.end(), {inter, inter});
    down_names.push_back(ex + "down_proj.weight");
    down_rows.push_back(hidden);
  }
  BRIGADE_ASSIGN_OR_RETURN(b.gate_up, w.fused(gate_up_names, gate_up_rows, hidden));
  BRIGADE_ASSIGN_OR_RETURN(b.down, w.fused(down_names, down_rows, inter));
  return b;
}

Expected<MoeScratch> allocate_moe_scratch(Backend& backend, const ModelConfig& c, int64_t t) {
  const int k = c.n_experts_per_tok;
  const int64_t hidden = c.hidden_size, shared = int64_t{c.n_shared_experts} * c.moe_intermediate_size;
  const DType a = backend.activation_dtype();
  MoeScratch s;
  BRIGADE_ASSIGN_OR_RETURN(s.router_logits, alloc_tensor(backend, DType::f32, t, c.n_experts));
  BRIGADE_ASSIGN_OR_RETURN(s.ids, alloc_tensor(backend, DType::i32, t, k));
  BRIGADE_ASSIGN_OR_RETURN(s.weights, alloc_tensor(backend, DType::f32, t, k));
  const size_t ws = backend.moe_workspace_bytes(t, k, hidden, c.moe_intermediate_size);
  BRIGADE_ASSIGN_OR_RETURN(s.workspace, alloc_tensor(backend, DType::u8, 1, static_cast<int64_t>(ws)));
  if (shared > 0) {
    BRIGADE_ASSIGN_OR_RETURN(s.shared_gate_up, alloc_tensor(backend, a, t, 2 * shared));
    BRIGADE_ASSIGN_OR_RETURN(s.shared_act, alloc_tensor(backend, a, t, shared));
    BRIGADE_ASSIGN_OR_RETURN(s.shared_out, alloc_tensor(backend, a, t, hidden));
  }
  return s;
}

void run_moe_block(Backend& backend, const ModelConfig& c, const MoeBlock& block, const MoeScratch& s,
                   const Tensor& normed, const Tensor& delta) {
  const int64_t n = normed.dim(0);
  const Tensor logits = s.router_logits.tensor.rows(0, n);
  const Tensor ids = s.ids.tensor.rows(0, n);
  const Tensor weights = s.weights.tensor.rows(0, n);
  MoeRouting routing = c.moe_routing();
  routing.bias = block.bias.tensor;
  backend.matmul(normed, block.router.tensor, Tensor(), logits);
  backend.moe_route(logits, routing, ids, weights);
  backend.moe_experts(normed, block.gate_up.tensor, block.down.tensor, ids, weights, s.workspace.tensor, delta);
  if (block.shared_gate_up.tensor.empty()) return;
  // DeepseekV3MoE: experts(x) + shared_experts(x).
  const Tensor gate_up = s.shared_gate_up.tensor.rows(0, n), act = s.shared_act.tensor.rows(0, n);
  const Tensor out = s.shared_out.tensor.rows(0, n);
  backend.matmul(normed, block.shared_gate_up.tensor, Tensor(), gate_up);
  backend.silu_mul(gate_up, act);
  backend.matmul(act, block.shared_down.tensor, Tensor(), out);
  backend.add(delta, out);
}

}  // namespace brigade
