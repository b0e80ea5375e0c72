// State-space kernels (core/backend.h "state-space layers"): the causal depthwise convolution
// (ssm_conv, LFM2's short_conv), Mamba2's scan (ssm_scan and its grouped RMSNorm), Mamba1's
// (ssm_scan_diag), Gated DeltaNet (gated_delta with its per-head gated RMSNorm), Kimi's KDA (kda), MiniMax's lightning
// attention (lightning_attention), sigmoid_mul and relu_squared. bf16 activations, f32 states and parameters, f32 arithmetic.
//
// The scans run one block per (head or block of channels, sequence): the block loads its state
// slot into shared memory (coalesced; zeros when fresh), walks the sequence's rows in order (one
// row at decode, the whole prompt at prefill: a sequential recurrence per sequence, not a chunked
// parallel scan), writes a snapshot where SsmSeqs asks, and stores the state back. Within a row
// each warp owns state rows (a head's channel, a value channel), its lanes the N state elements,
// so the update and the dot products run out of shared memory without bank conflicts and the
// reductions are warp shuffles. The sequence table (q_start, slots, fresh, snapshots) is read on
// the device, so the launch geometry depends on n_seqs alone (CUDA-Graph replays).
#include <algorithm>
#include <cuda_bf16.h>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kConvThreads = 128;
constexpr int kScanThreads = 256;
constexpr int kDiagChannels = 32;  // channels per ssm_scan_diag block

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }
// torch's softplus (beta 1, threshold 20).
__device__ __forceinline__ float softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

// Sequence s of the step, read on the device. ok is false (the sequence is skipped) for rows or
// slots the host could not check (they live in device memory): the model never passes them.
struct SeqRows {
  int64_t begin = 0, end = 0, save_row = -1;
  int32_t slot = 0, save_slot = -1;
  bool fresh = false, ok = false;
};

__device__ SeqRows seq_rows(const SsmSeqArgs& a, int s) {
  SeqRows r;
  r.begin = a.q_start[s];
  r.end = a.q_start[s + 1];
  r.slot = a.slots[s];
  r.fresh = a.fresh[s] != 0;
  r.ok = r.begin >= 0 && r.begin <= r.end && r.end <= a.n_rows && r.slot >= 0 && r.slot < a.n_slots;
  if (a.save_rows != nullptr) {
    const int32_t after = a.save_rows[s], to = a.save_slots[s];
    if (after > 0 && after <= r.end - r.begin && to >= 0 && to < a.n_slots && to != r.slot) {
      r.save_row = r.begin + after - 1;
      r.save_slot = to;
    }
  }
  return r;
}

// One thread per (channel, sequence): the K - 1 previous inputs in registers, the rows in order.
// kShort: LFM2's short_conv (input B * x, output C * conv); else silu(conv) of in's columns
// [col, col + ch).
template <bool kShort>
__global__ void conv_kernel(const bf16* in, int64_t width, int64_t col, int64_t ch, int k, const float* w,
                            const float* bias, SsmSeqArgs seqs, float* state, bf16* out) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const SeqRows r = seq_rows(seqs, blockIdx.y);
  if (!r.ok || c >= ch) return;
  const int keep = k - 1;
  float win[kMaxConvKernel], wc[kMaxConvKernel];  // win[j < keep]: the input keep - j rows back
  float* st = state + int64_t{r.slot} * keep * ch;
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j) {
    win[j] = j < keep && !r.fresh ? st[j * ch + c] : 0.0f;
    wc[j] = j < k ? w[c * k + j] : 0.0f;
  }
  const float b = bias != nullptr ? bias[c] : 0.0f;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const bf16* src = in + row * width;
    const float v = kShort ? __bfloat162float(src[c]) * __bfloat162float(src[2 * ch + c]) : __bfloat162float(src[col + c]);
    float acc = b;
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j) {
      if (j == keep) win[j] = v;
      if (j < k) acc += wc[j] * win[j];
    }
    out[row * ch + c] = __float2bfloat16_rn(kShort ? __bfloat162float(src[ch + c]) * acc : silu(acc));
#pragma unroll
    for (int j = 0; j + 1 < kMaxConvKernel; ++j)
      if (j < keep) win[j] = win[j + 1];
    if (row == r.save_row) {
      float* sv = state + int64_t{r.save_slot} * keep * ch;
#pragma unroll
      for (int j = 0; j < kMaxConvKernel; ++j)
        if (j < keep) sv[j * ch + c] = win[j];
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j)
    if (j < keep) st[j * ch + c] = win[j];
}

