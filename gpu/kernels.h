// Internal to gpu/: launchers for the CUDA kernels (*.cu). Plain C++ so cuda_backend.cpp stays a
// host file. Every launcher queues work on `stream`, checks the launch, and returns at once.
// Activations are bf16 (passed as void*); shapes and contracts are those of core/backend.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/host_device.h"

namespace brigade::gpu {

// out [n, d] bf16 = table[ids[i]]; table [vocab, d] f32 or bf16. Ids outside [0, vocab) give a
// zero row (the model rejects them before the step; a device cannot stop the process cheaply).
void launch_embedding(const void* table, DType table_t, const int32_t* ids, int64_t n, int64_t d,
                      int64_t vocab, void* out, cudaStream_t stream);
// out [n, d] = x / rms(x) * w; when residual is not null, residual += x first and the sum is
// normalised (add_rms_norm). w [d] f32 or bf16. f32 arithmetic.
void launch_rms_norm(void* residual, const void* x, const void* w, DType w_t, float eps, void* out,
                     int64_t n, int64_t d, cudaStream_t stream);
// out [n, d] = layer_norm(x) * w (+ b where b is not null), x and out bf16; w, b [d] f32 or bf16.
void launch_layer_norm(const void* x, const void* w, DType w_t, const void* b, DType b_t, float eps, void* out,
                       int64_t n, int64_t d, cudaStream_t stream);
// a [count] += b [count], bf16.
void launch_add(void* a, const void* b, int64_t count, cudaStream_t stream);
// out [n, inter] = silu(gate_up[:, :inter]) * gate_up[:, inter:].
void launch_silu_mul(const void* gate_up, void* out, int64_t n, int64_t inter, cudaStream_t stream);
// out [n, inter] = gelu_tanh(gate_up[:, :inter]) * gate_up[:, inter:] (Backend::gelu_tanh_mul), or
// with exact the erf GELU (Backend::gelu_mul).
void launch_gelu_mul(const void* gate_up, void* out, int64_t n, int64_t inter, bool exact, cudaStream_t stream);
// x [count] bf16 = gelu(x) in place: the exact erf form, or the tanh one (Backend::gelu, gelu_tanh).
void launch_gelu(void* x, int64_t count, bool exact, cudaStream_t stream);
// x [count] bf16 = xielu(x) in place (Backend::xielu's XieluParams, field by field).
void launch_xielu(void* x, int64_t count, float alpha_p, float alpha_n, float beta, float eps, cudaStream_t stream);
// x [count] bf16 *= s.
void launch_scale(void* x, float s, int64_t count, cudaStream_t stream);
// x [count] f32 = tanh(x / cap) * cap.
void launch_softcap(float* x, float cap, int64_t count, cudaStream_t stream);
// x [count] bf16 = clamp(x, lo, hi) (NaN stays NaN).
void launch_clamp(void* x, float lo, float hi, int64_t count, cudaStream_t stream);
// out [n, m] (+)= bias [m]; out bf16 or f32, bias f32 or bf16.
void launch_add_bias(void* out, DType out_t, const void* bias, DType bias_t, int64_t n, int64_t m,
                     cudaStream_t stream);

struct HeadShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  BRIGADE_HOST_DEVICE int row_width() const { return (n_heads + 2 * n_kv_heads) * head_dim; }
};

// RMSNorm of the q and k heads of qkv [n, row_width] in place: per head with weights [head_dim],
// or (whole) q's heads as one vector and k's as another, weights [n_heads * head_dim] and
// [n_kv_heads * head_dim].
void launch_qk_head_norm(void* qkv, int64_t n, HeadShape h, const void* q_w, const void* k_w,
                         DType w_t, float eps, bool whole, cudaStream_t stream);
