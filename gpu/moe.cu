// Mixture-of-experts kernels (Backend::moe_route / moe_experts in core/backend.h).
//
// Routing: one block per token; softmax or sigmoid scores in f32 in shared memory, the expert
// groups outside the topk_group best excluded (thread 0), then k rounds of a block argmax over
// score + bias (largest first, lowest index on ties); weights from the unbiased scores.
// Experts, in three kernels, none of which needs the routing on the host (graph capturable):
//   1. gate_up: a block owns (expert e, a tile of its I intermediate columns), collects the
//      (token, slot) pairs routed to e by scanning ids, and writes act[pair] = silu(g) * u (bf16);
//   2. down: a block owns (expert e, a tile of the d output rows), the same pairs, and writes each
//      pair's expert output ys[pair] (f32);
//   3. combine: one block per token sums its k outputs in slot order, times their weights
//      (under expert parallelism only the slots whose expert this rank holds: core/backend.h).
// Each expert's weight rows are read from memory once per step by the blocks that own them (and
// reused from L1 for every token that chose the expert), so a step reads the distinct experts its
// tokens touched; the products themselves are warp dot products on CUDA cores (no tensor cores).
#include <cuda_bf16.h>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerBlock = 64;  // weight rows (intermediate columns or output rows) per block
constexpr int kPairChunk = 256;    // routed pairs a block collects at a time

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// Marks with excluded[i] = 1 every expert outside the topk_group best groups (thread 0, serially:
// n_group <= 64 groups of E / n_group experts, a few hundred comparisons per token).
__device__ void exclude_groups(const float* sel, const float* bias, const RouteArgs& a, unsigned char* excluded) {
  float score[64];
  const int size = a.n_experts / a.n_group;
  for (int g = 0; g < a.n_group; ++g) {
    float b1 = -INFINITY, b2 = -INFINITY;  // the group's largest and second largest choice score
    for (int i = g * size; i < (g + 1) * size; ++i) {
      const float c = sel[i] + (bias != nullptr ? bias[i] : 0.0f);
      if (c > b1) b2 = b1, b1 = c;
      else if (c > b2) b2 = c;
    }
    score[g] = a.group_score == 1 ? b1 : b1 + b2;
  }
  bool chosen[64] = {};
  for (int j = 0; j < a.topk_group; ++j) {
    int best = -1;
    for (int g = 0; g < a.n_group; ++g)
      if (!chosen[g] && (best < 0 || score[g] > score[best])) best = g;
    chosen[best] = true;
  }
  for (int i = 0; i < a.n_experts; ++i) excluded[i] = chosen[i / size] ? 0 : 1;
}