// A block's state [count] f32 between its slot and shared memory.
__device__ __forceinline__ void load_state(float* s, const float* src, int64_t count, bool fresh) {
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) s[e] = fresh ? 0.0f : src[e];
}
__device__ __forceinline__ void store_state(float* dst, const float* s, int64_t count) {
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) dst[e] = s[e];
}

// Mamba2: block (head h, sequence); shared memory S [P, N], B [N], C [N], x [P]. Writes
// y * silu(z) (the gated norm's weight, if any, is applied by group_norm_kernel).
__global__ void ssm_scan_kernel(const bf16* proj, int64_t width, const bf16* xbc, int64_t ch, int heads, int hd,
                                int groups, int ns, const float* a, const float* dskip, const float* dt_bias,
                                float dt_min, float dt_max, SsmSeqArgs seqs, float* state, bf16* out) {
  extern __shared__ float smem[];
  const int64_t size = int64_t{hd} * ns, d_inner = int64_t{heads} * hd;
  float* s_all = smem;
  float* bs = s_all + size;
  float* cs = bs + ns;
  float* xs = cs + ns;
  const int h = blockIdx.x, g = h / (heads / groups);
  const SeqRows r = seq_rows(seqs, blockIdx.y);
  if (!r.ok) return;
  float* st = state + (int64_t{r.slot} * heads + h) * size;
  load_state(s_all, st, size, r.fresh);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t row = r.begin; row < r.end; ++row) {
    __syncthreads();  // the state loaded, the previous row's B, C and x read
    const bf16* xr = xbc + row * ch;
    for (int i = threadIdx.x; i < ns; i += blockDim.x) {
      bs[i] = __bfloat162float(xr[d_inner + int64_t{g} * ns + i]);
      cs[i] = __bfloat162float(xr[d_inner + int64_t{groups + g} * ns + i]);
    }
    for (int i = threadIdx.x; i < hd; i += blockDim.x) xs[i] = __bfloat162float(xr[int64_t{h} * hd + i]);
    __syncthreads();
    const bf16* pr = proj + row * width;
    const float dt = fminf(fmaxf(softplus(__bfloat162float(pr[d_inner + ch + h]) + dt_bias[h]), dt_min), dt_max);
    const float decay = expf(dt * a[h]);
    for (int i = warp; i < hd; i += n_warps) {  // S_i = decay S_i + (dt x_i) B;  y_i = S_i . C + D x_i
      float* s = s_all + int64_t{i} * ns;
      const float dx = dt * xs[i];
      float acc = 0.0f;
      for (int n = lane; n < ns; n += 32) {
        const float v = decay * s[n] + dx * bs[n];
        s[n] = v;
        acc += v * cs[n];
      }
      acc = warp_sum(acc);
      if (lane == 0) {
        const int64_t col = int64_t{h} * hd + i;
        out[row * d_inner + col] = __float2bfloat16_rn((acc + dskip[h] * xs[i]) * silu(__bfloat162float(pr[col])));
      }
    }
    if (row == r.save_row) {
      __syncthreads();
      store_state(state + (int64_t{r.save_slot} * heads + h) * size, s_all, size);
    }
  }
  __syncthreads();
  store_state(st, s_all, size);
}

// Mamba2's gated RMSNorm after the gate: block (row, group) scales y's group of gsize values by
// weight / rms, in place.
__global__ void group_norm_kernel(bf16* y, int64_t d, int64_t gsize, const float* w, float eps) {
  __shared__ float scratch[32];
  bf16* yr = y + int64_t{blockIdx.x} * d + int64_t{blockIdx.y} * gsize;
  const float* wg = w + int64_t{blockIdx.y} * gsize;
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < gsize; i += blockDim.x) {
    const float v = __bfloat162float(yr[i]);
    sq += v * v;
  }
  sq = block_sum(sq, scratch);
  const float inv = 1.0f / sqrtf(sq / static_cast<float>(gsize) + eps);
  for (int64_t i = threadIdx.x; i < gsize; i += blockDim.x)
    yr[i] = __float2bfloat16_rn(wg[i] * (__bfloat162float(yr[i]) * inv));
}

