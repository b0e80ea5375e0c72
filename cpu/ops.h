// Internal to cpu/: the Backend ops as free functions over host tensors. CpuBackend
// (cpu_backend.cpp) forwards to these; the contracts and shapes are those of core/backend.h.
// Each op splits its work over ctx.pool and calls the SIMD kernels of ctx.kernels.
#pragma once

#include <span>

#include "core/backend.h"
#include "core/thread_pool.h"
#include "cpu/kernels.h"

namespace brigade::cpu {

struct CpuContext {
  ThreadPool* pool = nullptr;
  const Kernels* kernels = nullptr;
};

// Activation rows at or above this count take the packed-panel BLAS path (compute bound);
// fewer rows stream the weights once through the register-blocked kernels (memory bound).
constexpr int64_t kBlasMinRows = 48;
// Block-quantized weights switch earlier: their prefill kernel (int8 panels of 8 repacked weight
// rows) beats the decode kernel (4 activation rows per pass over a weight row) from 8 rows on,
// about 2x at 8-47 rows (docs/perf.md "Quantized GEMM from 8 rows"), which batched decode and
// MoE prefill (an expert's share of the tokens) run at.
constexpr int64_t kQuantGemmMinRows = 8;

// matmul_*.cpp
void matmul(const CpuContext& c, const Tensor& x, const Tensor& w, const Tensor& bias,
            const Tensor& out);
// Backend::matmul_stacked: every weight block-quantized, all of x's width k.
void matmul_stacked(const CpuContext& c, const Tensor& x, std::span<const Tensor> ws, const Tensor& bias,
                    const Tensor& out);

// attention.cpp
void attention(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const KvLayer& cache,
               const AttentionMeta& meta, float scale, const Tensor& out);

// The paged-attention core of attention and mla_attention (attention.cpp): query head
// q = g * group + h (g < n_kv, h < group) of token row i is q[i * row_width + q * head_dim ..
// + head_dim) and reads cache kv head g; its output's first out_dim values go to
// out[i * out_width + q * out_dim ..). cache.v may alias cache.k (MLA: the value is the latent,
// the first out_dim of each row).
struct PagedAttentionArgs {
  const float* q = nullptr;
  int64_t row_width = 0;
  int n_kv = 0;
  int group = 0;
  int head_dim = 0;
  int out_dim = 0;
  float* out = nullptr;
  int64_t out_width = 0;
  float scale = 1.0f;
  const float* sinks = nullptr;  // [n_kv * group] (AttentionMeta::sinks), or null
  const float* alibi = nullptr;  // [n_kv * group] (AttentionMeta::alibi_slopes), or null
};
void paged_attention(const CpuContext& c, const PagedAttentionArgs& a, const KvLayer& cache, const AttentionMeta& meta);

// dsa.cpp (Backend's DeepSeek Sparse Attention ops)
void write_kv_columns(const CpuContext& c, const KvLayer& cache, const Tensor& x, int col, const Tensor& slots);
void dsa_topk(const CpuContext& c, const Tensor& q, const Tensor& weights, const KvLayer& cache, const DsaLayout& l,
              const AttentionMeta& meta, const Tensor& out);
void mla_sparse_attention(const CpuContext& c, const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l,
                          const KvLayer& cache, const AttentionMeta& meta, const Tensor& indices, float scale,
                          const Tensor& out);

// mla.cpp (Backend's MLA ops)
void head_matmul(const CpuContext& c, const Tensor& x, const Tensor& w, int n_heads, const Tensor& out);
void write_mla_kv(const CpuContext& c, const KvLayer& cache, const Tensor& latent, const Tensor& k_pe,
                  const Tensor& slots);
void mla_attention(const CpuContext& c, const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l,
                   const KvLayer& cache, const AttentionMeta& meta, float scale, const Tensor& out);

// norm_ops.cpp
void rms_norm(const CpuContext& c, const Tensor& x, const Tensor& weight, float eps,
              const Tensor& out);
void add_rms_norm(const CpuContext& c, const Tensor& residual, const Tensor& x,
                  const Tensor& weight, float eps, const Tensor& out);
void qk_head_norm(const CpuContext& c, const Tensor& qkv, const QkvLayout& l,
                  const Tensor& q_weight, const Tensor& k_weight, float eps);
void qk_head_layer_norm(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight,
                        const Tensor& k_weight, float eps);
void rope(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& positions,
          const RopeConfig& rope);
void attention_temperature(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& positions,
                           float floor_scale, float scale, float offset);
void qk_sum_squares(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& sums);
void qk_norm_by_sums(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& sums, int64_t q_total,
                     int64_t k_total, const Tensor& q_weight, const Tensor& k_weight, float eps);

// row_ops.cpp
void embedding(const CpuContext& c, const Tensor& table, const Tensor& ids, const Tensor& out);
void add(const CpuContext& c, const Tensor& a, const Tensor& b);
void add_row_bias(const CpuContext& c, const Tensor& x, const Tensor& bias);
void silu_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out);
void gelu_tanh_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out);
void gelu_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out);
void relu2_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out);
void quantize_rows_int8(const CpuContext& c, const Tensor& x);
void xielu(const CpuContext& c, const Tensor& x, const XieluParams& p);
void scale(const CpuContext& c, const Tensor& x, float s);
void softcap(const CpuContext& c, const Tensor& x, float cap);
void clamp(const CpuContext& c, const Tensor& x, float lo, float hi);
void write_kv(const CpuContext& c, const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
              const Tensor& slots);