// LayerNorm of each q and k head in place, head h with weights [h * head_dim, (h + 1) * head_dim)
// of q_w (q heads) or k_w (k heads), f32 or bf16 (Backend::qk_head_layer_norm).
void launch_qk_head_layer_norm(void* qkv, int64_t n, HeadShape h, const void* q_w, const void* k_w, DType w_t,
                               float eps, cudaStream_t stream);
// The whole-width norms under tensor parallelism (Backend::qk_sum_squares, qk_norm_by_sums):
// sums [n, 2] f32 of this rank's q and k parts; then each part scaled by its row's whole norm.
void launch_qk_sum_squares(const void* qkv, int64_t n, HeadShape h, float* sums, cudaStream_t stream);
void launch_qk_norm_by_sums(void* qkv, int64_t n, HeadShape h, const float* sums, int64_t q_total, int64_t k_total,
                            const void* q_w, const void* k_w, DType w_t, float eps, cudaStream_t stream);
// RoPE of the q and k heads in place. inv_freq [rotary_dim / 2] f32 in device memory.
void launch_rope(void* qkv, int64_t n, HeadShape h, const int32_t* positions, const float* inv_freq,
                 int rotary_dim, bool neox, float attention_factor, cudaStream_t stream);
// Each q head of row i times log1p(floor((positions[i] + offset) / floor_scale)) * scale + 1 in
// place (Backend::attention_temperature).
void launch_attention_temperature(void* qkv, int64_t n, HeadShape h, const int32_t* positions, float floor_scale,
                                  float scale, float offset, cudaStream_t stream);
// K and V heads of qkv row i -> pages at slots[i] (negative: skipped; >= n_slots: skipped).
void launch_write_kv(void* k, void* v, DType kv_t, const void* qkv, int64_t n, HeadShape h,
                     const int32_t* slots, int64_t n_slots, cudaStream_t stream);
// out [r] rows = x rows[i] (row_bytes each, a multiple of 2); indices outside [0, n) give zeros.
void launch_gather_rows(const void* x, int64_t row_bytes, const int32_t* rows, int64_t r, int64_t n,
                        void* out, cudaStream_t stream);
// y [n, d] bf16 rows rows[i] += src [r, d] bf16 row i (lora_ops.cu); indices outside [0, n) skipped.
void launch_scatter_add_rows(void* y, int64_t d, const int32_t* rows, int64_t r, int64_t n, const void* src,
                             cudaStream_t stream);

// Paged attention (AttentionMeta in core/backend.h), decode and prefill in one kernel: a block
// owns (sequence, kv head, block of query rows, KV split) and walks its KV range tile by tile
// with an online softmax. With n_splits > 1 the splits write partials and a second kernel merges
// them (flash decoding). Launch geometry depends only on n_seqs, max_q_len and n_splits, never on
// the values of q_start / ctx_len, which are read on the device.
struct AttentionArgs {
  const void* qkv = nullptr;  // [n_rows, row_width] bf16
  HeadShape h;
  const void* k = nullptr;    // [n_pages, page_size, n_kv_heads, head_dim]
  const void* v = nullptr;
  DType kv_t = DType::bf16;   // bf16 or f32
  int page_size = 0;
  const int32_t* q_start = nullptr;
  const int32_t* ctx_len = nullptr;
  const int32_t* block_table = nullptr;  // [n_seqs, max_blocks]
  int max_blocks = 0;
  int n_seqs = 0;
  int max_q_len = 0;
  int n_rows = 0;             // rows of qkv (= q_start[n_seqs])
  int sliding_window = 0;
  int chunk = 0;              // AttentionMeta::chunk
  float scale = 1.0f;
  float softcap = 0.0f;       // > 0: scores become tanh(s / softcap) * softcap (AttentionMeta::softcap)
  const float* sinks = nullptr;  // [n_heads] f32 (AttentionMeta::sinks), or null
  const float* alibi = nullptr;  // [n_heads] f32 (AttentionMeta::alibi_slopes), or null
  void* out = nullptr;        // [n_rows, n_heads * head_dim] bf16
  int n_splits = 1;
  float* partial = nullptr;   // [n_splits, n_rows, n_heads, head_dim + 2] f32 when n_splits > 1
};
// Floats of the partial workspace for these args.
int64_t attention_partial_floats(const AttentionArgs& a);
// The widest head launch_attention takes (a multiple of 8 up to it): Backend::max_attention_head_dim.
constexpr int kAttentionMaxHeadDim = 512;
// Launch geometry for a head shape and the step's longest query run. A block holds rows x query
// heads <= 32 queries for head_dim <= 256, <= 16 up to 512 (shared memory): the kv head's whole
// GQA group where it fits, else the largest divisor of it that does (head_slices blocks per kv head).
struct AttentionGrid {
  int heads_per_block = 1;
  int head_slices = 1;  // group / heads_per_block
  int rows_per_block = 1;
  int n_row_blocks = 1;  // ceil(max_q_len / rows_per_block)
};
AttentionGrid attention_grid(const HeadShape& h, int max_q_len);
// Dynamic shared memory of one block. head_dim must be a multiple of 8.
size_t attention_smem_bytes(int head_dim, int queries_per_block);
// The most any launch needs (head_dim 512 at 16 queries: 194 KiB), which the device must allow a
// block; attention_init allows each kernel instance its own bucket's most, once per process.
size_t attention_max_smem_bytes();
void attention_init();
void launch_attention(const AttentionArgs& a, cudaStream_t stream);