// Mamba1: block (kDiagChannels channels, sequence); shared memory S and A [kDiagChannels, N],
// B [N], C [N], dt and x [kDiagChannels].
__global__ void ssm_scan_diag_kernel(const bf16* x, const bf16* dt_in, const bf16* b, const bf16* c, const bf16* z,
                                     int64_t zw, int64_t z_col, const float* a, const float* skip, int64_t dim, int ns,
                                     SsmSeqArgs seqs, float* state, bf16* out) {
  extern __shared__ float smem[];
  const int64_t d0 = int64_t{blockIdx.x} * kDiagChannels;
  const int nd = static_cast<int>(dim - d0 < kDiagChannels ? dim - d0 : kDiagChannels);
  const int64_t size = int64_t{nd} * ns;
  float* s_all = smem;
  float* as = s_all + int64_t{kDiagChannels} * ns;
  float* bs = as + int64_t{kDiagChannels} * ns;
  float* cs = bs + ns;
  float* dts = cs + ns;
  float* xs = dts + kDiagChannels;
  const SeqRows r = seq_rows(seqs, blockIdx.y);
  if (!r.ok) return;
  float* st = state + int64_t{r.slot} * dim * ns + d0 * ns;
  load_state(s_all, st, size, r.fresh);
  for (int64_t e = threadIdx.x; e < size; e += blockDim.x) as[e] = a[d0 * ns + e];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t row = r.begin; row < r.end; ++row) {
    __syncthreads();
    for (int i = threadIdx.x; i < ns; i += blockDim.x) {
      bs[i] = __bfloat162float(b[row * ns + i]);
      cs[i] = __bfloat162float(c[row * ns + i]);
    }
    for (int i = threadIdx.x; i < nd; i += blockDim.x) {
      dts[i] = softplus(__bfloat162float(dt_in[row * dim + d0 + i]));
      xs[i] = __bfloat162float(x[row * dim + d0 + i]);
    }
    __syncthreads();
    for (int i = warp; i < nd; i += n_warps) {  // S_d = exp(dt_d A_d) S_d + (dt_d x_d) B, y_d = S_d . C
      float* s = s_all + int64_t{i} * ns;
      const float* ar = as + int64_t{i} * ns;
      const float dt = dts[i], dx = dt * xs[i];
      float acc = 0.0f;
      for (int n = lane; n < ns; n += 32) {
        const float v = expf(dt * ar[n]) * s[n] + dx * bs[n];
        s[n] = v;
        acc += v * cs[n];
      }
      acc = warp_sum(acc);
      if (lane == 0) {
        const int64_t d = d0 + i;
        const float y = (acc + skip[d] * xs[i]) * silu(__bfloat162float(z[row * zw + z_col + d]));
        out[row * dim + d] = __float2bfloat16_rn(y);
      }
    }
    if (row == r.save_row) {
      __syncthreads();
      store_state(state + int64_t{r.save_slot} * dim * ns + d0 * ns, s_all, size);
    }
  }
  __syncthreads();
  store_state(st, s_all, size);
}

// The delta rules' q and k of one row (N each, from q_in and k_in) into shared qs and ks,
// L2-normalised (FLA's x / sqrt(|x|^2 + 1e-6)) and q also by N^-1/2. The block's threads all
// call it; the caller synchronises before reading qs and ks.
__device__ void load_unit_qk(const bf16* q_in, const bf16* k_in, int nk, float* qs, float* ks, float* scratch) {
  float qq = 0.0f, kk = 0.0f;
  for (int i = threadIdx.x; i < nk; i += blockDim.x) {
    const float qv = __bfloat162float(q_in[i]), kv = __bfloat162float(k_in[i]);
    qs[i] = qv;
    ks[i] = kv;
    qq += qv * qv;
    kk += kv * kv;
  }
  qq = block_sum(qq, scratch);
  kk = block_sum(kk, scratch);
  const float qn = (1.0f / sqrtf(static_cast<float>(nk))) / sqrtf(qq + 1e-6f), kn = 1.0f / sqrtf(kk + 1e-6f);
  for (int i = threadIdx.x; i < nk; i += blockDim.x) {
    qs[i] *= qn;
    ks[i] *= kn;
  }
}

