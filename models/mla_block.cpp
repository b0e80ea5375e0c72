#include "models/mla_block.h"

#include "models/step_inputs.h"

namespace brigade {

Status load_mla_weights(WeightLoader& w, const ModelConfig& c, const std::string& p, Slice heads, MlaWeights& out,
                        const std::string& attn) {
  const int64_t hidden = c.hidden_size, h = c.n_heads, r = c.kv_lora_rank;
  const int64_t dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim, dq = dn + dr;
  const std::string m = p + attn;
  std::string q_name = m + "q_proj.weight";
  int64_t q_in = hidden;
  if (c.q_lora_rank > 0) {
    q_in = c.q_lora_rank;
    q_name = m + "q_b_proj.weight";
    BRIGADE_ASSIGN_OR_RETURN(out.q_a, w.matrix(m + "q_a_proj.weight", q_in, hidden));
    BRIGADE_ASSIGN_OR_RETURN(out.q_a_norm, w.vector_f32({m + "q_a_layernorm.weight"}, {q_in}));
  }
  BRIGADE_ASSIGN_OR_RETURN(out.q_nope, w.row_blocks(q_name, h * dq, q_in, dq, {0, dn}, false, heads));
  BRIGADE_ASSIGN_OR_RETURN(out.q_pe, w.row_blocks(q_name, h * dq, q_in, dq, {dn, dr}, false, heads));
  const std::string kv_a = m + "kv_a_proj_with_mqa.weight";
  BRIGADE_ASSIGN_OR_RETURN(out.kv_a_latent, w.matrix(kv_a, r + dr, hidden, {0, r}));
  BRIGADE_ASSIGN_OR_RETURN(out.kv_a_pe, w.matrix(kv_a, r + dr, hidden, {r, dr}));
  BRIGADE_ASSIGN_OR_RETURN(out.kv_a_norm, w.vector_f32({m + "kv_a_layernorm.weight"}, {r}));
  if (w.has(m + "k_b_proj.weight")) {  // GGUF's kv_b_proj split per head: W_UK^T [H R, dn], W_UV [H dv, R] as stored
    BRIGADE_ASSIGN_OR_RETURN(out.w_uk, w.row_blocks(m + "k_b_proj.weight", h * r, dn, r, {0, r}, false, heads));
    BRIGADE_ASSIGN_OR_RETURN(out.w_uv, w.row_blocks(m + "v_b_proj.weight", h * dv, r, dv, {0, dv}, false, heads));
  } else {
    const std::string kv_b = m + "kv_b_proj.weight";
    BRIGADE_ASSIGN_OR_RETURN(out.w_uk, w.row_blocks(kv_b, h * (dn + dv), r, dn + dv, {0, dn}, /*transpose_blocks=*/true, heads));
    BRIGADE_ASSIGN_OR_RETURN(out.w_uv, w.row_blocks(kv_b, h * (dn + dv), r, dn + dv, {dn, dv}, false, heads));
  }
  const Slice o_cols = heads.size < 0 ? Slice{} : Slice{heads.begin * dv, heads.size * dv};
  BRIGADE_ASSIGN_OR_RETURN(out.o, w.matrix(m + "o_proj.weight", hidden, h * dv, {}, o_cols));
  return Status::ok();
}

Status allocate_mla_scratch(Backend& backend, const ModelConfig& c, int64_t n_heads, int64_t rows, MlaScratch& s) {
  const DType act = backend.activation_dtype();
  const auto make = [&](OwnedTensor& dst, int64_t cols) -> Status {
    BRIGADE_ASSIGN_OR_RETURN(dst, alloc_tensor(backend, act, rows, cols));
    return Status::ok();
  };
  const int64_t h = n_heads, r = c.kv_lora_rank;
  if (c.q_lora_rank > 0) {
    BRIGADE_RETURN_IF_ERROR(make(s.q_a, c.q_lora_rank));
    BRIGADE_RETURN_IF_ERROR(make(s.q_in, c.q_lora_rank));
  }
  BRIGADE_RETURN_IF_ERROR(make(s.q_nope, h * c.qk_nope_head_dim));
  BRIGADE_RETURN_IF_ERROR(make(s.q_pe, h * c.qk_rope_head_dim));
  BRIGADE_RETURN_IF_ERROR(make(s.latent, r));
  BRIGADE_RETURN_IF_ERROR(make(s.latent_normed, r));
  BRIGADE_RETURN_IF_ERROR(make(s.k_pe, c.qk_rope_head_dim));
  BRIGADE_RETURN_IF_ERROR(make(s.q_lat, h * r));
  BRIGADE_RETURN_IF_ERROR(make(s.o_lat, h * r));
  return make(s.attn, h * c.v_head_dim);
}

int64_t mla_linear_params(const ModelConfig& c) {
  const int64_t h = c.hidden_size, heads = c.n_heads, r = c.kv_lora_rank, q_in = c.q_lora_rank > 0 ? c.q_lora_rank : h;
  const int64_t dq = c.qk_nope_head_dim + c.qk_rope_head_dim;
  return (c.q_lora_rank > 0 ? h * q_in : 0) + q_in * heads * dq + h * (r + c.qk_rope_head_dim) +
         r * heads * (c.qk_nope_head_dim + c.v_head_dim) + heads * c.v_head_dim * h;
}

MlaStep mla_project(Backend& b, const ModelConfig& c, const MlaWeights& a, const MlaScratch& s, const Tensor& normed) {
  const int64_t n = normed.dim(0);
  MlaStep t;
  t.q_in = normed;
  if (!a.q_a.tensor.empty()) {
    b.matmul(normed, a.q_a.tensor, Tensor(), s.q_a.tensor.rows(0, n));
    t.q_in = s.q_in.tensor.rows(0, n);
    b.rms_norm(s.q_a.tensor.rows(0, n), a.q_a_norm.tensor, c.mla_norm_eps, t.q_in);
  }
  t.q_nope = s.q_nope.tensor.rows(0, n), t.q_pe = s.q_pe.tensor.rows(0, n), t.k_pe = s.k_pe.tensor.rows(0, n);
  t.latent_normed = s.latent_normed.tensor.rows(0, n);
  t.q_lat = s.q_lat.tensor.rows(0, n), t.o_lat = s.o_lat.tensor.rows(0, n), t.attn = s.attn.tensor.rows(0, n);
  const Tensor latent = s.latent.tensor.rows(0, n);
  b.matmul(t.q_in, a.q_nope.tensor, Tensor(), t.q_nope);
  b.matmul(t.q_in, a.q_pe.tensor, Tensor(), t.q_pe);
  b.matmul(normed, a.kv_a_latent.tensor, Tensor(), latent);
  b.matmul(normed, a.kv_a_pe.tensor, Tensor(), t.k_pe);
  b.rms_norm(latent, a.kv_a_norm.tensor, c.mla_norm_eps, t.latent_normed);
  return t;
}

void mla_cache_and_absorb(Backend& b, const MlaWeights& a, const MlaStep& step, int n_heads, const KvLayer& cache,
                          const Tensor& slots) {
  b.write_mla_kv(cache, step.latent_normed, step.k_pe, slots);
  b.head_matmul(step.q_nope, a.w_uk.tensor, n_heads, step.q_lat);
}

void mla_output(Backend& b, const MlaWeights& a, const MlaStep& step, int n_heads, const Tensor& delta) {
  b.head_matmul(step.o_lat, a.w_uv.tensor, n_heads, step.attn);
  b.matmul(step.attn, a.o.tensor, Tensor(), delta);
}

Status check_mla_backend(const ModelConfig& c, const Backend& backend, const LoadOptions& options) {
  if (options.max_batch_tokens < 1)
    return invalid_argument("max_batch_tokens must be >= 1 (got " + std::to_string(options.max_batch_tokens) + ")");
  if (!backend.supports_mla() || !backend.supports_moe())
    return unsupported("backend '" + backend.name() + "' has no MLA / mixture-of-experts ops; " + c.arch +
                       " runs on the CPU and CUDA backends");
  if (c.dsa.enabled() && !backend.supports_dsa())
    return unsupported("backend '" + backend.name() + "' has no DeepSeek Sparse Attention ops (dsa_topk, "
                       "mla_sparse_attention); " + c.arch + " runs on the CPU and CUDA backends");
  return Status::ok();
}

Status check_mla_weight_dtype(const ModelConfig& c, std::optional<DType> weight_dtype) {
  if (weight_dtype && *weight_dtype != DType::f32 && *weight_dtype != DType::bf16 && *weight_dtype != DType::f16)
    return unsupported(std::string("weight dtype ") + dtype_name(*weight_dtype) + " is not supported for " + c.arch +
                       " (its MLA projections and experts stay float); supported: f32, f16, bf16, auto");
  return Status::ok();
}

}  // namespace brigade