// Sampling (SampleParams in core/sample_params.h): logits [n, vocab] f32 -> tokens [n] i32.
void launch_argmax(const float* logits, int64_t n, int64_t vocab, int32_t* tokens, cudaStream_t stream);
void launch_sample(const float* logits, const void* params, int64_t n, int64_t vocab, int32_t* tokens,
                   cudaStream_t stream);

// tokens[i] = table[index[i]] where index[i] >= 0 (Backend::gather_tokens).
void launch_gather_tokens(const int32_t* table, const int32_t* index, int64_t n, int32_t* tokens, cudaStream_t stream);
// table[index[i]] = tokens[i] where index[i] >= 0 (Backend::scatter_tokens).
void launch_scatter_tokens(const int32_t* tokens, const int32_t* index, int64_t n, int32_t* table, cudaStream_t stream);

// q [count] E4M3 codes = e4m3(x / scale) for x [count] f32/f16/bf16, with the dynamic per-tensor
// scale = max(absmax(x) / 448, FLT_MIN) written to *scale (device f32); rounding to nearest even,
// saturating at +-448 (f32_to_e4m3 in core/dtype.h is the host equivalent). amax is one device
// u32 of scratch. Three stream operations (a memset and two kernels), no host sync: capturable.
void launch_quantize_e4m3(const void* x, DType x_t, int64_t count, float* scale, unsigned* amax, uint8_t* q,
                          cudaStream_t stream);

