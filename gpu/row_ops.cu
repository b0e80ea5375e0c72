// Row-wise kernels: embedding, rms_norm / add_rms_norm, layer_norm, add, silu_mul, gelu_tanh_mul / gelu_mul, scale, softcap, clamp, bias, qk_head_norm, rope,
// write_kv, gather_rows, conversion to bf16. All are memory bound: one pass over their rows,
// f32 arithmetic, bf16 storage.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;

__global__ void embedding_kernel(const void* table, bool table_bf16, const int32_t* ids, int64_t d,
                                 int64_t vocab, bf16* out) {
  const int64_t row = blockIdx.x;
  const int32_t id = ids[row];
  bf16* dst = out + row * d;
  const bool ok = id >= 0 && id < vocab;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dst[j] = __float2bfloat16_rn(ok ? load_param(table, table_bf16, int64_t{id} * d + j) : 0.0f);
}

// One block per row; the row is read twice (sum of squares, then scale), the second time from L1/L2.
__global__ void rms_norm_kernel(bf16* residual, const bf16* x, const void* w, bool w_bf16, float eps,
                                bf16* out, int64_t d) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * d;
  bf16* rr = residual ? residual + row * d : nullptr;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = __bfloat162float(xr[j]);
    if (rr) {
      v += __bfloat162float(rr[j]);
      rr[j] = __float2bfloat16_rn(v);
      v = __bfloat162float(rr[j]);  // normalise what the residual now holds, as the CPU does
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(d) + eps);
  const bf16* src = rr ? rr : xr;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    out[row * d + j] = __float2bfloat16_rn(load_param(w, w_bf16, j) * (inv * __bfloat162float(src[j])));
}

// One block per row, as rms_norm_kernel: the mean, then the mean of the squared deviations,
// (x - mean) * rsqrt(var + eps) * w (+ b), f32 arithmetic (torch's LayerNorm, Cohere's norm).
__global__ void layer_norm_kernel(const bf16* x, const void* w, bool w_bf16, const void* b, bool b_bf16, float eps,
                                  bf16* out, int64_t d) {
  __shared__ float scratch[32];
  const bf16* xr = x + blockIdx.x * d;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += __bfloat162float(xr[j]);
  const float mean = block_sum(sum, scratch) / static_cast<float>(d);
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = __bfloat162float(xr[j]) - mean;
    sq += v * v;
  }
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(d) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = (__bfloat162float(xr[j]) - mean) * inv * load_param(w, w_bf16, j);
    if (b != nullptr) v += load_param(b, b_bf16, j);
    out[blockIdx.x * d + j] = __float2bfloat16_rn(v);
  }
}

__global__ void add_kernel(bf16* a, const bf16* b, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    a[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void silu_mul_kernel(const bf16* gate_up, bf16* out, int64_t n, int64_t inter) {
  const int64_t total = n * inter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inter, j = i - r * inter;
    const float g = __bfloat162float(gate_up[r * 2 * inter + j]);
    const float u = __bfloat162float(gate_up[r * 2 * inter + inter + j]);
    out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
  }
}

// torch's gelu(approximate='tanh'), or with exact its erf GELU, of a bf16 gate, rounded to bf16 as
// torch's op leaves it; the product with up is rounded again, as transformers' act_fn(gate) * up
// is in bf16.
__global__ void gelu_mul_kernel(const bf16* gate_up, bf16* out, int64_t n, int64_t inter, bool exact) {
  const float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
  const int64_t total = n * inter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inter, j = i - r * inter;
    const float g = __bfloat162float(gate_up[r * 2 * inter + j]);
    const float u = __bfloat162float(gate_up[r * 2 * inter + inter + j]);
    const float gelu = exact ? 0.5f * g * (1.0f + erff(g * 0.7071067811865476f))
                             : 0.5f * g * (1.0f + tanhf(kBeta * (g + kKappa * g * g * g)));
    const float act = __bfloat162float(__float2bfloat16_rn(gelu));
    out[i] = __float2bfloat16_rn(act * u);
  }
}