__global__ void route_kernel(RouteArgs a) {
  extern __shared__ float p[];  // [n_experts] scores, then [n_experts] bytes: excluded (taken, or group out)
  unsigned char* excluded = reinterpret_cast<unsigned char*>(p + a.n_experts);
  __shared__ float scratch[32];
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const int64_t t = blockIdx.x;
  const int n_experts = a.n_experts, k = a.k;
  const float* l = a.logits + t * n_experts;
  if (a.sigmoid) {
    for (int i = threadIdx.x; i < n_experts; i += blockDim.x) p[i] = 1.0f / (1.0f + expf(-l[i]));
  } else {
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n_experts; i += blockDim.x) mx = fmaxf(mx, l[i]);
    mx = block_max(mx, scratch);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n_experts; i += blockDim.x) sum += (p[i] = expf(l[i] - mx));
    sum = block_sum(sum, scratch);
    for (int i = threadIdx.x; i < n_experts; i += blockDim.x) p[i] /= sum;
  }
  for (int i = threadIdx.x; i < n_experts; i += blockDim.x) excluded[i] = 0;
  __syncthreads();
  const float* sel = a.select_on_logits ? l : p;  // what the selection ranks (plus the bias)
  if (a.group_score != 0 && a.n_group > 1 && threadIdx.x == 0) exclude_groups(sel, a.bias, a, excluded);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  float top = 0.0f;  // thread 0's running sum of the chosen scores
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = n_experts;
    for (int i = threadIdx.x; i < n_experts; i += blockDim.x) {
      const float c = sel[i] + (a.bias != nullptr ? a.bias[i] : 0.0f);
      if (!excluded[i] && better(c, i, bv, bi)) bv = c, bi = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, bv, o);
      const int oi = __shfl_xor_sync(kFullMask, bi, o);
      if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (lane == 0) best_v[warp] = bv, best_i[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < n_warps; ++w)
        if (better(best_v[w], best_i[w], bv, bi)) bv = best_v[w], bi = best_i[w];
      // NaN scores (a NaN router input) win no comparison: take the first expert not taken yet,
      // so ids stay in range and p / excluded are not indexed past their n_experts entries (the
      // NaN weights then carry the failure to the logits, where the step's check sees it).
      if (bi >= n_experts)
        for (bi = 0; bi < n_experts - 1 && excluded[bi]; ++bi) {
        }
      a.ids[t * k + j] = bi - a.first_expert;  // relative to this expert-parallel rank's experts
      a.weights[t * k + j] = p[bi];  // the unbiased score
      top += p[bi];
      excluded[bi] = 1;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int j = 0; j < k; ++j)
      a.weights[t * k + j] = (a.normalize ? a.weights[t * k + j] / top : a.weights[t * k + j]) * a.scale *
                             (a.expert_scale != nullptr ? a.expert_scale[a.ids[t * k + j] + a.first_expert] : 1.0f);
}

// Backend::moe_route's sparsemixer rule, one thread per token (top-2 over E logits: a few passes
// over a row that is a few dozen floats wide).
__global__ void sparsemixer_route_kernel(RouteArgs a, int64_t n) {
  const int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const float* l = a.logits + t * a.n_experts;
  int chosen = -1;  // the first expert, out of the second one's choice and softmax
  for (int j = 0; j < 2; ++j) {
    int m = -1;
    for (int i = 0; i < a.n_experts; ++i)
      if (i != chosen && (m < 0 || l[i] > l[m])) m = i;
    const float top = l[m];
    float sum = 0.0f;
    for (int i = 0; i < a.n_experts; ++i)
      if (i != chosen && !(__fdiv_rn(top - l[i], fmaxf(fabsf(l[i]), top)) > 2.0f * a.jitter_eps))
        sum += expf(l[i] - top);
    a.ids[t * 2 + j] = m - a.first_expert;
    a.weights[t * 2 + j] = 1.0f / sum;
    chosen = m;
  }
}

// Collects into `sel` the next routed pairs of expert e from ids [pairs], starting at *from;
// returns how many (<= kPairChunk) and advances *from. Called by the whole block.
__device__ int collect_pairs(const int32_t* ids, int64_t pairs, int e, int64_t* from, int32_t* sel, int* count) {
  if (threadIdx.x == 0) *count = 0;
  __syncthreads();
  // Scan until the chunk could overflow: at most kThreads new pairs per pass, kPairChunk / kThreads passes.
  int64_t p0 = *from;
  for (int pass = 0; pass < kPairChunk / kThreads && p0 < pairs; ++pass, p0 += kThreads) {
    const int64_t p = p0 + threadIdx.x;
    if (p < pairs && ids[p] == e) sel[atomicAdd(count, 1)] = static_cast<int32_t>(p);
  }
  *from = p0;
  __syncthreads();
  return *count;
}

// Calls fn(row, pair) for each weight row in [r0, min(r0 + kRowsPerBlock, rows)) of this block
// (one warp per row) and each (token, slot) pair routed to expert e; the whole warp calls fn.
template <class Fn>
__device__ void for_routed_pairs(const int32_t* ids, int64_t pairs, int e, int64_t r0, int64_t rows, Fn fn) {
  __shared__ int32_t sel[kPairChunk];
  __shared__ int count;
  const int warp = threadIdx.x >> 5;
  const int64_t r_end = r0 + kRowsPerBlock < rows ? r0 + kRowsPerBlock : rows;
  for (int64_t from = 0; from < pairs;) {
    const int n_sel = collect_pairs(ids, pairs, e, &from, sel, &count);
    for (int64_t r = r0 + warp; r < r_end; r += kWarps)
      for (int s = 0; s < n_sel; ++s) fn(r, static_cast<int64_t>(sel[s]));
    __syncthreads();  // sel is refilled next
  }
}