// Gated DeltaNet: block (value head h, sequence); shared memory S [P, N], q and k [N], v and o
// [P]. Each row: q, k L2-normalised (q also by N^-1/2), then per value channel j (a warp)
// delta_j = beta (v_j - decay S_j . k), S_j = decay S_j + delta_j k, o_j = S_j . q; then out's
// head = RMSNorm(o) * weight * silu(z).
__global__ void gated_delta_kernel(const bf16* qkv, int64_t ch, const bf16* proj, int64_t width, int64_t z_col,
                                   int heads, int pv, int groups, int nk, bool tiled, const float* a,
                                   const float* dt_bias, const float* norm_w, float eps, SsmSeqArgs seqs, float* state,
                                   bf16* out) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const int64_t size = int64_t{pv} * nk, kd = int64_t{groups} * nk, vd = int64_t{heads} * pv;
  float* s_all = smem;
  float* qs = s_all + size;
  float* ks = qs + nk;
  float* vs = ks + nk;
  float* os = vs + pv;
  const int h = blockIdx.x, g = tiled ? h % groups : h / (heads / groups);
  const SeqRows r = seq_rows(seqs, blockIdx.y);
  if (!r.ok) return;
  float* st = state + (int64_t{r.slot} * heads + h) * size;
  load_state(s_all, st, size, r.fresh);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const bf16* xr = qkv + row * ch;
    __syncthreads();  // the previous row's q, k, v and o read
    for (int j = threadIdx.x; j < pv; j += blockDim.x) vs[j] = __bfloat162float(xr[2 * kd + int64_t{h} * pv + j]);
    load_unit_qk(xr + int64_t{g} * nk, xr + kd + int64_t{g} * nk, nk, qs, ks, scratch);
    __syncthreads();
    const bf16* zba = proj + row * width + z_col;
    const float beta = 1.0f / (1.0f + expf(-__bfloat162float(zba[vd + h])));
    const float decay = expf(a[h] * softplus(__bfloat162float(zba[vd + heads + h]) + dt_bias[h]));
    for (int j = warp; j < pv; j += n_warps) {
      float* s = s_all + int64_t{j} * nk;
      float sk = 0.0f;
      for (int n = lane; n < nk; n += 32) sk += s[n] * ks[n];
      const float delta = beta * (vs[j] - decay * warp_sum(sk));
      float o = 0.0f;
      for (int n = lane; n < nk; n += 32) {
        const float v = decay * s[n] + delta * ks[n];
        s[n] = v;
        o += v * qs[n];
      }
      o = warp_sum(o);
      if (lane == 0) os[j] = o;
    }
    __syncthreads();  // o complete (and the state, for a snapshot)
    if (row == r.save_row) store_state(state + (int64_t{r.save_slot} * heads + h) * size, s_all, size);
    float sq = 0.0f;
    for (int j = threadIdx.x; j < pv; j += blockDim.x) sq += os[j] * os[j];
    sq = block_sum(sq, scratch);
    const float inv = 1.0f / sqrtf(sq / static_cast<float>(pv) + eps);
    for (int j = threadIdx.x; j < pv; j += blockDim.x) {
      const float zv = __bfloat162float(zba[int64_t{h} * pv + j]);
      out[row * vd + int64_t{h} * pv + j] = __float2bfloat16_rn(norm_w[j] * (os[j] * inv) * silu(zv));
    }
  }
  __syncthreads();
  store_state(st, s_all, size);
}