// x = gelu(x) in place, ungated (StarCoder2's and Phi's gelu_pytorch_tanh / gelu_new, Pythia's and
// GPT-2 variants' exact gelu): in f32, rounded to bf16 once, as torch's bf16 op.
__global__ void gelu_kernel(bf16* x, int64_t count, bool exact) {
  const float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = __bfloat162float(x[i]);
    const float y = exact ? 0.5f * g * (1.0f + erff(g * 0.7071067811865476f))
                          : 0.5f * g * (1.0f + tanhf(kBeta * (g + kKappa * g * g * g)));
    x[i] = __float2bfloat16_rn(y);
  }
}

// transformers' XIELUActivation, in f32, rounded to bf16 once.
__global__ void xielu_kernel(bf16* x, int64_t count, float alpha_p, float alpha_n, float beta, float eps) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float t = __bfloat162float(x[i]);
    x[i] = __float2bfloat16_rn(t > 0.0f ? alpha_p * t * t + beta * t : (expm1f(fminf(t, eps)) - t) * alpha_n + beta * t);
  }
}

__global__ void scale_kernel(bf16* x, float s, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);
}

__global__ void softcap_kernel(float* x, float cap, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = tanhf(x[i] / cap) * cap;
}

// torch.clamp of bf16 values: compared in f32, so a NaN fails both tests and stays.
__global__ void clamp_kernel(bf16* x, float lo, float hi, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = __bfloat162float(x[i]);
    if (v < lo) x[i] = __float2bfloat16_rn(lo);
    else if (v > hi) x[i] = __float2bfloat16_rn(hi);
  }
}

template <class T>
__global__ void add_bias_kernel(T* out, const void* bias, bool bias_bf16, int64_t n, int64_t m) {
  const int64_t total = n * m;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = from_float<T>(to_float(out[i]) + load_param(bias, bias_bf16, i % m));
}

// The q or k head of qkv's n rows this warp normalises (one warp per (row, head) of the n_heads +
// n_kv_heads q and k heads): head < n_heads is a q head; false for a warp past the last.
struct WarpHead {
  bf16* v;
  int64_t head;
  int lane;
};
__device__ __forceinline__ bool warp_head(bf16* qkv, int64_t n, const HeadShape& h, WarpHead& out) {
  const int64_t heads = h.n_heads + h.n_kv_heads;
  const int64_t item = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  if (item >= n * heads) return false;
  out.lane = threadIdx.x & 31;
  out.head = item % heads;
  out.v = qkv + (item / heads) * h.row_width() + out.head * h.head_dim;
  return true;
}

__global__ void qk_head_norm_kernel(bf16* qkv, int64_t n, HeadShape h, const void* q_w, const void* k_w,
                                    bool w_bf16, float eps) {
  WarpHead at;
  if (!warp_head(qkv, n, h, at)) return;
  bf16* v = at.v;
  const int lane = at.lane;
  const void* w = at.head < h.n_heads ? q_w : k_w;
  float ss = 0.0f;
  for (int j = lane; j < h.head_dim; j += 32) {
    const float x = __bfloat162float(v[j]);
    ss += x * x;
  }
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(h.head_dim) + eps);
  for (int j = lane; j < h.head_dim; j += 32)
    v[j] = __float2bfloat16_rn(load_param(w, w_bf16, j) * (inv * __bfloat162float(v[j])));
}

