// Paged attention for decode and prefill (kernels.h, AttentionArgs).
//
// Block = (kv head x slice of its query heads x block of query rows, KV split, sequence), 4
// warps. The block's queries are its rows x its query heads: the whole GQA group of its kv head
// where it fits (K/V tiles are loaded once for all of them), else an even slice of it (head_dim
// > 256 with more than 16 heads per kv head: AttentionGrid). Per tile of kTile KV positions, K
// and V are widened to f32 in shared memory; each warp takes one query at a time: lane p scores position p, the warp reduces the tile max and sum
// (online softmax: running max m, sum l, unnormalised acc), then lanes own output dims for the
// P·V product. Scores, m, l and acc stay f32. Rows are causal with an optional sliding window
// and chunk (AttentionArgs::chunk);
// scores are soft-capped where AttentionArgs::softcap > 0, and gain ALiBi's slope x (key position -
// query position) where AttentionArgs::alibi is set. A head's sink (AttentionArgs::sinks) joins the
// denominator where the output is normalised: l + exp(sink - m).
//
// Two kernel instances per KV dtype, by the widest head they take (kMaxDim, chosen at launch):
// 256 (32 queries per block) and 512 (16: Gemma 4's full layers; its shared memory at 32 would
// pass the 227 KiB a block may opt in to). Only the tile load depends on the bucket: its
// registers are a 256-wide tile's, so a 512-wide tile is loaded in two passes.
#include <cuda_bf16.h>

#include <algorithm>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kTile = 32;       // KV positions per tile: one per lane when scoring
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Queries (rows x query heads) per block of the bucket that takes head_dim: at most
// attention_smem_bytes(kMaxDim, this) of shared memory, 132 KiB (256) and 194 KiB (512).
__host__ __device__ constexpr int max_queries(int head_dim) { return head_dim <= 256 ? 32 : 16; }

// Shared memory of one block for at most q_max queries (rows per block x query heads).
struct Smem {
  float* q;    // [q_max, d] scaled queries
  float* acc;  // [q_max, d]
  float* k;    // [kTile, d + 1] (padded: lane p reads row p, conflict-free)
  float* v;    // [kTile, d]
  float* p;    // [q_max, kTile] probabilities of the current tile
  float* m;    // [q_max]
  float* l;    // [q_max]
};

__host__ __device__ inline size_t smem_floats(int d, int q_max) {
  return 2 * size_t(q_max) * d + size_t(kTile) * (d + 1) + size_t(kTile) * d + size_t(q_max) * kTile + 2 * size_t(q_max);
}

__device__ Smem carve(float* base, int d, int q_max) {
  Smem s;
  s.q = base;
  s.acc = s.q + q_max * d;
  s.k = s.acc + q_max * d;
  s.v = s.k + kTile * (d + 1);
  s.p = s.v + kTile * d;
  s.m = s.p + q_max * kTile;
  s.l = s.m + q_max;
  return s;
}

// First visible KV position of a query at `pos` (causal, sliding window, the start of its chunk).
__device__ __forceinline__ int visible_lo(int pos, int window, int chunk) {
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  return chunk > 0 ? max(lo, pos - pos % chunk) : lo;
}

// One pass of load_tile: the tile's 16-byte vectors first + threadIdx.x + it * kThreads, it < kIter.
template <class KvT, int kIter>
__device__ __forceinline__ void load_pass(const AttentionArgs& a, const Smem& s, const int32_t* table, int kv_head,
                                          int t0, int t1, int first, int vecs_per_row, int n_vecs) {
  constexpr int kVec = 16 / sizeof(KvT);
  const int d = a.h.head_dim;
  uint4 kbuf[kIter], vbuf[kIter];
#pragma unroll
  for (int it = 0; it < kIter; ++it) {
    const int i = first + threadIdx.x + it * kThreads;
    kbuf[it] = vbuf[it] = make_uint4(0, 0, 0, 0);
    if (i < n_vecs) {
      const int t = i / vecs_per_row, pos = t0 + t;
      if (pos < t1) {
        const int64_t page = table[pos / a.page_size];
        const int64_t row = (page * a.page_size + pos % a.page_size) * a.h.n_kv_heads + kv_head;
        const int64_t off = row * d + int64_t{i - t * vecs_per_row} * kVec;  // elements
        kbuf[it] = __ldg(reinterpret_cast<const uint4*>(static_cast<const KvT*>(a.k) + off));
        vbuf[it] = __ldg(reinterpret_cast<const uint4*>(static_cast<const KvT*>(a.v) + off));
      }
    }
  }
#pragma unroll
  for (int it = 0; it < kIter; ++it) {
    const int i = first + threadIdx.x + it * kThreads;
    if (i < n_vecs) {
      const int t = i / vecs_per_row, j0 = (i - t * vecs_per_row) * kVec;
      const KvT* kx = reinterpret_cast<const KvT*>(&kbuf[it]);
      const KvT* vx = reinterpret_cast<const KvT*>(&vbuf[it]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        s.k[t * (d + 1) + j0 + e] = to_float(kx[e]);
        s.v[t * d + j0 + e] = to_float(vx[e]);
      }
    }
  }
}