// Mixture of experts (moe.cu; contracts of Backend::moe_route / moe_experts). Routing: logits
// [n, E] f32 -> ids [n, k] i32, weights [n, k] f32 (E <= 8192). Experts: x, out [n, d] bf16,
// gate_up [E * 2I, d] and down [E * d, I] bf16, workspace of moe_workspace_bytes.
size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter);
// Backend::moe_route's rule (MoeRouting in core/backend.h) in plain fields; n_group <= 64.
struct RouteArgs {
  const float* logits = nullptr;  // [n, E]
  const float* bias = nullptr;    // [E] or null
  const float* expert_scale = nullptr;  // [E] or null: each chosen weight times its expert's (MoeRouting::expert_scale)
  int n_experts = 0;
  int k = 1;
  bool sigmoid = false;
  bool select_on_logits = false;  // rank logits + bias, not scores + bias (MoeRouting::select_on_logits)
  bool normalize = false;
  int n_group = 1;
  int topk_group = 1;
  int group_score = 0;  // 0 none, 1 max, 2 top-2 sum
  bool sparsemixer = false;  // Phi-3.5-MoE's rule (k 2; the fields above but n_experts unused)
  float jitter_eps = 0.0f;   // its mask threshold
  float scale = 1.0f;
  int first_expert = 0;     // ids are written relative to it (MoeRouting::first_expert)
  int32_t* ids = nullptr;   // [n, k]
  float* weights = nullptr; // [n, k]
};
void launch_moe_route(const RouteArgs& a, int64_t n, cudaStream_t stream);
// The experts' biases and clamped SwiGLU (MoeExpertMlp in core/backend.h); null / 0 = none.
struct ExpertMlpArgs {
  const float* gate_up_bias = nullptr;  // [E * 2I]
  const float* down_bias = nullptr;     // [E * d]
  float swiglu_limit = 0.0f;
  float swiglu_alpha = 1.0f;
  bool weight_on_input = false;  // MoeExpertMlp::weight_on_input: gate and up values times the pair's weight
  bool gelu_tanh = false;        // MoeExpertMlp::gelu_tanh: act = gelu_tanh(g) * u (Gemma 4)
  const float* weights = nullptr;  // [pairs] with weight_on_input
};
void launch_moe_experts(const void* x, const void* gate_up, const void* down, const int32_t* ids, const float* weights,
                        const ExpertMlpArgs& mlp, int64_t n, int k, int64_t d, int64_t inter, int n_experts,
                        void* workspace, void* out, cudaStream_t stream);
// Backend::moe_identity_experts: x, out [n, d] bf16, ids and weights [n, k].
void launch_moe_identity_experts(const void* x, const int32_t* ids, const float* weights, int n_experts, int64_t n, int k,
                                 int64_t d, void* out, cudaStream_t stream);

// MLA (mla.cu; contracts of Backend::head_matmul / write_mla_kv / mla_attention). bf16
// activations and weights; the latent cache bf16 or f32 [n_pages, page_size, 1, R + rope_dim].
// head_matmul: out [n, H b] = per head w_h [b, a] · x[t, h] (x [n, H a]).
void launch_head_matmul(const void* x, const void* w, int64_t n, int n_heads, int64_t a, int64_t b, void* out,
                        cudaStream_t stream);
void launch_write_mla_kv(void* cache, DType kv_t, const void* latent, const void* k_pe, int64_t n, int kv_lora_rank,
                         int rope_dim, const int32_t* slots, int64_t n_slots, cudaStream_t stream);
struct MlaAttentionArgs {
  const void* q_lat = nullptr;  // [n_rows, H R] bf16
  const void* q_pe = nullptr;   // [n_rows, H rope_dim] bf16
  const void* cache = nullptr;
  DType kv_t = DType::bf16;
  int n_heads = 0;
  int kv_lora_rank = 0;  // R: a multiple of 32, <= 1024
  int rope_dim = 0;
  int page_size = 0;
  const int32_t* q_start = nullptr;
  const int32_t* ctx_len = nullptr;
  const int32_t* block_table = nullptr;
  int max_blocks = 0;
  int n_seqs = 0;
  int n_rows = 0;
  float scale = 1.0f;
  void* out = nullptr;  // [n_rows, H R] bf16
  // mla_sparse_attention: [n_rows, topk] positions per row (-1 = none) instead of its whole context
  const int32_t* indices = nullptr;
  int topk = 0;
};
void launch_mla_attention(const MlaAttentionArgs& a, cudaStream_t stream);

// DeepSeek Sparse Attention (dsa.cu; contracts of core/backend.h "DeepSeek Sparse Attention").
void launch_write_kv_columns(void* cache, DType kv_t, int64_t width, const void* x, int64_t n, int d, int col,
                             const int32_t* slots, int64_t n_slots, cudaStream_t stream);