// Kimi Delta Attention: block (head h, sequence); shared memory S [P, N], q, k and the decays
// [N], v [P]. Each row: q, k L2-normalised (q also by N^-1/2), decay_i = exp(a softplus(f_i +
// dt_bias_i)), then per value channel j (a warp) S_j *= decay, delta_j = beta (v_j - S_j . k),
// S_j += delta_j k, o_j = S_j . q, written to out as it is (the gated norm is the model's).
__global__ void kda_kernel(const bf16* qkv, const bf16* f, const bf16* beta_in, int heads, int pv, int nk,
                           const float* a, const float* dt_bias, SsmSeqArgs seqs, float* state, bf16* out) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const int64_t size = int64_t{pv} * nk, kd = int64_t{heads} * nk, vd = int64_t{heads} * pv, ch = 2 * kd + vd;
  float* s_all = smem;
  float* qs = s_all + size;
  float* ks = qs + nk;
  float* ds = ks + nk;
  float* vs = ds + nk;
  const int h = blockIdx.x;
  const SeqRows r = seq_rows(seqs, blockIdx.y);
  if (!r.ok) return;
  float* st = state + (int64_t{r.slot} * heads + h) * size;
  load_state(s_all, st, size, r.fresh);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const bf16* xr = qkv + row * ch;
    const bf16* fr = f + row * kd + int64_t{h} * nk;
    __syncthreads();  // the previous row's q, k, decays and v read
    for (int i = threadIdx.x; i < nk; i += blockDim.x)
      ds[i] = expf(a[h] * softplus(__bfloat162float(fr[i]) + dt_bias[int64_t{h} * nk + i]));
    for (int j = threadIdx.x; j < pv; j += blockDim.x) vs[j] = __bfloat162float(xr[2 * kd + int64_t{h} * pv + j]);
    load_unit_qk(xr + int64_t{h} * nk, xr + kd + int64_t{h} * nk, nk, qs, ks, scratch);
    __syncthreads();
    const float beta = 1.0f / (1.0f + expf(-__bfloat162float(beta_in[row * heads + h])));
    for (int j = warp; j < pv; j += n_warps) {
      float* s = s_all + int64_t{j} * nk;
      float sk = 0.0f;
      for (int n = lane; n < nk; n += 32) {
        s[n] *= ds[n];
        sk += s[n] * ks[n];
      }
      const float delta = beta * (vs[j] - warp_sum(sk));
      float o = 0.0f;
      for (int n = lane; n < nk; n += 32) {
        const float v = s[n] + delta * ks[n];
        s[n] = v;
        o += v * qs[n];
      }
      o = warp_sum(o);
      if (lane == 0) out[row * vd + int64_t{h} * pv + j] = __float2bfloat16_rn(o);
    }
    __syncthreads();  // the state complete, for a snapshot
    if (row == r.save_row) store_state(state + (int64_t{r.save_slot} * heads + h) * size, s_all, size);
  }
  __syncthreads();
  store_state(st, s_all, size);
}

// Lightning attention: block (head h, sequence); shared memory S [D, D] (value channel, key
// channel), q, k and v [D] after their SiLU. Each row, per value channel j (a warp): S_j = decay
// S_j + v_j k, o_j = S_j . q, written to out (the norm and gate are the model's).
__global__ void lightning_kernel(const bf16* qkv, int heads, int d, const float* decay, SsmSeqArgs seqs, float* state,
                                 bf16* out) {
  extern __shared__ float smem[];
  const int64_t size = int64_t{d} * d, vd = int64_t{heads} * d;
  float* s_all = smem;
  float* qs = s_all + size;
  float* ks = qs + d;
  float* vs = ks + d;
  const int h = blockIdx.x;
  const SeqRows r = seq_rows(seqs, blockIdx.y);
  if (!r.ok) return;
  float* st = state + (int64_t{r.slot} * heads + h) * size;
  load_state(s_all, st, size, r.fresh);
  const float g = decay[h];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const bf16* xr = qkv + row * 3 * vd + int64_t{h} * 3 * d;
    __syncthreads();  // the previous row's q, k and v read
    for (int i = threadIdx.x; i < 3 * d; i += blockDim.x) qs[i] = silu(__bfloat162float(xr[i]));  // q | k | v
    __syncthreads();
    for (int j = warp; j < d; j += n_warps) {
      float* s = s_all + int64_t{j} * d;
      const float vj = vs[j];
      float o = 0.0f;
      for (int n = lane; n < d; n += 32) {
        const float v = g * s[n] + vj * ks[n];
        s[n] = v;
        o += v * qs[n];
      }
      o = warp_sum(o);
      if (lane == 0) out[row * vd + int64_t{h} * d + j] = __float2bfloat16_rn(o);
    }
    __syncthreads();  // the state complete, for a snapshot
    if (row == r.save_row) store_state(state + (int64_t{r.save_slot} * heads + h) * size, s_all, size);
  }
  __syncthreads();
  store_state(st, s_all, size);
}

__global__ void sigmoid_mul_kernel(bf16* x, const bf16* gate, int64_t count) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < count)
    x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) / (1.0f + expf(-__bfloat162float(gate[i]))));
}

__global__ void relu_squared_kernel(bf16* x, int64_t count) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < count) {
    const float v = fmaxf(__bfloat162float(x[i]), 0.0f);
    x[i] = __float2bfloat16_rn(v * v);
  }
}