// Command R+'s q/k LayerNorms: one warp per (row, head), each head with its own weights (head h's
// at h * head_dim of q_w, or of k_w for the k heads).
__global__ void qk_head_layer_norm_kernel(bf16* qkv, int64_t n, HeadShape h, const void* q_w, const void* k_w,
                                          bool w_bf16, float eps) {
  WarpHead at;
  if (!warp_head(qkv, n, h, at)) return;
  bf16* v = at.v;
  const int lane = at.lane;
  const bool is_q = at.head < h.n_heads;
  const void* w = is_q ? q_w : k_w;
  const int64_t w0 = (is_q ? at.head : at.head - h.n_heads) * h.head_dim;
  float sum = 0.0f;
  for (int j = lane; j < h.head_dim; j += 32) sum += __bfloat162float(v[j]);
  const float mean = warp_sum(sum) / static_cast<float>(h.head_dim);
  float sq = 0.0f;
  for (int j = lane; j < h.head_dim; j += 32) {
    const float x = __bfloat162float(v[j]) - mean;
    sq += x * x;
  }
  const float inv = rsqrtf(warp_sum(sq) / static_cast<float>(h.head_dim) + eps);
  for (int j = lane; j < h.head_dim; j += 32)
    v[j] = __float2bfloat16_rn((__bfloat162float(v[j]) - mean) * inv * load_param(w, w_bf16, w0 + j));
}

// OLMo 2's q/k norms over the whole projection: one block per (row, q or k), the part's
// q_width or kv_width values normalised as one vector.
__global__ void qk_whole_norm_kernel(bf16* qkv, HeadShape h, const void* q_w, const void* k_w, bool w_bf16,
                                     float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x / 2;
  const bool is_k = blockIdx.x % 2 == 1;
  const int64_t d = int64_t{is_k ? h.n_kv_heads : h.n_heads} * h.head_dim;
  bf16* v = qkv + row * h.row_width() + (is_k ? int64_t{h.n_heads} * h.head_dim : 0);
  const void* w = is_k ? k_w : q_w;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float x = __bfloat162float(v[j]);
    ss += x * x;
  }
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    v[j] = __float2bfloat16_rn(load_param(w, w_bf16, j) * (inv * __bfloat162float(v[j])));
}

// The whole-width norms split over tensor-parallel ranks: one block per (row, q or k), the sum of
// squares of this rank's part into sums[2 row + part] (f32; all-reduced by the caller).
__global__ void qk_sum_squares_kernel(const bf16* qkv, HeadShape h, float* sums) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x / 2;
  const bool is_k = blockIdx.x % 2 == 1;
  const int64_t d = int64_t{is_k ? h.n_kv_heads : h.n_heads} * h.head_dim;
  const bf16* v = qkv + row * h.row_width() + (is_k ? int64_t{h.n_heads} * h.head_dim : 0);
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float x = __bfloat162float(v[j]);
    ss += x * x;
  }
  ss = block_sum(ss, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = ss;
}

// Then each (row, q or k) part scaled by the whole row's 1 / sqrt(sum / total + eps) and its weights.
__global__ void qk_norm_by_sums_kernel(bf16* qkv, HeadShape h, const float* sums, int64_t q_total, int64_t k_total,
                                       const void* q_w, const void* k_w, bool w_bf16, float eps) {
  const int64_t row = blockIdx.x / 2;
  const bool is_k = blockIdx.x % 2 == 1;
  const int64_t d = int64_t{is_k ? h.n_kv_heads : h.n_heads} * h.head_dim;
  bf16* v = qkv + row * h.row_width() + (is_k ? int64_t{h.n_heads} * h.head_dim : 0);
  const void* w = is_k ? k_w : q_w;
  const float inv = rsqrtf(sums[blockIdx.x] / static_cast<float>(is_k ? k_total : q_total) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    v[j] = __float2bfloat16_rn(load_param(w, w_bf16, j) * (inv * __bfloat162float(v[j])));
}

// One thread per (row, head, frequency); angle = pos * inv_freq in f32, sincosf at full accuracy
// (positions reach 1e5 radians, where the fast intrinsics are wrong).
__global__ void rope_kernel(bf16* qkv, int64_t n, HeadShape h, const int32_t* positions,
                            const float* inv_freq, int half, bool neox, float factor) {
  const int64_t heads = h.n_heads + h.n_kv_heads;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * heads * half) return;
  const int f = static_cast<int>(i % half);
  const int64_t head = (i / half) % heads, row = i / (half * heads);
  float s, c;
  sincosf(static_cast<float>(positions[row]) * inv_freq[f], &s, &c);
  c *= factor;
  s *= factor;
  bf16* v = qkv + row * h.row_width() + head * h.head_dim;
  const int a = neox ? f : 2 * f, b = neox ? f + half : 2 * f + 1;
  const float v0 = __bfloat162float(v[a]), v1 = __bfloat162float(v[b]);
  v[a] = __float2bfloat16_rn(v0 * c - v1 * s);
  v[b] = __float2bfloat16_rn(v0 * s + v1 * c);
}

