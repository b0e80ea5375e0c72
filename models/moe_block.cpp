#include "models/moe_block.h"

#include <string>
#include <vector>

namespace brigade {

Expected<MoeBlock> load_moe_block(WeightLoader& w, const ModelConfig& c, int l) {
  const std::string pre = "model.layers." + std::to_string(l) + ".mlp.";
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size;
  MoeBlock b;
  BRIGADE_ASSIGN_OR_RETURN(b.router, w.matrix(pre + "gate.weight", c.n_experts, hidden));
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

void run_moe_block(Backend& backend, const ModelConfig& c, const MoeBlock& block, const MoeScratch& s,
                   const Tensor& normed, const Tensor& delta) {
  const int64_t n = normed.dim(0);
  const Tensor logits = s.router_logits.tensor.rows(0, n);
  const Tensor ids = s.ids.tensor.rows(0, n);
  const Tensor weights = s.weights.tensor.rows(0, n);
  backend.matmul(normed, block.router.tensor, Tensor(), logits);
  backend.moe_route(logits, c.n_experts_per_tok, c.norm_topk_prob, ids, weights);
  backend.moe_experts(normed, block.gate_up.tensor, block.down.tensor, ids, weights, s.workspace.tensor, delta);
}

}  // namespace brigade