// A step's rows and paged context as dsa.cu reads them (AttentionMeta's tensors on the device).
struct PagedRows {
  int page_size = 0;
  const int32_t* q_start = nullptr;
  const int32_t* ctx_len = nullptr;
  const int32_t* block_table = nullptr;
  int max_blocks = 0;
  int n_seqs = 0;
  int n_rows = 0;
};
struct DsaTopkArgs {
  const void* q = nullptr;        // [n_rows, H D] bf16
  const void* weights = nullptr;  // [n_rows, H] bf16
  const void* cache = nullptr;    // [n_pages, page_size, 1, width] bf16 or f32
  DType kv_t = DType::bf16;
  int64_t width = 0;
  int col = 0;
  int n_heads = 0;
  int head_dim = 0;
  int topk = 0;
  float scale = 1.0f;
  PagedRows rows;
  float* workspace = nullptr;  // rows of ws_stride scores
  int64_t ws_numel = 0;
  int64_t ws_stride = 0;       // >= the longest context
  int32_t* out = nullptr;      // [n_rows, topk]
};
void launch_dsa_topk(const DsaTopkArgs& a, int max_ctx_len, cudaStream_t stream);

// State-space ops (ssm.cu; contracts of core/backend.h "state-space layers"). bf16 activations,
// f32 states and parameters. The sequence table (SsmSeqs) stays in device memory: sequences whose
// rows or slots fall outside the step or the state tensor are skipped.
struct SsmSeqArgs {
  const int32_t* q_start = nullptr;     // [n_seqs + 1]
  const int32_t* slots = nullptr;       // [n_seqs]
  const int32_t* fresh = nullptr;       // [n_seqs]
  const int32_t* save_rows = nullptr;   // [n_seqs], or null: no snapshots
  const int32_t* save_slots = nullptr;  // [n_seqs] with save_rows
  int n_seqs = 0;
  int64_t n_rows = 0;   // rows of the step's activations
  int64_t n_slots = 0;  // slots of the state tensor
};
// Taps of the causal convolution the kernel keeps in registers.
constexpr int kMaxConvKernel = 8;
// Dynamic shared memory the scans may use (a block's whole state lives there); H100/H200 allow
// 227 KiB per block.
constexpr size_t kSsmMaxSmemBytes = 200u << 10;
size_t ssm_scan_smem_bytes(int head_dim, int state_size);
size_t ssm_scan_diag_smem_bytes(int state_size);
size_t gated_delta_smem_bytes(int head_dim, int state_size);
size_t kda_smem_bytes(int head_dim, int state_size);
size_t lightning_smem_bytes(int head_dim);
// Backend::ssm_conv (short_conv false: out = silu(conv of in's columns [col, col + ch))) and
// Backend::short_conv (true: in [n, 3 ch] = B | C | x, out = C * conv(B * x)); in [n, width].
void launch_ssm_conv(const void* in, int64_t width, int64_t col, int64_t ch, int kernel, const float* weight,
                     const float* bias, bool short_conv, const SsmSeqArgs& seqs, float* state, void* out,
                     cudaStream_t stream);
