// MLA kernels (Backend::head_matmul, write_mla_kv, mla_attention in core/backend.h).
//
// head_matmul: one warp per output (token, column), a warp dot product over the head's a inputs
// (CUDA cores; the per-head products are small: DeepSeek's 128 x 512 per head).
// mla_attention: one block per (query row, head), 8 warps splitting the row's visible positions;
// each warp keeps an online softmax over its positions with the latent accumulator in registers
// (R / 32 values per lane), and the block merges the 8 partial states at the end. The launch
// geometry depends only on the row and head counts, the context is read on the device, so steps
// are graph-capturable. Every head re-reads the row's cached latents (from L2 after the first);
// a head-batched kernel that reads each cached row once for all heads (FlashMLA's layout) is
// the next step for long contexts.
#include <cuda_bf16.h>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 8;
constexpr int kMaxLatent = 1024;  // R; the accumulator holds R / 32 floats per lane

__global__ void head_matmul_kernel(const bf16* x, const bf16* w, int n_heads, int64_t a, int64_t b, bf16* out) {
  const int64_t t = blockIdx.x, width = int64_t{n_heads} * b;
  const int64_t col = int64_t{blockIdx.y} * kWarps + (threadIdx.x >> 5);
  if (col >= width) return;  // whole warps leave together; no block barrier follows
  const int64_t h = col / b;
  const float v = warp_dot(w + col * a, x + t * n_heads * a + h * a, a);
  if ((threadIdx.x & 31) == 0) out[t * width + col] = __float2bfloat16_rn(v);
}

template <class T>
__global__ void write_mla_kv_kernel(T* cache, const bf16* latent, const bf16* k_pe, int r, int dr, const int32_t* slots,
                                    int64_t n_slots) {
  const int64_t i = blockIdx.x;
  const int32_t slot = slots[i];
  if (slot < 0 || slot >= n_slots) return;
  T* row = cache + static_cast<int64_t>(slot) * (r + dr);
  for (int j = threadIdx.x; j < r + dr; j += blockDim.x) {
    const float v = j < r ? __bfloat162float(latent[i * r + j]) : __bfloat162float(k_pe[i * dr + (j - r)]);
    row[j] = from_float<T>(v);
  }
}

// The sequence owning query row t (q_start is ascending).
__device__ int seq_of_row(const int32_t* q_start, int n_seqs, int t) {
  int s = 0;
  while (s + 1 < n_seqs && q_start[s + 1] <= t) ++s;
  return s;
}

