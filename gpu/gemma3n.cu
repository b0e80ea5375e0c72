// Gemma 3n's kernels (Backend::supports_altup; core/backend.h): AltUp's prediction and correction,
// the RMS match of its streams, the gaussian top-k of the sparse MLPs, the weightless v norm and
// the gated per-layer input. bf16 activations, f32 coefficients, f32 arithmetic; one block per row
// (per row and kv head for the v norm), so the launch geometry depends on the row count alone.
#include <cuda_bf16.h>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kMaxStreams = 8;

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// c[o] = sum_k coefs[o][k] tanh(router[k]) + bias, o < n_out, into shared memory (block-wide),
// rounded to bf16 where transformers' bf16 run rounds: tanh's output, the linear's, the + 1.
__device__ void altup_coefs(const bf16* router, const float* coefs, int n_in, int n_out, float bias, float* c) {
  for (int o = threadIdx.x; o < n_out; o += blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < n_in; ++k) s += coefs[o * n_in + k] * round_bf16(tanhf(__bfloat162float(router[k])));
    c[o] = round_bf16(round_bf16(s) + bias);
  }
  __syncthreads();
}

__global__ void altup_predict_kernel(const bf16* streams, const bf16* router, const float* coefs, bf16* out, int ns,
                                     int64_t n, int64_t d) {
  __shared__ float c[kMaxStreams * kMaxStreams];
  const int64_t t = blockIdx.x;
  altup_coefs(router + t * ns, coefs, ns, ns * ns, 0.0f, c);
  for (int64_t x = threadIdx.x; x < d; x += blockDim.x) {
    float s[kMaxStreams];
    for (int j = 0; j < ns; ++j) s[j] = __bfloat162float(streams[(j * n + t) * d + x]);
    for (int i = 0; i < ns; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < ns; ++j) acc += c[i * ns + j] * s[j];
      out[(i * n + t) * d + x] = __float2bfloat16_rn(s[i] + acc);
    }
  }
}

__global__ void altup_correct_kernel(bf16* pred, const bf16* activated, const bf16* router, const float* coefs,
                                     int active, int ns, int64_t n, int64_t d) {
  __shared__ float c[kMaxStreams];
  const int64_t t = blockIdx.x;
  altup_coefs(router + t * ns, coefs, ns, ns, 1.0f, c);
  for (int64_t x = threadIdx.x; x < d; x += blockDim.x) {
    const float innovation = __bfloat162float(activated[t * d + x]) - __bfloat162float(pred[(active * n + t) * d + x]);
    for (int i = 0; i < ns; ++i) {
      bf16* p = pred + (i * n + t) * d + x;
      *p = __float2bfloat16_rn(__bfloat162float(*p) + c[i] * innovation);
    }
  }
}

__global__ void match_rms_kernel(bf16* x, const bf16* ref, int64_t d, float eps) {
  __shared__ float scratch[32];
  bf16* xr = x + int64_t{blockIdx.x} * d;
  const bf16* rr = ref + int64_t{blockIdx.x} * d;
  float sx = 0.0f, sr = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float a = __bfloat162float(xr[i]), b = __bfloat162float(rr[i]);
    sx += a * a;
    sr += b * b;
  }
  sx = block_sum(sx, scratch);
  sr = block_sum(sr, scratch);
  const float f = sqrtf(sr / static_cast<float>(d)) / sqrtf(fmaxf(sx / static_cast<float>(d), eps));
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) xr[i] = __float2bfloat16_rn(__bfloat162float(xr[i]) * f);
}

__global__ void gaussian_topk_kernel(bf16* x, int64_t width, int64_t cols, float k) {
  __shared__ float scratch[32];
  bf16* r = x + int64_t{blockIdx.x} * width;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += __bfloat162float(r[i]);
  const float mean = block_sum(s, scratch) / static_cast<float>(cols);
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float e = __bfloat162float(r[i]) - mean;
    v += e * e;
  }
  const float cutoff = mean + sqrtf(block_sum(v, scratch) / static_cast<float>(cols)) * k;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    r[i] = __float2bfloat16_rn(fmaxf(__bfloat162float(r[i]) - cutoff, 0.0f));
}

// One block of 32 threads per (row, kv head).
__global__ void v_head_norm_kernel(bf16* qkv, int64_t row_width, int64_t v0, int n_kv, int hd, float eps) {
  const int64_t row = blockIdx.x / n_kv, head = blockIdx.x % n_kv;
  bf16* v = qkv + row * row_width + v0 + head * hd;
  float s = 0.0f;
  for (int i = threadIdx.x; i < hd; i += 32) {
    const float a = __bfloat162float(v[i]);
    s += a * a;
  }
  const float inv = rsqrtf(warp_sum(s) / static_cast<float>(hd) + eps);
  for (int i = threadIdx.x; i < hd; i += 32) v[i] = __float2bfloat16_rn(__bfloat162float(v[i]) * inv);
}

// torch's gelu(approximate='tanh') rounded to bf16, times y, rounded again (gelu_tanh_mul's rule).
__global__ void gelu_tanh_gate_kernel(bf16* x, const bf16* y, int64_t count) {
  const float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float g = __bfloat162float(x[i]);
  const float act = round_bf16(0.5f * g * (1.0f + tanhf(kBeta * (g + kKappa * g * g * g))));
  x[i] = __float2bfloat16_rn(act * __bfloat162float(y[i]));
}

}  // namespace

void launch_altup_predict(const void* streams, const void* router, const float* coefs, void* out, int n_streams,
                          int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0) return;
  altup_predict_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      static_cast<const bf16*>(streams), static_cast<const bf16*>(router), coefs, static_cast<bf16*>(out), n_streams, n, d);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_altup_correct(void* pred, const void* activated, const void* router, const float* coefs, int active,
                          int n_streams, int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0) return;
  altup_correct_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      static_cast<bf16*>(pred), static_cast<const bf16*>(activated), static_cast<const bf16*>(router), coefs, active,
      n_streams, n, d);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_match_rms(void* x, const void* ref, int64_t n, int64_t d, float eps, cudaStream_t stream) {
  if (n == 0) return;
  match_rms_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(static_cast<bf16*>(x),
                                                                       static_cast<const bf16*>(ref), d, eps);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_gaussian_topk(void* x, int64_t n, int64_t width, int64_t cols, float k, cudaStream_t stream) {
  if (n == 0) return;
  gaussian_topk_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(static_cast<bf16*>(x), width, cols, k);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_v_head_norm(void* qkv, int64_t n, int n_heads, int n_kv_heads, int head_dim, float eps,
                        cudaStream_t stream) {
  if (n == 0) return;
  const int64_t row_width = int64_t{n_heads + 2 * n_kv_heads} * head_dim;
  const int64_t v0 = int64_t{n_heads + n_kv_heads} * head_dim;
  v_head_norm_kernel<<<static_cast<unsigned>(n * n_kv_heads), 32, 0, stream>>>(static_cast<bf16*>(qkv), row_width, v0,
                                                                               n_kv_heads, head_dim, eps);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_gelu_tanh_gate(void* x, const void* y, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  gelu_tanh_gate_kernel<<<static_cast<unsigned>(ceil_div(count, 256)), 256, 0, stream>>>(static_cast<bf16*>(x),
                                                                             static_cast<const bf16*>(y), count);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace brigade::gpu
