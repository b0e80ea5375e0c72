// Device sampling: argmax, and temperature / top-k / min-p / top-p sampling with a per-row seed.
//
// One block of 1024 threads per row. Top-k and top-p thresholds are found exactly by a radix
// search over order-preserving 32-bit keys of the scaled logits (32 counting passes over the row:
// the k-th largest key, then the largest key whose tail mass reaches top_p), so no sort and no
// scratch memory beyond shared arrays. The draw is u = device_uniform(seed, step) in [0, 1)
// (core/sample_params.h); the token is the first index (in vocabulary order) where the running
// mass of the kept tokens exceeds u * Z. core/sampling.cpp sample_like_device is the same
// algorithm on the host (the CPU backend's sample), so the executor's device path runs on CPUs.
#include <cstdint>

#include "core/sample_params.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ uint32_t order_key(float f) { return sample_order_key(__float_as_uint(f)); }

// Block argmax of row (lowest index on ties); every thread gets the index.
__device__ int block_argmax(const float* row, int64_t vocab, float* s_val, int* s_idx) {
  float best = -INFINITY;
  int idx = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = row[i];
    if (x > best || (x == best && i < idx)) {
      best = x;
      idx = static_cast<int>(i);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(kFullMask, best, o);
    const int oi = __shfl_xor_sync(kFullMask, idx, o);
    if (ob > best || (ob == best && oi < idx)) {
      best = ob;
      idx = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) {
    s_val[warp] = best;
    s_idx[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (s_val[w] > s_val[0] || (s_val[w] == s_val[0] && s_idx[w] < s_idx[0])) {
        s_val[0] = s_val[w];
        s_idx[0] = s_idx[w];
      }
    if (s_idx[0] == 0x7fffffff) s_idx[0] = 0;  // an all-NaN row
  }
  __syncthreads();
  return s_idx[0];
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* logits, int64_t vocab, int32_t* tokens) {
  __shared__ float s_val[32];
  __shared__ int s_idx[32];
  const int t = block_argmax(logits + blockIdx.x * vocab, vocab, s_val, s_idx);
  if (threadIdx.x == 0) tokens[blockIdx.x] = t;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, const SampleParams* params,
                                                          int64_t vocab, int32_t* tokens) {
  __shared__ float s_val[32];
  __shared__ int s_idx[32];
  __shared__ float s_chunk[kThreads];
  __shared__ int s_last;
  const float* row = logits + blockIdx.x * vocab;
  const SampleParams p = params[blockIdx.x];
  if (!(p.temperature > 0.0f)) {
    const int t = block_argmax(row, vocab, s_val, s_idx);
    if (threadIdx.x == 0) tokens[blockIdx.x] = t;
    return;
  }
  const float inv_t = 1.0f / p.temperature;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, row[i] * inv_t);
  mx = block_max(mx, s_val);

  // Top-k threshold: the k-th largest key (all keys kept when k is off).
  uint32_t thresh = 0;
  if (p.top_k > 0 && p.top_k < vocab) {
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = thresh | (1u << bit);
      float cnt = 0.0f;
      for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) cnt += order_key(row[i] * inv_t) >= cand ? 1.0f : 0.0f;
      if (block_sum(cnt, s_val) >= static_cast<float>(p.top_k)) thresh = cand;
    }
  }
  // Min-p: x >= mx + log(min_p), one f32 threshold (log computed on the host), as a key.
  if (p.log_min_p > -INFINITY) thresh = max(thresh, order_key(mx + p.log_min_p));
  // Top-p threshold: the largest key whose tail mass (among those kept) reaches top_p of the total.
  auto mass_at_least = [&](uint32_t key) {
    float m = 0.0f;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float x = row[i] * inv_t;
      const uint32_t k = order_key(x);
      if (k >= key && k >= thresh) m += __expf(x - mx);
    }
    return block_sum(m, s_val);
  };
  if (p.top_p < 1.0f) {
    const float target = p.top_p * mass_at_least(0);
    uint32_t tp = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = tp | (1u << bit);
      if (mass_at_least(cand) >= target) tp = cand;
    }
    thresh = max(thresh, tp);
  }
  // Draw: contiguous chunks per thread, exclusive scan of the chunk masses, one thread walks its chunk.
  const int64_t chunk = (vocab + blockDim.x - 1) / blockDim.x;
  const int64_t b = threadIdx.x * chunk, e = min(vocab, b + chunk);
  float local = 0.0f;
  int last = -1;
  for (int64_t i = b; i < e; ++i) {
    const float x = row[i] * inv_t;
    if (order_key(x) >= thresh) {
      local += __expf(x - mx);
      last = static_cast<int>(i);
    }
  }
  if (threadIdx.x == 0) s_last = -1;
  s_chunk[threadIdx.x] = local;
  __syncthreads();
  if (last >= 0) atomicMax(&s_last, last);
  if (threadIdx.x == 0) {
    float run = 0.0f;
    for (int t = 0; t < static_cast<int>(blockDim.x); ++t) {
      const float c = s_chunk[t];
      s_chunk[t] = run;
      run += c;
    }
    s_val[0] = run;
  }
  __syncthreads();
  const float total = s_val[0];
  const float u = device_uniform(p.seed, p.step) * total;
  const float start = s_chunk[threadIdx.x];
  if (local > 0.0f && u >= start && u < start + local) {
    float run = start;
    int pick = last;
    for (int64_t i = b; i < e; ++i) {
      const float x = row[i] * inv_t;
      if (order_key(x) < thresh) continue;
      run += __expf(x - mx);
      if (u < run) {
        pick = static_cast<int>(i);
        break;
      }
    }
    tokens[blockIdx.x] = pick;
  }
  __syncthreads();
  // Rounding can leave u at or past the last boundary: then the last kept token is drawn.
  if (threadIdx.x == 0 && !(u < total)) tokens[blockIdx.x] = s_last;
}

__global__ void gather_tokens_kernel(const int32_t* table, const int32_t* index, int64_t n, int32_t* tokens) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n && index[i] >= 0) tokens[i] = table[index[i]];
}

__global__ void scatter_tokens_kernel(const int32_t* tokens, const int32_t* index, int64_t n, int32_t* table) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n && index[i] >= 0) table[index[i]] = tokens[i];
}

constexpr int kTokenThreads = 256;

}  // namespace

void launch_gather_tokens(const int32_t* table, const int32_t* index, int64_t n, int32_t* tokens,
                          cudaStream_t stream) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>((n + kTokenThreads - 1) / kTokenThreads);
  gather_tokens_kernel<<<blocks, kTokenThreads, 0, stream>>>(table, index, n, tokens);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_scatter_tokens(const int32_t* tokens, const int32_t* index, int64_t n, int32_t* table,
                           cudaStream_t stream) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>((n + kTokenThreads - 1) / kTokenThreads);
  scatter_tokens_kernel<<<blocks, kTokenThreads, 0, stream>>>(tokens, index, n, table);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_argmax(const float* logits, int64_t n, int64_t vocab, int32_t* tokens, cudaStream_t stream) {
  if (n == 0) return;
  argmax_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, vocab, tokens);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_sample(const float* logits, const void* params, int64_t n, int64_t vocab, int32_t* tokens,
                   cudaStream_t stream) {
  if (n == 0) return;
  sample_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      logits, static_cast<const SampleParams*>(params), vocab, tokens);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::gpu