// out [n, I] = relu(gate)^2 * up from gate_up [n, 2I] (BitNet's gated relu2), in f32, rounded once.
__global__ void relu2_mul_kernel(const bf16* gate_up, bf16* out, int64_t n, int64_t inter) {
  const int64_t total = n * inter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inter, j = i - r * inter;
    const float g = fmaxf(__bfloat162float(gate_up[r * 2 * inter + j]), 0.0f);
    out[i] = __float2bfloat16_rn(g * g * __bfloat162float(gate_up[r * 2 * inter + inter + j]));
  }
}

// One block per row of x [n, d]: the row's absmax, then each element quantized to int8 (rintf:
// half to even, as torch.round) and back with IEEE divisions, as the CPU backend computes it.
__global__ void quantize_rows_int8_kernel(bf16* x, int64_t d) {
  __shared__ float scratch[32];
  bf16* row = x + blockIdx.x * d;
  float m = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) m = fmaxf(m, fabsf(__bfloat162float(row[j])));
  m = block_max(m, scratch);
  const float s = __fdiv_rn(127.0f, fmaxf(m, 1e-5f));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float q = fminf(fmaxf(rintf(__fmul_rn(__bfloat162float(row[j]), s)), -128.0f), 127.0f);
    row[j] = __float2bfloat16_rn(__fdiv_rn(q, s));
  }
}

// Allows a kernel up to kSsmMaxSmemBytes of dynamic shared memory (once per kernel and process;
// not a stream operation, so it may run while a graph is captured).
template <class Kernel>
void allow_smem(Kernel* kernel) {
  BRIGADE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSsmMaxSmemBytes)));
}

}  // namespace

size_t ssm_scan_smem_bytes(int head_dim, int state_size) {
  return (size_t{static_cast<size_t>(head_dim)} * state_size + 2 * size_t(state_size) + size_t(head_dim)) * sizeof(float);
}
size_t ssm_scan_diag_smem_bytes(int state_size) {
  return (2 * size_t{kDiagChannels} * state_size + 2 * size_t(state_size) + 2 * size_t{kDiagChannels}) * sizeof(float);
}
size_t kda_smem_bytes(int head_dim, int state_size) {
  return (size_t{static_cast<size_t>(head_dim)} * state_size + 3 * size_t(state_size) + size_t(head_dim)) * sizeof(float);
}
size_t lightning_smem_bytes(int head_dim) {
  return (size_t{static_cast<size_t>(head_dim)} * head_dim + 3 * size_t(head_dim)) * sizeof(float);
}
size_t gated_delta_smem_bytes(int head_dim, int state_size) {
  return (size_t{static_cast<size_t>(head_dim)} * state_size + 2 * size_t(state_size) + 2 * size_t(head_dim)) * sizeof(float);
}