// K and V rows of positions [t0, t0 + kTile) (zeros at and past t1) into shared memory as f32.
// Each thread moves 16-byte vectors (8 bf16 or 4 f32; head_dim is a multiple of 8), all of a
// pass's loads issued before its first store, so a tile's HBM reads are in flight together. A
// pass holds a 256-wide tile's vectors in registers (8 + 8 uint4 for bf16, 16 + 16 for f32): one
// pass in the 256 bucket, two in the 512 one (the first and second half of the tile's positions)
// rather than twice the registers and spills. `unroll 1` keeps the second pass's loads from
// being hoisted above the first's stores.
template <class KvT, int kMaxDim>
__device__ __forceinline__ void load_tile(const AttentionArgs& a, const Smem& s, const int32_t* table, int kv_head,
                                          int t0, int t1) {
  constexpr int kVec = 16 / sizeof(KvT);
  constexpr int kPassIter = kTile * 256 / kVec / kThreads;
  constexpr int kPasses = kMaxDim / 256;
  const int d = a.h.head_dim, vecs_per_row = d / kVec, n_vecs = kTile * vecs_per_row;
#pragma unroll 1
  for (int pass = 0; pass < kPasses; ++pass) {
    load_pass<KvT, kPassIter>(a, s, table, kv_head, t0, t1, pass * kPassIter * kThreads, vecs_per_row, n_vecs);
  }
}

