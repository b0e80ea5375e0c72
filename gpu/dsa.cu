// DeepSeek Sparse Attention kernels (Backend::write_kv_columns, dsa_topk in core/backend.h;
// mla_sparse_attention is mla.cu's kernel reading an index list).
//
// dsa_topk runs in chunks of rows that fit the workspace (rows x max_ctx_len scores):
//   score: a block per (row, 128 positions), the row's q heads and weights in shared memory, a
//     thread per position (its key read from the cache, H dot products of D); invisible
//     positions are not written (select reads [0, pos] only);
//   select: a block per row, a radix select of the topk-th largest score (four 8-bit passes over
//     the scores' order-preserving bits, a shared histogram each), then one pass in position
//     order that keeps the greater ones and the first equal ones (ties to the lower position),
//     compacted by a block scan, so the list comes out ascending as the CPU's.
// The launch geometry depends on the row count and meta.max_ctx_len only (graph-capturable).
#include <algorithm>

#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kScoreThreads = 128;
constexpr int kSelectThreads = 256;

template <class T>
__global__ void write_kv_columns_kernel(T* cache, int64_t width, const bf16* x, int d, int col, const int32_t* slots,
                                        int64_t n_slots) {
  const int64_t i = blockIdx.x;
  const int32_t slot = slots[i];
  if (slot < 0 || slot >= n_slots) return;
  T* row = cache + static_cast<int64_t>(slot) * width + col;
  for (int j = threadIdx.x; j < d; j += blockDim.x) row[j] = from_float<T>(__bfloat162float(x[i * d + j]));
}

// Row t's sequence and position (q_start ascending; a sequence's rows end its context).
__device__ void row_place(const PagedRows& a, int t, int& seq, int& pos) {
  int s = 0;
  while (s + 1 < a.n_seqs && a.q_start[s + 1] <= t) ++s;
  seq = s;
  pos = a.ctx_len[s] - (a.q_start[s + 1] - a.q_start[s]) + (t - a.q_start[s]);
}

template <class T>
__global__ void dsa_score_kernel(DsaTopkArgs a, int row0) {
  extern __shared__ float smem[];  // q [H D], weights [H]
  const int t = row0 + blockIdx.x, hd = a.n_heads * a.head_dim;
  float* q = smem;
  float* w = smem + hd;
  const bf16* qt = static_cast<const bf16*>(a.q) + int64_t{t} * hd;
  const bf16* wt = static_cast<const bf16*>(a.weights) + int64_t{t} * a.n_heads;
  for (int j = threadIdx.x; j < hd; j += blockDim.x) q[j] = __bfloat162float(qt[j]);
  for (int j = threadIdx.x; j < a.n_heads; j += blockDim.x) w[j] = __bfloat162float(wt[j]);
  __syncthreads();
  int seq, pos;
  row_place(a.rows, t, seq, pos);
  const int p = blockIdx.y * kScoreThreads + threadIdx.x;
  if (p > pos) return;
  const PagedRows& r = a.rows;
  const int32_t page = r.block_table[int64_t{seq} * r.max_blocks + p / r.page_size];
  const T* key = static_cast<const T*>(a.cache) + (int64_t{page} * r.page_size + p % r.page_size) * a.width + a.col;
  float sum = 0.0f;
  for (int h = 0; h < a.n_heads; ++h) {
    float dot = 0.0f;
    for (int j = 0; j < a.head_dim; ++j) dot = fmaf(q[h * a.head_dim + j], to_float(key[j]), dot);
    sum = fmaf(w[h], fmaxf(dot, 0.0f), sum);
  }
  a.workspace[int64_t{blockIdx.x} * a.ws_stride + p] = sum * a.scale;
}