void launch_ssm_conv(const void* in, int64_t width, int64_t col, int64_t ch, int kernel, const float* weight,
                     const float* bias, bool short_conv, const SsmSeqArgs& seqs, float* state, void* out,
                     cudaStream_t stream) {
  if (seqs.n_seqs == 0 || ch == 0) return;
  const dim3 grid(ceil_div(ch, kConvThreads), static_cast<unsigned>(seqs.n_seqs));
  const auto* x = static_cast<const bf16*>(in);
  auto* y = static_cast<bf16*>(out);
  if (short_conv) conv_kernel<true><<<grid, kConvThreads, 0, stream>>>(x, width, col, ch, kernel, weight, bias, seqs, state, y);
  else conv_kernel<false><<<grid, kConvThreads, 0, stream>>>(x, width, col, ch, kernel, weight, bias, seqs, state, y);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_ssm_scan(const SsmScanArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream) {
  static const bool allowed = (allow_smem(ssm_scan_kernel), true);
  (void)allowed;
  if (seqs.n_seqs == 0) return;
  const size_t smem = ssm_scan_smem_bytes(p.head_dim, p.state_size);
  ssm_scan_kernel<<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(seqs.n_seqs)), kScanThreads, smem,
                    stream>>>(static_cast<const bf16*>(p.proj), p.proj_width, static_cast<const bf16*>(p.xbc), p.conv_dim,
                              p.heads, p.head_dim, p.groups, p.state_size, p.a, p.d, p.dt_bias, p.dt_min, p.dt_max, seqs,
                              p.state, static_cast<bf16*>(p.out));
  BRIGADE_CUDA_CHECK(cudaGetLastError());
  if (p.norm_weight == nullptr || seqs.n_rows == 0) return;
  const int64_t d_inner = int64_t{p.heads} * p.head_dim;
  group_norm_kernel<<<dim3(static_cast<unsigned>(seqs.n_rows), static_cast<unsigned>(p.groups)), kScanThreads, 0,
                      stream>>>(static_cast<bf16*>(p.out), d_inner, d_inner / p.groups, p.norm_weight, p.norm_eps);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_ssm_scan_diag(const SsmScanDiagArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream) {
  static const bool allowed = (allow_smem(ssm_scan_diag_kernel), true);
  (void)allowed;
  if (seqs.n_seqs == 0 || p.dim == 0) return;
  const size_t smem = ssm_scan_diag_smem_bytes(p.state_size);
  ssm_scan_diag_kernel<<<dim3(ceil_div(p.dim, kDiagChannels), static_cast<unsigned>(seqs.n_seqs)), kScanThreads, smem,
                         stream>>>(static_cast<const bf16*>(p.x), static_cast<const bf16*>(p.dt),
                                   static_cast<const bf16*>(p.b), static_cast<const bf16*>(p.c),
                                   static_cast<const bf16*>(p.z), p.z_width, p.z_col, p.a, p.skip, p.dim, p.state_size,
                                   seqs, p.state, static_cast<bf16*>(p.out));
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_gated_delta(const GatedDeltaArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream) {
  static const bool allowed = (allow_smem(gated_delta_kernel), true);
  (void)allowed;
  if (seqs.n_seqs == 0) return;
  const size_t smem = gated_delta_smem_bytes(p.head_dim, p.state_size);
  gated_delta_kernel<<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(seqs.n_seqs)), kScanThreads, smem,
                       stream>>>(static_cast<const bf16*>(p.qkv), p.conv_dim, static_cast<const bf16*>(p.proj),
                                 p.proj_width, p.z_col, p.heads, p.head_dim, p.groups, p.state_size, p.tiled_heads, p.a,
                                 p.dt_bias, p.norm_weight, p.norm_eps, seqs, p.state, static_cast<bf16*>(p.out));
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_kda(const KdaArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream) {
  static const bool allowed = (allow_smem(kda_kernel), true);
  (void)allowed;
  if (seqs.n_seqs == 0) return;
  const size_t smem = kda_smem_bytes(p.head_dim, p.state_size);
  kda_kernel<<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(seqs.n_seqs)), kScanThreads, smem, stream>>>(
      static_cast<const bf16*>(p.qkv), static_cast<const bf16*>(p.f), static_cast<const bf16*>(p.beta), p.heads,
      p.head_dim, p.state_size, p.a, p.dt_bias, seqs, p.state, static_cast<bf16*>(p.out));
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_lightning_attention(const LightningArgs& p, const SsmSeqArgs& seqs, cudaStream_t stream) {
  static const bool allowed = (allow_smem(lightning_kernel), true);
  (void)allowed;
  if (seqs.n_seqs == 0) return;
  const size_t smem = lightning_smem_bytes(p.head_dim);
  lightning_kernel<<<dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(seqs.n_seqs)), kScanThreads, smem,
                     stream>>>(static_cast<const bf16*>(p.qkv), p.heads, p.head_dim, p.a, seqs, p.state,
                               static_cast<bf16*>(p.out));
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_sigmoid_mul(void* x, const void* gate, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  sigmoid_mul_kernel<<<ceil_div(count, 256), 256, 0, stream>>>(static_cast<bf16*>(x), static_cast<const bf16*>(gate), count);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_relu_squared(void* x, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  relu_squared_kernel<<<ceil_div(count, 256), 256, 0, stream>>>(static_cast<bf16*>(x), count);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_relu2_mul(const void* gate_up, void* out, int64_t n, int64_t inter, cudaStream_t stream) {
  if (n * inter == 0) return;
  const int64_t blocks = std::min<int64_t>(ceil_div(n * inter, 256), 4096);
  relu2_mul_kernel<<<blocks, 256, 0, stream>>>(static_cast<const bf16*>(gate_up), static_cast<bf16*>(out), n, inter);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

void launch_quantize_rows_int8(void* x, int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  quantize_rows_int8_kernel<<<n, 256, 0, stream>>>(static_cast<bf16*>(x), d);
  BRIGADE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace brigade::gpu