// One thread per q element: times log1p(floor((pos + offset) / floor_scale)) * scale + 1 (f32), rounded.
__global__ void attention_temperature_kernel(bf16* qkv, int64_t n, HeadShape h, const int32_t* positions,
                                             float floor_scale, float scale, float offset) {
  const int64_t q_width = int64_t{h.n_heads} * h.head_dim;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * q_width) return;
  const int64_t row = i / q_width;
  const float t = log1pf(floorf((static_cast<float>(positions[row]) + offset) / floor_scale)) * scale + 1.0f;
  bf16* v = qkv + row * h.row_width() + i % q_width;
  *v = __float2bfloat16_rn(__bfloat162float(*v) * t);
}

template <class KvT>
__global__ void write_kv_kernel(KvT* k, KvT* v, const bf16* qkv, int64_t n, HeadShape h,
                                const int32_t* slots, int64_t n_slots) {
  const int64_t w = int64_t{h.n_kv_heads} * h.head_dim;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * w) return;
  const int64_t row = i / w, j = i % w;
  const int64_t slot = slots[row];
  if (slot < 0 || slot >= n_slots) return;
  const bf16* src = qkv + row * h.row_width() + int64_t{h.n_heads} * h.head_dim;
  k[slot * w + j] = from_float<KvT>(__bfloat162float(src[j]));
  v[slot * w + j] = from_float<KvT>(__bfloat162float(src[w + j]));
}

__global__ void gather_rows_kernel(const uint16_t* x, int64_t row_elems, const int32_t* rows, int64_t n,
                                   uint16_t* out) {
  const int64_t r = blockIdx.x;
  const int32_t src = rows[r];
  const bool ok = src >= 0 && src < n;
  for (int64_t j = threadIdx.x; j < row_elems; j += blockDim.x)
    out[r * row_elems + j] = ok ? x[int64_t{src} * row_elems + j] : uint16_t{0};
}

__global__ void to_bf16_kernel(const void* src, int kind, bf16* dst, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    float x;
    if (kind == 0) x = static_cast<const float*>(src)[i];
    else if (kind == 1) x = __half2float(static_cast<const __half*>(src)[i]);
    else x = __bfloat162float(static_cast<const bf16*>(src)[i]);
    dst[i] = __float2bfloat16_rn(x);
  }
}

// Grid for a grid-stride loop over `count` elements (capped: each thread does several).
unsigned stride_grid(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

// Threads for a one-block-per-row kernel over rows of d elements.
unsigned row_threads(int64_t d) { return d >= 1024 ? 1024u : (d >= 256 ? 256u : 64u); }

}  // namespace

