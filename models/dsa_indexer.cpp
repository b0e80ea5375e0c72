#include "models/dsa_indexer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/step_inputs.h"

namespace brigade {

DsaKeyPlan::DsaKeyPlan(const ModelConfig& c, int n_mtp) {
  const int per_row = (c.kv_lora_rank + c.qk_rope_head_dim) / c.dsa.head_dim;  // >= 1: read_deepseek checks D <= W
  const int n_latent = c.n_layers + n_mtp;
  int n_full = 0;
  for (int l = 0; l < n_latent; ++l) {
    const bool shared = static_cast<size_t>(l) < c.dsa.shared.size() && c.dsa.shared[static_cast<size_t>(l)];
    pool_layer_.push_back(shared ? -1 : n_latent + n_full / per_row);
    column_.push_back(shared ? -1 : (n_full % per_row) * c.dsa.head_dim);
    if (!shared) ++n_full;
  }
  n_extra_ = (n_full + per_row - 1) / per_row;
}

Status load_dsa_indexer(WeightLoader& w, const ModelConfig& c, int l, DsaIndexer& out) {
  const std::string p = "model.layers." + std::to_string(l) + ".self_attn.indexer.";
  const int64_t h = c.dsa.n_heads, d = c.dsa.head_dim, hidden = c.hidden_size;
  BRIGADE_ASSIGN_OR_RETURN(out.wq_b, w.matrix(p + "wq_b.weight", h * d, c.q_lora_rank));
  BRIGADE_ASSIGN_OR_RETURN(out.wk, w.matrix(p + "wk.weight", d, hidden));
  BRIGADE_ASSIGN_OR_RETURN(out.k_norm_w, w.vector_f32({p + "k_norm.weight"}, {d}));
  BRIGADE_ASSIGN_OR_RETURN(out.k_norm_b, w.vector_f32({p + "k_norm.bias"}, {d}));
  BRIGADE_ASSIGN_OR_RETURN(out.weights_proj, w.matrix(p + "weights_proj.weight", h, hidden));
  return Status::ok();
}

Status allocate_dsa_scratch(Backend& backend, const ModelConfig& c, int64_t max_tokens, DsaScratch& s) {
  const DType a = backend.activation_dtype();
  const int64_t h = c.dsa.n_heads, d = c.dsa.head_dim;
  BRIGADE_ASSIGN_OR_RETURN(s.q, alloc_tensor(backend, a, max_tokens, h * d));
  BRIGADE_ASSIGN_OR_RETURN(s.k, alloc_tensor(backend, a, max_tokens, d));
  BRIGADE_ASSIGN_OR_RETURN(s.k_norm, alloc_tensor(backend, a, max_tokens, d));
  BRIGADE_ASSIGN_OR_RETURN(s.weights, alloc_tensor(backend, a, max_tokens, h));
  BRIGADE_ASSIGN_OR_RETURN(s.indices, alloc_tensor(backend, DType::i32, max_tokens, c.dsa.topk));
  // Scores of up to 1024 context positions per row for a whole step, and at least one row of the
  // longest context (Backend::dsa_topk scores as many rows at a time as this holds).
  const int64_t ctx = std::max<int64_t>(1, c.max_position);
  BRIGADE_ASSIGN_OR_RETURN(s.workspace, alloc_tensor(backend, DType::f32, 1, std::max(ctx, max_tokens * std::min<int64_t>(ctx, 1024))));
  return Status::ok();
}

void run_dsa_indexer(Backend& b, const ModelConfig& c, const DsaIndexer& idx, const RopeConfig& rope, const DsaStep& step,
                     const KvLayer& keys, int col, const DsaScratch& s) {
  const int64_t n = step.normed.dim(0);
  const int h = c.dsa.n_heads, d = c.dsa.head_dim;
  const Tensor q = s.q.tensor.rows(0, n), k = s.k.tensor.rows(0, n), k_norm = s.k_norm.tensor.rows(0, n);
  const Tensor weights = s.weights.tensor.rows(0, n);
  b.matmul(step.q_resid, idx.wq_b.tensor, Tensor(), q);
  b.matmul(step.normed, idx.wk.tensor, Tensor(), k);
  b.layer_norm(k, idx.k_norm_w.tensor, idx.k_norm_b.tensor, 1e-6f, k_norm);  // DeepseekV32Indexer's k_norm
  b.matmul(step.normed, idx.weights_proj.tensor, Tensor(), weights);
  b.rope(q, QkvLayout{h, 0, d}, step.positions, rope);
  b.rope(k_norm, QkvLayout{1, 0, d}, step.positions, rope);
  b.write_kv_columns(keys, k_norm, col, step.slots);
  const DsaLayout l{h, d, col, c.dsa.topk, 1.0f / std::sqrt(static_cast<float>(d) * static_cast<float>(h))};
  b.dsa_topk(q, weights, keys, l, *step.meta, s.workspace.tensor, s.indices.tensor.rows(0, n));
}

}  // namespace brigade