// g.heads_per_block query heads (a slice of a kv head's group) x g.rows_per_block rows per block;
// blockIdx.x = (kv head x slice) x row block.
template <class KvT, int kMaxDim>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a, AttentionGrid g) {
  extern __shared__ float smem[];
  const int d = a.h.head_dim;
  const int group = a.h.n_heads / a.h.n_kv_heads, heads = g.heads_per_block, rows_per_block = g.rows_per_block;
  const Smem s = carve(smem, d, rows_per_block * heads);
  const int seq = blockIdx.z, split = blockIdx.y;
  const int slice = blockIdx.x / g.n_row_blocks, row_block = blockIdx.x % g.n_row_blocks;
  const int kv_head = slice / (group / heads);
  const int head0 = kv_head * group + slice % (group / heads) * heads;  // the block's first query head
  const int q0 = a.q_start[seq], n_q = a.q_start[seq + 1] - q0;
  const int r0 = row_block * rows_per_block;
  if (r0 >= n_q) return;  // uniform over the block
  const int r1 = min(n_q, r0 + rows_per_block);
  const int first_pos = a.ctx_len[seq] - n_q;
  const int nq = (r1 - r0) * heads;
  // KV range seen by any row of the block, then this split's share (whole tiles).
  const int lo = visible_lo(first_pos + r0, a.sliding_window, a.chunk), hi = first_pos + r1 - 1;
  const int span = hi + 1 - lo;
  const int chunk = ((span + a.n_splits - 1) / a.n_splits + kTile - 1) / kTile * kTile;
  const int c0 = lo + split * chunk, c1 = min(hi + 1, c0 + chunk);
  const int32_t* table = a.block_table + int64_t{seq} * a.max_blocks;
  const auto* qkv = static_cast<const bf16*>(a.qkv);
  const int row_width = a.h.row_width();

  for (int i = threadIdx.x; i < nq * d; i += blockDim.x) {
    const int qi = i / d, j = i - qi * d;
    const int row = q0 + r0 + qi / heads, head = head0 + qi % heads;
    s.q[i] = __bfloat162float(qkv[int64_t{row} * row_width + head * d + j]) * a.scale;
    s.acc[i] = 0.0f;
  }
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    s.m[i] = -INFINITY;
    s.l[i] = 0.0f;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int t0 = c0; t0 < c1; t0 += kTile) {
    __syncthreads();  // the previous tile is no longer read; q/acc/m/l are initialised
    load_tile<KvT, kMaxDim>(a, s, table, kv_head, t0, c1);
    __syncthreads();
    const int cnt = min(kTile, c1 - t0);
    for (int qi = warp; qi < nq; qi += kWarps) {
      const int pos_q = first_pos + r0 + qi / heads;
      const int p = t0 + lane;
      const bool valid = lane < cnt && p >= visible_lo(pos_q, a.sliding_window, a.chunk) && p <= pos_q;
      float score = -INFINITY;
      if (valid) {
        const float* qr = s.q + qi * d;
        const float* kr = s.k + lane * (d + 1);
        float acc = 0.0f;
        for (int j = 0; j < d; ++j) acc = fmaf(qr[j], kr[j], acc);
        score = a.softcap > 0.0f ? tanhf(acc / a.softcap) * a.softcap : acc;
        // ALiBi: the head's slope times the key's distance back from the query (<= 0).
        if (a.alibi != nullptr) score = fmaf(a.alibi[head0 + qi % heads], static_cast<float>(p - pos_q), score);
      }
      const float m_old = s.m[qi];
      const float m_new = fmaxf(m_old, warp_max(score));
      if (m_new == -INFINITY) continue;  // nothing visible yet for this query (warp-uniform)
      const float e = valid ? __expf(score - m_new) : 0.0f;
      const float alpha = __expf(m_old - m_new);  // 0 when m_old is -inf
      const float sum = warp_sum(e);
      s.p[qi * kTile + lane] = e;
      __syncwarp();
      float* acc = s.acc + qi * d;
      const float* pr = s.p + qi * kTile;
      for (int j = lane; j < d; j += 32) {
        float x = acc[j] * alpha;
        for (int t = 0; t < cnt; ++t) x = fmaf(pr[t], s.v[t * d + j], x);
        acc[j] = x;
      }
      __syncwarp();  // every lane has read m_old before lane 0 replaces it
      if (lane == 0) {
        s.m[qi] = m_new;
        s.l[qi] = s.l[qi] * alpha + sum;
      }
      __syncwarp();
    }
  }
  __syncthreads();
  auto* out = static_cast<bf16*>(a.out);
  const int out_width = a.h.n_heads * d;
  for (int i = threadIdx.x; i < nq * d; i += blockDim.x) {
    const int qi = i / d, j = i - qi * d;
    const int row = q0 + r0 + qi / heads, head = head0 + qi % heads;
    if (a.n_splits == 1) {
      const float l = s.l[qi] + (a.sinks != nullptr ? __expf(a.sinks[head] - s.m[qi]) : 0.0f);
      out[int64_t{row} * out_width + head * d + j] = __float2bfloat16_rn(l > 0.0f ? s.acc[i] / l : 0.0f);
    } else {
      float* part = a.partial + ((int64_t{split} * a.n_rows + row) * a.h.n_heads + head) * (d + 2);
      part[j] = s.acc[i];
      if (j == 0) {
        part[d] = s.m[qi];
        part[d + 1] = s.l[qi];
      }
    }
  }
}