void launch_embedding(const void* table, DType table_t, const int32_t* ids, int64_t n, int64_t d,
                      int64_t vocab, void* out, cudaStream_t stream) {
  if (n == 0) return;
  embedding_kernel<<<static_cast<unsigned>(n), row_threads(d), 0, stream>>>(
      table, table_t == DType::bf16, ids, d, vocab, static_cast<bf16*>(out));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_rms_norm(void* residual, const void* x, const void* w, DType w_t, float eps, void* out,
                     int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(n), row_threads(d), 0, stream>>>(
      static_cast<bf16*>(residual), static_cast<const bf16*>(x), w, w_t == DType::bf16, eps,
      static_cast<bf16*>(out), d);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm(const void* x, const void* w, DType w_t, const void* b, DType b_t, float eps, void* out,
                       int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(n), row_threads(d), 0, stream>>>(
      static_cast<const bf16*>(x), w, w_t == DType::bf16, b, b_t == DType::bf16, eps, static_cast<bf16*>(out), d);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_add(void* a, const void* b, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  add_kernel<<<stride_grid(count), kThreads, 0, stream>>>(static_cast<bf16*>(a), static_cast<const bf16*>(b), count);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_silu_mul(const void* gate_up, void* out, int64_t n, int64_t inter, cudaStream_t stream) {
  if (n * inter == 0) return;
  silu_mul_kernel<<<stride_grid(n * inter), kThreads, 0, stream>>>(static_cast<const bf16*>(gate_up),
                                                                    static_cast<bf16*>(out), n, inter);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_gelu_mul(const void* gate_up, void* out, int64_t n, int64_t inter, bool exact, cudaStream_t stream) {
  if (n * inter == 0) return;
  gelu_mul_kernel<<<stride_grid(n * inter), kThreads, 0, stream>>>(static_cast<const bf16*>(gate_up),
                                                                    static_cast<bf16*>(out), n, inter, exact);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_gelu(void* x, int64_t count, bool exact, cudaStream_t stream) {
  if (count == 0) return;
  gelu_kernel<<<stride_grid(count), kThreads, 0, stream>>>(static_cast<bf16*>(x), count, exact);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_xielu(void* x, int64_t count, float alpha_p, float alpha_n, float beta, float eps, cudaStream_t stream) {
  if (count == 0) return;
  xielu_kernel<<<stride_grid(count), kThreads, 0, stream>>>(static_cast<bf16*>(x), count, alpha_p, alpha_n, beta, eps);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_scale(void* x, float s, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  scale_kernel<<<stride_grid(count), kThreads, 0, stream>>>(static_cast<bf16*>(x), s, count);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_softcap(float* x, float cap, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  softcap_kernel<<<stride_grid(count), kThreads, 0, stream>>>(x, cap, count);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_clamp(void* x, float lo, float hi, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  clamp_kernel<<<stride_grid(count), kThreads, 0, stream>>>(static_cast<bf16*>(x), lo, hi, count);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_add_bias(void* out, DType out_t, const void* bias, DType bias_t, int64_t n, int64_t m,
                     cudaStream_t stream) {
  if (n * m == 0) return;
  if (out_t == DType::f32)
    add_bias_kernel<<<stride_grid(n * m), kThreads, 0, stream>>>(static_cast<float*>(out), bias,
                                                                  bias_t == DType::bf16, n, m);
  else
    add_bias_kernel<<<stride_grid(n * m), kThreads, 0, stream>>>(static_cast<bf16*>(out), bias,
                                                                  bias_t == DType::bf16, n, m);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_qk_sum_squares(const void* qkv, int64_t n, HeadShape h, float* sums, cudaStream_t stream) {
  if (n == 0) return;
  qk_sum_squares_kernel<<<static_cast<unsigned>(2 * n), kThreads, 0, stream>>>(static_cast<const bf16*>(qkv), h, sums);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_qk_norm_by_sums(void* qkv, int64_t n, HeadShape h, const float* sums, int64_t q_total, int64_t k_total,
                            const void* q_w, const void* k_w, DType w_t, float eps, cudaStream_t stream) {
  if (n == 0) return;
  qk_norm_by_sums_kernel<<<static_cast<unsigned>(2 * n), kThreads, 0, stream>>>(
      static_cast<bf16*>(qkv), h, sums, q_total, k_total, q_w, k_w, w_t == DType::bf16, eps);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_qk_head_norm(void* qkv, int64_t n, HeadShape h, const void* q_w, const void* k_w,
                         DType w_t, float eps, bool whole, cudaStream_t stream) {
  if (whole) {
    if (n == 0) return;
    qk_whole_norm_kernel<<<static_cast<unsigned>(2 * n), kThreads, 0, stream>>>(static_cast<bf16*>(qkv), h, q_w, k_w,
                                                                                 w_t == DType::bf16, eps);
    BRIGADE_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t items = n * (h.n_heads + h.n_kv_heads);
  if (items == 0) return;
  constexpr int kWarps = kThreads / 32;
  qk_head_norm_kernel<<<ceil_div(items, kWarps), kThreads, 0, stream>>>(static_cast<bf16*>(qkv), n, h, q_w,
                                                                        k_w, w_t == DType::bf16, eps);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_qk_head_layer_norm(void* qkv, int64_t n, HeadShape h, const void* q_w, const void* k_w, DType w_t,
                               float eps, cudaStream_t stream) {
  const int64_t items = n * (h.n_heads + h.n_kv_heads);
  if (items == 0) return;
  constexpr int kWarps = kThreads / 32;
  qk_head_layer_norm_kernel<<<ceil_div(items, kWarps), kThreads, 0, stream>>>(static_cast<bf16*>(qkv), n, h, q_w, k_w,
                                                                              w_t == DType::bf16, eps);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_rope(void* qkv, int64_t n, HeadShape h, const int32_t* positions, const float* inv_freq,
                 int rotary_dim, bool neox, float attention_factor, cudaStream_t stream) {
  const int half = rotary_dim / 2;
  const int64_t total = n * (h.n_heads + h.n_kv_heads) * half;
  if (total == 0) return;
  rope_kernel<<<ceil_div(total, kThreads), kThreads, 0, stream>>>(static_cast<bf16*>(qkv), n, h, positions,
                                                                  inv_freq, half, neox, attention_factor);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_attention_temperature(void* qkv, int64_t n, HeadShape h, const int32_t* positions, float floor_scale,
                                  float scale, float offset, cudaStream_t stream) {
  const int64_t total = n * h.n_heads * h.head_dim;
  if (total == 0) return;
  attention_temperature_kernel<<<ceil_div(total, kThreads), kThreads, 0, stream>>>(static_cast<bf16*>(qkv), n, h,
                                                                                    positions, floor_scale, scale,
                                                                                    offset);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_write_kv(void* k, void* v, DType kv_t, const void* qkv, int64_t n, HeadShape h,
                     const int32_t* slots, int64_t n_slots, cudaStream_t stream) {
  const int64_t total = n * h.n_kv_heads * h.head_dim;
  if (total == 0) return;
  const auto* src = static_cast<const bf16*>(qkv);
  if (kv_t == DType::f32)
    write_kv_kernel<<<ceil_div(total, kThreads), kThreads, 0, stream>>>(
        static_cast<float*>(k), static_cast<float*>(v), src, n, h, slots, n_slots);
  else
    write_kv_kernel<<<ceil_div(total, kThreads), kThreads, 0, stream>>>(
        static_cast<bf16*>(k), static_cast<bf16*>(v), src, n, h, slots, n_slots);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_gather_rows(const void* x, int64_t row_bytes, const int32_t* rows, int64_t r, int64_t n,
                        void* out, cudaStream_t stream) {
  if (r == 0) return;
  const int64_t elems = row_bytes / 2;
  gather_rows_kernel<<<static_cast<unsigned>(r), row_threads(elems), 0, stream>>>(
      static_cast<const uint16_t*>(x), elems, rows, n, static_cast<uint16_t*>(out));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_to_bf16(const void* src, DType src_t, void* dst, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  const int kind = src_t == DType::f32 ? 0 : (src_t == DType::f16 ? 1 : 2);
  to_bf16_kernel<<<stride_grid(count), kThreads, 0, stream>>>(src, kind, static_cast<bf16*>(dst), count);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::gpu