// Order-preserving bits: a larger float gives a larger key.
__device__ __forceinline__ uint32_t order_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void dsa_select_kernel(DsaTopkArgs a, int row0) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int hist[256];
  __shared__ uint32_t s_prefix;
  __shared__ int s_left, s_base, s_eq_base;
  const int t = row0 + blockIdx.x;
  int seq, pos;
  row_place(a.rows, t, seq, pos);
  (void)seq;
  const int count = pos + 1, k = min(a.topk, count);
  const float* score = a.workspace + int64_t{blockIdx.x} * a.ws_stride;
  int32_t* out = a.out + int64_t{t} * a.topk;
  if (count <= a.topk) {  // every visible position
    for (int j = threadIdx.x; j < a.topk; j += blockDim.x) out[j] = j < count ? j : -1;
    return;
  }
  // Radix select: the bits of the k-th largest key, 8 at a time from the top.
  if (threadIdx.x == 0) s_prefix = 0u, s_left = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = shift == 24 ? 0u : ~0u << (shift + 8);
    for (int p = threadIdx.x; p < count; p += blockDim.x) {
      const uint32_t u = order_bits(score[p]);
      if ((u & mask) == (prefix & mask)) atomicAdd(&hist[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int left = s_left, b = 255;
      while (hist[b] < left) left -= hist[b--];
      s_prefix = prefix | (static_cast<uint32_t>(b) << shift);
      s_left = left;  // how many keys equal to the final prefix to take
    }
    __syncthreads();
  }
  const uint32_t kth = s_prefix;
  const int take_eq = s_left;
  if (threadIdx.x == 0) s_base = 0, s_eq_base = 0;
  __syncthreads();
  for (int p0 = 0; p0 < count; p0 += blockDim.x) {
    const int p = p0 + threadIdx.x;
    const uint32_t u = p < count ? order_bits(score[p]) : 0u;
    const int eq = p < count && u == kth ? 1 : 0;
    int eq_rank, eq_total;
    Scan(scan_tmp).ExclusiveSum(eq, eq_rank, eq_total);
    __syncthreads();
    const int keep = (p < count && u > kth) || (eq && s_eq_base + eq_rank < take_eq) ? 1 : 0;
    int at, kept;
    Scan(scan_tmp).ExclusiveSum(keep, at, kept);
    if (keep) out[s_base + at] = p;
    __syncthreads();
    if (threadIdx.x == 0) s_base += kept, s_eq_base += eq_total;
    __syncthreads();
  }
  for (int j = k + threadIdx.x; j < a.topk; j += blockDim.x) out[j] = -1;
}

}  // namespace

void launch_write_kv_columns(void* cache, DType kv_t, int64_t width, const void* x, int64_t n, int d, int col,
                             const int32_t* slots, int64_t n_slots, cudaStream_t stream) {
  if (n == 0) return;
  const auto* xs = static_cast<const bf16*>(x);
  if (kv_t == DType::bf16)
    write_kv_columns_kernel<<<static_cast<unsigned>(n), 128, 0, stream>>>(static_cast<bf16*>(cache), width, xs, d, col,
                                                                           slots, n_slots);
  else
    write_kv_columns_kernel<<<static_cast<unsigned>(n), 128, 0, stream>>>(static_cast<float*>(cache), width, xs, d, col,
                                                                           slots, n_slots);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_dsa_topk(const DsaTopkArgs& a, int max_ctx_len, cudaStream_t stream) {
  const int n_rows = a.rows.n_rows;
  if (n_rows == 0 || max_ctx_len <= 0) return;
  const int per_chunk = static_cast<int>(std::min<int64_t>(n_rows, a.ws_numel / a.ws_stride));
  const size_t smem = static_cast<size_t>(a.n_heads) * static_cast<size_t>(a.head_dim + 1) * sizeof(float);
  for (int row0 = 0; row0 < n_rows; row0 += per_chunk) {
    const int rows = std::min(per_chunk, n_rows - row0);
    const dim3 grid(static_cast<unsigned>(rows), ceil_div(int64_t{max_ctx_len}, kScoreThreads));
    if (a.kv_t == DType::bf16)
      dsa_score_kernel<bf16><<<grid, kScoreThreads, smem, stream>>>(a, row0);
    else
      dsa_score_kernel<float><<<grid, kScoreThreads, smem, stream>>>(a, row0);
    BRIGADE_CUDA_CHECK_LAUNCH();
    dsa_select_kernel<<<static_cast<unsigned>(rows), kSelectThreads, 0, stream>>>(a, row0);
    BRIGADE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace brigade::gpu