// One warp per (row, head): merges the splits' (acc, m, l) into the normalised output.
__global__ void combine_kernel(AttentionArgs a) {
  const int64_t item = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  if (item >= int64_t{a.n_rows} * a.h.n_heads) return;
  const int lane = threadIdx.x & 31, d = a.h.head_dim;
  const int64_t split_stride = int64_t{a.n_rows} * a.h.n_heads * (d + 2);
  const float* base = a.partial + item * (d + 2);
  float m = -INFINITY;
  for (int s = 0; s < a.n_splits; ++s) m = fmaxf(m, base[s * split_stride + d]);
  float l = 0.0f;
  for (int s = 0; s < a.n_splits; ++s) {
    const float ms = base[s * split_stride + d];
    if (ms != -INFINITY) l += base[s * split_stride + d + 1] * __expf(ms - m);
  }
  if (a.sinks != nullptr) l += __expf(a.sinks[item % a.h.n_heads] - m);
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  auto* out = static_cast<bf16*>(a.out) + item * d;  // [row, head] is item in [n_rows, n_heads]
  for (int j = lane; j < d; j += 32) {
    float x = 0.0f;
    for (int s = 0; s < a.n_splits; ++s) {
      const float ms = base[s * split_stride + d];
      if (ms != -INFINITY) x += base[s * split_stride + j] * __expf(ms - m);
    }
    out[j] = __float2bfloat16_rn(x * inv);
  }
}

}  // namespace

AttentionGrid attention_grid(const HeadShape& h, int max_q_len) {
  const int group = h.n_heads / h.n_kv_heads, most = max_queries(h.head_dim);
  AttentionGrid g;
  g.heads_per_block = group;  // the largest divisor of the group that fits
  while (g.heads_per_block > most || group % g.heads_per_block != 0) --g.heads_per_block;
  g.head_slices = group / g.heads_per_block;
  g.rows_per_block = std::max(1, std::min(most / g.heads_per_block, max_q_len));
  g.n_row_blocks = (max_q_len + g.rows_per_block - 1) / g.rows_per_block;
  return g;
}

int64_t attention_partial_floats(const AttentionArgs& a) {
  return int64_t{a.n_splits} * a.n_rows * a.h.n_heads * (a.h.head_dim + 2);
}

size_t attention_smem_bytes(int head_dim, int queries_per_block) {
  return sizeof(float) * smem_floats(head_dim, queries_per_block);
}

namespace {
// The most shared memory a launch of the bucket of heads up to max_dim asks for.
size_t bucket_smem_bytes(int max_dim) { return attention_smem_bytes(max_dim, max_queries(max_dim)); }

template <class KvT>
void allow_smem() {
  BRIGADE_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<KvT, 256>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bucket_smem_bytes(256))));
  BRIGADE_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<KvT, kAttentionMaxHeadDim>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bucket_smem_bytes(kAttentionMaxHeadDim))));
}

template <class KvT>
void launch_bucket(const AttentionArgs& a, const AttentionGrid& g, dim3 grid, size_t smem, cudaStream_t stream) {
  if (a.h.head_dim <= 256)
    attention_kernel<KvT, 256><<<grid, kThreads, smem, stream>>>(a, g);
  else
    attention_kernel<KvT, kAttentionMaxHeadDim><<<grid, kThreads, smem, stream>>>(a, g);
}
}  // namespace

size_t attention_max_smem_bytes() { return std::max(bucket_smem_bytes(256), bucket_smem_bytes(kAttentionMaxHeadDim)); }

void attention_init() {
  allow_smem<bf16>();
  allow_smem<float>();
}

void launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n_seqs == 0 || a.max_q_len == 0) return;
  const AttentionGrid g = attention_grid(a.h, a.max_q_len);
  // (kv heads x head slices) x row blocks on x (up to 2^31 - 1): a long prefill has more than the
  // 65535 that y allows (n_heads x max_q_len / 32 blocks); the splits (<= max_attention_splits) on y.
  const dim3 grid(static_cast<unsigned>(a.h.n_kv_heads * g.head_slices * g.n_row_blocks),
                  static_cast<unsigned>(a.n_splits), static_cast<unsigned>(a.n_seqs));
  const size_t smem = attention_smem_bytes(a.h.head_dim, g.rows_per_block * g.heads_per_block);
  if (a.kv_t == DType::f32)
    launch_bucket<float>(a, g, grid, smem, stream);
  else
    launch_bucket<bf16>(a, g, grid, smem, stream);
  BRIGADE_CUDA_CHECK_LAUNCH();
  if (a.n_splits > 1) {
    const int64_t items = int64_t{a.n_rows} * a.h.n_heads;
    combine_kernel<<<ceil_div(items, 8), 256, 0, stream>>>(a);
    BRIGADE_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace brigade::gpu