// What ssm_scan and gated_delta share: the heads (SsmLayout), the per-head parameters (SsmParams),
// the state and the output.
struct SsmHeadArgs {
  int heads = 0, head_dim = 0, groups = 1, state_size = 0;
  const float *a = nullptr, *dt_bias = nullptr;
  const float* norm_weight = nullptr;  // ssm_scan: [d_inner] or null (gate only); gated_delta: [P]
  float norm_eps = 1e-5f;
  float* state = nullptr;  // [slots, H, P, N]
  void* out = nullptr;     // [n, H P]
};
struct SsmScanArgs : SsmHeadArgs {  // Backend::ssm_scan
  const void* proj = nullptr;  // [n, proj_width]
  int64_t proj_width = 0;
  const void* xbc = nullptr;   // [n, conv_dim]
  int64_t conv_dim = 0;
  const float* d = nullptr;
  float dt_min = 0.0f, dt_max = 0.0f;  // dt_max: INFINITY for no upper bound
};
void launch_ssm_scan(const SsmScanArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream);
struct SsmScanDiagArgs {  // Backend::ssm_scan_diag
  const void *x = nullptr, *dt = nullptr, *b = nullptr, *c = nullptr, *z = nullptr;
  int64_t z_width = 0, z_col = 0, dim = 0;
  int state_size = 0;
  const float *a = nullptr, *skip = nullptr;
  float* state = nullptr;  // [slots, D, N]
  void* out = nullptr;     // [n, D]
};
void launch_ssm_scan_diag(const SsmScanDiagArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream);
struct GatedDeltaArgs : SsmHeadArgs {  // Backend::gated_delta
  const void* qkv = nullptr;  // [n, conv_dim]
  int64_t conv_dim = 0;
  const void* proj = nullptr;  // [n, proj_width]
  int64_t proj_width = 0, z_col = 0;
  bool tiled_heads = false;
};
void launch_gated_delta(const GatedDeltaArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream);
struct KdaArgs : SsmHeadArgs {  // Backend::kda (norm_weight unused; groups = heads)
  const void* qkv = nullptr;   // [n, 2 H N + H P]
  const void* f = nullptr;     // [n, H N]
  const void* beta = nullptr;  // [n, H]
};
void launch_kda(const KdaArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream);
struct LightningArgs : SsmHeadArgs {  // Backend::lightning_attention (a: decay [H]; groups = heads, N = P)
  const void* qkv = nullptr;  // [n, 3 H D]: per head q | k | v, before the SiLU
};
void launch_lightning_attention(const LightningArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream);
// x [count] bf16 *= sigmoid(gate [count] bf16); x [count] bf16 = relu(x)^2.
void launch_sigmoid_mul(void* x, const void* gate, int64_t count, cudaStream_t stream);
void launch_relu_squared(void* x, int64_t count, cudaStream_t stream);
// BitNet (gpu/ssm.cu): out [n, I] bf16 = relu(gate_up[:, :I])^2 * gate_up[:, I:] (Backend::relu2_mul);
// x [n, d] bf16 quantized to int8 per row and back in place (Backend::quantize_rows_int8).
void launch_relu2_mul(const void* gate_up, void* out, int64_t n, int64_t inter, cudaStream_t stream);
void launch_quantize_rows_int8(void* x, int64_t n, int64_t d, cudaStream_t stream);

// Gemma 3n (gpu/gemma3n.cu; Backend::supports_altup). streams/out [N, n, d], router [n, N],
// pred [N, n, d], activated [n, d] bf16; coefs f32 ([N * N, N] / [N, N]); x, ref [n, d] bf16.
void launch_altup_predict(const void* streams, const void* router, const float* coefs, void* out, int n_streams,
                          int64_t n, int64_t d, cudaStream_t stream);
void launch_altup_correct(void* pred, const void* activated, const void* router, const float* coefs, int active,
                          int n_streams, int64_t n, int64_t d, cudaStream_t stream);
void launch_match_rms(void* x, const void* ref, int64_t n, int64_t d, float eps, cudaStream_t stream);
// x [n, width] bf16: its first cols columns per row.
void launch_gaussian_topk(void* x, int64_t n, int64_t width, int64_t cols, float k, cudaStream_t stream);
void launch_v_head_norm(void* qkv, int64_t n, int n_heads, int n_kv_heads, int head_dim, float eps, cudaStream_t stream);
// x [count] bf16 = gelu_tanh(x) * y [count] bf16.
void launch_gelu_tanh_gate(void* x, const void* y, int64_t count, cudaStream_t stream);

// dst [count] bf16 = src [count] f32/f16/bf16 on the device.
void launch_to_bf16(const void* src, DType src_t, void* dst, int64_t count, cudaStream_t stream);

}  // namespace brigade::gpu