template <class T>
__global__ void mla_attention_kernel(MlaAttentionArgs a) {
  extern __shared__ float smem[];  // q [W] (scaled), then per warp m, l, acc [R]
  const int r = a.kv_lora_rank, w = r + a.rope_dim, h = blockIdx.y, t = blockIdx.x;
  float* q = smem;
  float* part = smem + w;  // [kWarps][R + 2]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bf16* q_lat = static_cast<const bf16*>(a.q_lat) + (int64_t{t} * a.n_heads + h) * r;
  const bf16* q_pe = static_cast<const bf16*>(a.q_pe) + (int64_t{t} * a.n_heads + h) * a.rope_dim;
  for (int j = threadIdx.x; j < w; j += blockDim.x)
    q[j] = (j < r ? __bfloat162float(q_lat[j]) : __bfloat162float(q_pe[j - r])) * a.scale;
  __syncthreads();
  const int s = seq_of_row(a.q_start, a.n_seqs, t);
  const int n_q = a.q_start[s + 1] - a.q_start[s];
  const int pos = a.ctx_len[s] - n_q + (t - a.q_start[s]);  // visible positions [0, pos]
  const T* cache = static_cast<const T*>(a.cache);
  const int32_t* table = a.block_table + int64_t{s} * a.max_blocks;
  const int per_lane = r / 32;
  float acc[kMaxLatent / 32];
#pragma unroll
  for (int i = 0; i < kMaxLatent / 32; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  // mla_sparse_attention: the row's listed positions (ascending, -1 = none) instead of [0, pos].
  const int32_t* listed = a.indices != nullptr ? a.indices + int64_t{t} * a.topk : nullptr;
  const int n_visit = listed != nullptr ? a.topk : pos + 1;
  for (int j = warp; j < n_visit; j += kWarps) {
    const int p = listed != nullptr ? listed[j] : j;
    if (p < 0 || p > pos) continue;  // whole warps skip together
    const T* row = cache + (int64_t{table[p / a.page_size]} * a.page_size + p % a.page_size) * w;
    float dot = 0.0f;
    for (int j = lane; j < w; j += 32) dot = fmaf(q[j], to_float(row[j]), dot);
    const float score = warp_sum(dot);
    const float m_new = fmaxf(m, score), corr = expf(m - m_new), e = expf(score - m_new);
    l = l * corr + e;
#pragma unroll
    for (int i = 0; i < kMaxLatent / 32; ++i)
      if (i < per_lane) acc[i] = acc[i] * corr + e * to_float(row[i * 32 + lane]);
    m = m_new;
  }
  float* mine = part + warp * (r + 2);
#pragma unroll
  for (int i = 0; i < kMaxLatent / 32; ++i)
    if (i < per_lane) mine[2 + i * 32 + lane] = acc[i];
  if (lane == 0) mine[0] = m, mine[1] = l;
  __syncthreads();
  float big = -INFINITY;
  for (int v = 0; v < kWarps; ++v) big = fmaxf(big, part[v * (r + 2)]);
  float total = 0.0f;
  for (int v = 0; v < kWarps; ++v) {
    const float mv = part[v * (r + 2)];
    if (mv != -INFINITY) total += part[v * (r + 2) + 1] * expf(mv - big);
  }
  bf16* out = static_cast<bf16*>(a.out) + (int64_t{t} * a.n_heads + h) * r;
  for (int j = threadIdx.x; j < r; j += blockDim.x) {
    float o = 0.0f;
    for (int v = 0; v < kWarps; ++v) {
      const float mv = part[v * (r + 2)];
      if (mv != -INFINITY) o += part[v * (r + 2) + 2 + j] * expf(mv - big);
    }
    out[j] = __float2bfloat16_rn(o / total);
  }
}

}  // namespace

void launch_head_matmul(const void* x, const void* w, int64_t n, int n_heads, int64_t a, int64_t b, void* out,
                        cudaStream_t stream) {
  if (n == 0) return;
  // Tokens on x (up to 2^31 - 1), column blocks on y (up to 65535, i.e. 524280 columns).
  const dim3 grid(static_cast<unsigned>(n), ceil_div(int64_t{n_heads} * b, kWarps));
  head_matmul_kernel<<<grid, kWarps * 32, 0, stream>>>(static_cast<const bf16*>(x), static_cast<const bf16*>(w),
                                                      n_heads, a, b, static_cast<bf16*>(out));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_write_mla_kv(void* cache, DType kv_t, const void* latent, const void* k_pe, int64_t n, int kv_lora_rank,
                         int rope_dim, const int32_t* slots, int64_t n_slots, cudaStream_t stream) {
  if (n == 0) return;
  const auto* lat = static_cast<const bf16*>(latent);
  const auto* pe = static_cast<const bf16*>(k_pe);
  if (kv_t == DType::bf16)
    write_mla_kv_kernel<<<static_cast<unsigned>(n), 128, 0, stream>>>(static_cast<bf16*>(cache), lat, pe, kv_lora_rank,
                                                                       rope_dim, slots, n_slots);
  else
    write_mla_kv_kernel<<<static_cast<unsigned>(n), 128, 0, stream>>>(static_cast<float*>(cache), lat, pe, kv_lora_rank,
                                                                       rope_dim, slots, n_slots);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_mla_attention(const MlaAttentionArgs& a, cudaStream_t stream) {
  if (a.n_rows == 0) return;
  const dim3 grid(static_cast<unsigned>(a.n_rows), static_cast<unsigned>(a.n_heads));
  const size_t smem = (static_cast<size_t>(a.kv_lora_rank + a.rope_dim) +
                       static_cast<size_t>(kWarps) * static_cast<size_t>(a.kv_lora_rank + 2)) * sizeof(float);
  if (a.kv_t == DType::bf16)
    mla_attention_kernel<bf16><<<grid, kWarps * 32, smem, stream>>>(a);
  else
    mla_attention_kernel<float><<<grid, kWarps * 32, smem, stream>>>(a);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::gpu