// act [pairs, I] bf16 = silu(gate_e · x[t]) * (up_e · x[t]) for each pair (t, j) routed to e, or
// with gpt-oss's biases and clamped SwiGLU (ExpertMlpArgs).
__global__ void experts_gate_up_kernel(const bf16* x, const bf16* gate_up, const int32_t* ids, int64_t pairs, int k,
                                       int64_t d, int64_t inter, ExpertMlpArgs mlp, bf16* act) {
  const bf16* w = gate_up + int64_t{blockIdx.x} * 2 * inter * d;
  const float* bias = mlp.gate_up_bias != nullptr ? mlp.gate_up_bias + int64_t{blockIdx.x} * 2 * inter : nullptr;
  for_routed_pairs(ids, pairs, blockIdx.x, int64_t{blockIdx.y} * kRowsPerBlock, inter, [&](int64_t c, int64_t pair) {
    const bf16* xr = x + (pair / k) * d;
    // Rounded to bf16 as the dense MLP's GEMM output is before silu_mul.
    // Llama 4's weight on the input: gate and up are linear in x, so w (gate · x) = gate · (w x).
    const float in_w = mlp.weight_on_input ? mlp.weights[pair] : 1.0f;
    float g = __bfloat162float(
        __float2bfloat16_rn(in_w * warp_dot(w + c * d, xr, d) + (bias != nullptr ? bias[c] : 0.0f)));
    float u = __bfloat162float(
        __float2bfloat16_rn(in_w * warp_dot(w + (inter + c) * d, xr, d) + (bias != nullptr ? bias[inter + c] : 0.0f)));
    float a;
    if (mlp.gelu_tanh) {  // Gemma 4: torch's gelu(approximate='tanh'), rounded to bf16 as its op leaves it
      const float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
      a = __bfloat162float(__float2bfloat16_rn(0.5f * g * (1.0f + tanhf(kBeta * (g + kKappa * g * g * g))))) * u;
    } else if (mlp.swiglu_limit > 0.0f) {
      g = fminf(g, mlp.swiglu_limit);
      u = fminf(fmaxf(u, -mlp.swiglu_limit), mlp.swiglu_limit);
      a = (u + 1.0f) * (g / (1.0f + expf(-mlp.swiglu_alpha * g)));
    } else {
      a = g / (1.0f + expf(-g)) * u;
    }
    if ((threadIdx.x & 31) == 0) act[pair * inter + c] = __float2bfloat16_rn(a);
  });
}

// ys [pairs, d] f32 = down_e · act[pair] (+ the expert's down bias) for each pair routed to e.
__global__ void experts_down_kernel(const bf16* act, const bf16* down, const int32_t* ids, int64_t pairs, int64_t d,
                                    int64_t inter, const float* down_bias, float* ys) {
  const bf16* w = down + int64_t{blockIdx.x} * d * inter;
  const float* bias = down_bias != nullptr ? down_bias + int64_t{blockIdx.x} * d : nullptr;
  for_routed_pairs(ids, pairs, blockIdx.x, int64_t{blockIdx.y} * kRowsPerBlock, d, [&](int64_t h, int64_t pair) {
    const float y = warp_dot(w + h * inter, act + pair * inter, inter) + (bias != nullptr ? bias[h] : 0.0f);
    if ((threadIdx.x & 31) == 0) ys[pair * d + h] = y;
  });
}