void gather_rows(const CpuContext& c, const Tensor& x, const Tensor& rows, const Tensor& out);

// vision_ops.cpp (Backend::supports_vision)
// LayerNorm of each row over d (bias empty: none); layer_norm_row one row of it, shared by
// qk_head_layer_norm (in and out may alias).
void layer_norm(const CpuContext& c, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                const Tensor& out);
void layer_norm_row(const float* x, const float* w, const float* b, float eps, float* out, int64_t d);
void gelu_tanh(const CpuContext& c, const Tensor& x);
void gelu(const CpuContext& c, const Tensor& x);
void quick_gelu(const CpuContext& c, const Tensor& x);
void scatter_rows(const CpuContext& c, const Tensor& y, const Tensor& rows, const Tensor& src);
void blend_rows(const CpuContext& c, const Tensor& x, const Tensor& rows, const Tensor& weights, const Tensor& out);

// ssm_ops.cpp (Backend::supports_ssm)
void ssm_conv(const CpuContext& c, const Tensor& in, int64_t col, const Tensor& weight, const Tensor& bias,
              const SsmSeqs& seqs, const Tensor& conv_state, const Tensor& out);
void short_conv(const CpuContext& c, const Tensor& in, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                const Tensor& conv_state, const Tensor& out);
void ssm_scan_diag(const CpuContext& c, const Tensor& x, const Tensor& dt_in, const Tensor& b, const Tensor& cm,
                   const Tensor& z, int64_t z_col, const Tensor& a, const Tensor& skip, const SsmSeqs& seqs,
                   const Tensor& state, const Tensor& out);
void ssm_scan(const CpuContext& c, const Tensor& proj, const Tensor& xbc, const SsmLayout& l, const SsmParams& p,
              const SsmSeqs& seqs, const Tensor& state, const Tensor& out);
void gated_delta(const CpuContext& c, const Tensor& qkv, const Tensor& proj, int64_t z_col, const SsmLayout& l,
                 const SsmParams& p, const SsmSeqs& seqs, const Tensor& state, const Tensor& out);
void kda(const CpuContext& c, const Tensor& qkv, const Tensor& f, const Tensor& beta, const SsmLayout& l,
         const SsmParams& p, const SsmSeqs& seqs, const Tensor& state, const Tensor& out);
void lightning_attention(const CpuContext& c, const Tensor& qkv, const Tensor& decay, const SsmLayout& l,
                         const SsmSeqs& seqs, const Tensor& state, const Tensor& out);
void sigmoid_mul(const CpuContext& c, const Tensor& x, const Tensor& gate);
void relu_squared(const CpuContext& c, const Tensor& x);
// Gemma 3n (cpu/gemma3n_ops.cpp; Backend::supports_altup).
void altup_predict(const CpuContext& c, const Tensor& streams, const Tensor& router, const Tensor& coefs,
                   const Tensor& out);
void altup_correct(const CpuContext& c, const Tensor& pred, const Tensor& activated, const Tensor& router,
                   const Tensor& coefs, int active);
void match_rms(const CpuContext& c, const Tensor& x, const Tensor& ref, float eps);
void gaussian_topk(const CpuContext& c, const Tensor& x, int64_t cols, float k);
void v_head_norm(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, float eps);
void gelu_tanh_gate(const CpuContext& c, const Tensor& x, const Tensor& y);

// lora_ops.cpp
void scatter_add_rows(const CpuContext& c, const Tensor& y, const Tensor& rows, const Tensor& src);

// moe.cpp
void moe_route(const CpuContext& c, const Tensor& router_logits, const MoeRouting& r, const Tensor& ids,
               const Tensor& weights);
size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter);
void moe_experts(const CpuContext& c, const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                 const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace, const Tensor& out);
void moe_experts_split(const CpuContext& c, const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down,
                       const Tensor& ids, const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace,
                       const Tensor& out);
void moe_identity_experts(const CpuContext& c, const Tensor& x, const Tensor& ids, const Tensor& weights,
                          int n_experts, const Tensor& out);

// A [n] f32 copy of a small vector parameter (norm weight, bias) of dtype f32, bf16 or f16,
// into `dst`; returns a pointer to it (or to the tensor itself when it is already f32).
const float* as_f32(const CpuContext& c, const Tensor& t, float* dst);

}  // namespace brigade::cpu