// out [n, d] bf16 = sum over j in slot order of weights[t, j] * ys[t * k + j] (unweighted: of
// ys alone, the weights having scaled the experts' inputs), over the slots
// whose expert this rank holds (ids in [0, n_experts); expert parallelism leaves the others to
// other ranks, and their ys rows unwritten).
__global__ void experts_combine_kernel(const float* ys, const float* weights, const int32_t* ids, int n_experts, int k,
                                       int64_t d, bool unweighted, bf16* out) {
  const int64_t t = blockIdx.x;
  for (int64_t h = threadIdx.x; h < d; h += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      if (e >= 0 && e < n_experts) acc = fmaf(unweighted ? 1.0f : weights[t * k + j], ys[(t * k + j) * d + h], acc);
    }
    out[t * d + h] = __float2bfloat16_rn(acc);
  }
}

// The act part of the workspace, rounded up so the f32 ys part starts 256-byte aligned.
size_t act_bytes(int64_t pairs, int64_t inter) { return (static_cast<size_t>(pairs * inter) * 2 + 255) / 256 * 256; }

}  // namespace

size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter) {
  const int64_t pairs = n * k;
  return act_bytes(pairs, inter) + static_cast<size_t>(pairs * d) * sizeof(float);
}

void launch_moe_route(const RouteArgs& a, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (a.sparsemixer) {
    sparsemixer_route_kernel<<<static_cast<unsigned>(ceil_div(n, 128)), 128, 0, stream>>>(a, n);
    BRIGADE_CUDA_CHECK_LAUNCH();
    return;
  }
  const int threads = a.n_experts >= 256 ? 256 : (a.n_experts + 31) / 32 * 32;
  const size_t smem = static_cast<size_t>(a.n_experts) * (sizeof(float) + 1);
  route_kernel<<<static_cast<unsigned>(n), threads, smem, stream>>>(a);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

void launch_moe_experts(const void* x, const void* gate_up, const void* down, const int32_t* ids, const float* weights,
                        const ExpertMlpArgs& mlp, int64_t n, int k, int64_t d, int64_t inter, int n_experts,
                        void* workspace, void* out, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t pairs = n * k;
  bf16* act = static_cast<bf16*>(workspace);
  float* ys = reinterpret_cast<float*>(static_cast<char*>(workspace) + act_bytes(pairs, inter));
  const dim3 gu_grid(static_cast<unsigned>(n_experts), ceil_div(inter, kRowsPerBlock));
  experts_gate_up_kernel<<<gu_grid, kThreads, 0, stream>>>(static_cast<const bf16*>(x), static_cast<const bf16*>(gate_up),
                                                           ids, pairs, k, d, inter, mlp, act);
  BRIGADE_CUDA_CHECK_LAUNCH();
  const dim3 down_grid(static_cast<unsigned>(n_experts), ceil_div(d, kRowsPerBlock));
  experts_down_kernel<<<down_grid, kThreads, 0, stream>>>(act, static_cast<const bf16*>(down), ids, pairs, d, inter,
                                                          mlp.down_bias, ys);
  BRIGADE_CUDA_CHECK_LAUNCH();
  experts_combine_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(ys, weights, ids, n_experts, k, d,
                                                                            mlp.weight_on_input, static_cast<bf16*>(out));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

namespace {

// out[t] += (sum over j with ids[t, j] >= n_experts of weights[t, j]) * x[t]: one block per token.
__global__ void identity_experts_kernel(const bf16* x, const int32_t* ids, const float* weights, int n_experts, int k,
                                        int64_t d, bf16* out) {
  const int64_t t = blockIdx.x;
  float w = 0.0f;
  for (int j = 0; j < k; ++j)
    if (ids[t * k + j] >= n_experts) w += weights[t * k + j];
  if (w == 0.0f) return;
  for (int64_t h = threadIdx.x; h < d; h += blockDim.x)
    out[t * d + h] = __float2bfloat16_rn(__bfloat162float(out[t * d + h]) + w * __bfloat162float(x[t * d + h]));
}

}  // namespace

void launch_moe_identity_experts(const void* x, const int32_t* ids, const float* weights, int n_experts, int64_t n, int k,
                                 int64_t d, void* out, cudaStream_t stream) {
  if (n == 0) return;
  identity_experts_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      static_cast<const bf16*>(x), ids, weights, n_experts, k, d, static_cast<bf16*>(out));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::gpu
