// Paged attention on the GPU against the CPU backend: decode batches (flash-decoding splits),
// prefill chunks over cached prefixes, GQA groups, sliding windows, score soft-capping, bf16 and
// f32 caches, heads up to 256 and up to 512 wide. Pages
// are shuffled so a wrong page or slot computation shows up as a large error.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu/kernels.h"  // attention_grid (namespace gpu: so gpu_test::gpu() is named in full here)
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

struct Seq {
  int n_q;
  int ctx;
};

struct Problem {
  const char* name;
  QkvLayout l;
  int page_size;
  DType kv;
  int window;
  std::vector<Seq> seqs;
  float softcap = 0.0f;  // AttentionMeta::softcap (Gemma 2)
  bool sinks = false;    // AttentionMeta::sinks (gpt-oss), one random logit per query head
  int chunk = 0;         // AttentionMeta::chunk (Llama 4)
  bool alibi = false;    // AttentionMeta::alibi_slopes (BLOOM, MPT): 2^(-8 (h + 1) / n_heads) per head
};

struct Side {
  OwnedTensor qkv, k, v, q_start, ctx_len, table, out, sinks, alibi;
  AttentionMeta meta;
};

Side build(Backend& b, const Problem& p, const std::vector<float>& qkv, const std::vector<float>& kv_k,
           const std::vector<float>& kv_v, const std::vector<int32_t>& table, int n_pages, int max_blocks,
           const std::vector<float>& sinks) {
  Side s;
  int n = 0, max_q = 0, max_ctx = 0;
  std::vector<int32_t> q_start = {0}, ctx;
  for (const Seq& q : p.seqs) {
    n += q.n_q;
    q_start.push_back(n);
    ctx.push_back(q.ctx);
    max_q = std::max(max_q, q.n_q);
    max_ctx = std::max(max_ctx, q.ctx);
  }
  const int64_t n_seqs = static_cast<int64_t>(p.seqs.size());
  s.qkv = put(b, b.activation_dtype(), {n, p.l.row_width()}, qkv);
  s.k = put(b, p.kv, {n_pages, p.page_size, p.l.n_kv_heads, p.l.head_dim}, kv_k);
  s.v = put(b, p.kv, {n_pages, p.page_size, p.l.n_kv_heads, p.l.head_dim}, kv_v);
  s.q_start = put_i32(b, {n_seqs + 1}, q_start);
  s.ctx_len = put_i32(b, {n_seqs}, ctx);
  s.table = put_i32(b, {n_seqs, max_blocks}, table);
  s.out = empty(b, b.activation_dtype(), {n, p.l.q_width()});
  s.meta.q_start = s.q_start.tensor;
  s.meta.ctx_len = s.ctx_len.tensor;
  s.meta.block_table = s.table.tensor;
  s.meta.n_seqs = static_cast<int>(n_seqs);
  s.meta.max_q_len = max_q;
  s.meta.max_ctx_len = max_ctx;
  s.meta.sliding_window = p.window;
  s.meta.softcap = p.softcap;
  s.meta.chunk = p.chunk;
  if (!sinks.empty()) {
    s.sinks = put(b, DType::f32, {p.l.n_heads}, sinks);
    s.meta.sinks = s.sinks.tensor;
  }
  if (p.alibi) {
    std::vector<float> slopes;
    for (int h = 0; h < p.l.n_heads; ++h) slopes.push_back(std::pow(2.0f, -8.0f * static_cast<float>(h + 1) / p.l.n_heads));
    s.alibi = put(b, DType::f32, {p.l.n_heads}, slopes);
    s.meta.alibi_slopes = s.alibi.tensor;
  }
  return s;
}

void check(const Problem& p, std::mt19937& rng) {
  SCOPED_TRACE(p.name);
  int n = 0, max_blocks = 0, n_pages = 2;
  for (const Seq& s : p.seqs) {
    n += s.n_q;
    const int blocks = (s.ctx + p.page_size - 1) / p.page_size;
    max_blocks = std::max(max_blocks, blocks);
    n_pages += blocks;
  }
  std::vector<int32_t> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table;
  size_t next = 0;
  for (const Seq& s : p.seqs) {
    const int blocks = (s.ctx + p.page_size - 1) / p.page_size;
    for (int b = 0; b < max_blocks; ++b) table.push_back(b < blocks ? perm[next++] : 0);
  }
  const int64_t cache = int64_t{n_pages} * p.page_size * p.l.kv_width();
  // Queries span [-2, 2) so scores reach several units and the softmax is not flat.
  const auto qkv = random_values(rng, int64_t{n} * p.l.row_width(), -2, 2);
  const auto k = random_values(rng, cache), v = random_values(rng, cache);
  const auto sinks = p.sinks ? random_values(rng, p.l.n_heads, -1, 4) : std::vector<float>{};
  Side c = build(cpu(), p, qkv, k, v, table, n_pages, max_blocks, sinks);
  Side g = build(*gpu_test::gpu(), p, qkv, k, v, table, n_pages, max_blocks, sinks);
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.l.head_dim));
  cpu().attention(c.qkv.tensor, p.l, {c.k.tensor, c.v.tensor}, c.meta, scale, c.out.tensor);
  gpu_test::gpu()->attention(g.qkv.tensor, p.l, {g.k.tensor, g.v.tensor}, g.meta, scale, g.out.tensor);
  EXPECT_LT(rel_error(get(*gpu_test::gpu(), g.out.tensor), get(cpu(), c.out.tensor)), kBf16Tol);
}

TEST(GpuAttention, MatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(7);
  const std::vector<Problem> problems = {
      {"decode batch, GQA 4, long contexts (splits)", {32, 8, 128}, 16, DType::bf16, 0, {{1, 1}, {1, 700}, {1, 33}, {1, 2049}}},
      {"decode batch 1, one long context", {32, 8, 128}, 16, DType::bf16, 0, {{1, 4000}}},
      {"decode, MHA, f32 cache", {4, 4, 64}, 8, DType::f32, 0, {{1, 100}, {1, 257}}},
      {"prefill from empty", {8, 2, 64}, 16, DType::bf16, 0, {{77, 77}}},
      {"prefill chunks over cached prefixes", {8, 2, 64}, 16, DType::bf16, 0, {{40, 300}, {1, 50}, {65, 65}, {3, 1000}}},
      {"sliding window, mixed", {16, 4, 128}, 16, DType::bf16, 64, {{50, 400}, {1, 300}, {1, 10}}},
      {"GQA 8, head_dim 256", {16, 2, 256}, 32, DType::bf16, 0, {{5, 90}, {1, 513}}},
      {"softcap, Gemma 2's shape: head_dim 256, window, splits", {8, 4, 256}, 16, DType::bf16, 100,
       {{30, 230}, {1, 2000}, {1, 7}}, 0.5f},
      {"softcap, no window", {8, 2, 64}, 16, DType::bf16, 0, {{40, 300}, {1, 900}}, 0.5f},
      {"sinks, gpt-oss's shape: GQA 8, head_dim 64, window 128, splits", {64, 8, 64}, 16, DType::bf16, 128,
       {{30, 230}, {1, 2000}, {1, 7}}, 0.0f, true},
      {"sinks, no window, one split", {8, 2, 64}, 16, DType::bf16, 0, {{40, 60}, {1, 20}}, 0.0f, true},
      // 4 kv heads x 16384 one-row blocks (GQA 32) = 65536 blocks, past a grid's y limit of 65535;
      // the window keeps the CPU reference cheap.
      {"long prefill, more row blocks than a grid's y holds", {128, 4, 8}, 16, DType::bf16, 32, {{16384, 16384}}},
      // Llama 4's chunks: rows straddling chunk starts, decode rows at and past one, splits.
      {"chunked, Llama 4's shape: GQA 5, head_dim 128", {40, 8, 128}, 16, DType::bf16, 0,
       {{90, 300}, {1, 257}, {1, 2000}, {1, 129}}, 0.0f, false, 128},
      {"chunked with a window", {8, 2, 64}, 16, DType::bf16, 50, {{70, 330}, {1, 97}}, 0.0f, false, 64},
      // ALiBi, BLOOM's shape (MHA, head_dim 128) and a GQA one, long contexts split over the KV.
      {"alibi, MHA, decode and prefill, splits", {16, 16, 128}, 16, DType::bf16, 0,
       {{60, 260}, {1, 2000}, {1, 5}}, 0.0f, false, 0, true},
      {"alibi, GQA 4, f32 cache", {8, 2, 64}, 8, DType::f32, 0, {{33, 33}, {1, 700}}, 0.0f, false, 0, true},
  };
  for (const Problem& p : problems) check(p, rng);
}

// Heads wider than 256 take the kernel's 512 bucket (16 queries per block, the tile loaded in two
// passes): Gemma 4's full layers (global_head_dim 512; the 31B's 32 heads over 4 kv heads: GQA 8,
// the E4B's GQA 4), over GQA 1, 2 and 8, decode with KV splits, prefill chunks over cached
// prefixes, windows, soft-capping, sinks and f32 caches. GQA 24 and 32 do not fit one block (16
// queries): their query heads go to 2 slices of 12 and 16 (AttentionGrid::head_slices). 320 and 264
// dims leave part of the second pass empty.
TEST(GpuAttention, HeadDim512MatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  ASSERT_EQ(gpu_test::gpu()->max_attention_head_dim(), 512);
  std::mt19937 rng(512);
  const std::vector<Problem> problems = {
      {"decode, GQA 8, long contexts (splits)", {32, 4, 512}, 16, DType::bf16, 0, {{1, 1}, {1, 700}, {1, 33}, {1, 2049}}},
      {"decode batch 1, one long context (many splits)", {16, 2, 512}, 16, DType::bf16, 0, {{1, 4000}}},
      {"decode, MHA (GQA 1), f32 cache", {4, 4, 512}, 8, DType::f32, 0, {{1, 100}, {1, 257}}},
      {"prefill from empty, GQA 1", {4, 4, 512}, 16, DType::bf16, 0, {{77, 77}}},
      {"prefill chunks over cached prefixes, GQA 2", {8, 4, 512}, 16, DType::bf16, 0,
       {{40, 300}, {1, 50}, {65, 65}, {3, 1000}}},
      {"prefill chunks, GQA 8, f32 cache", {16, 2, 512}, 16, DType::f32, 0, {{37, 200}, {1, 600}}},
      {"sliding window, GQA 2, mixed", {8, 4, 512}, 16, DType::bf16, 64, {{50, 400}, {1, 300}, {1, 10}}},
      {"softcap with a window and splits, GQA 8", {16, 2, 512}, 16, DType::bf16, 100, {{30, 230}, {1, 2000}, {1, 7}},
       0.5f},
      {"sinks, GQA 8, splits", {16, 2, 512}, 16, DType::bf16, 0, {{20, 90}, {1, 1500}}, 0.0f, true},
      {"GQA 32: two slices of 16 heads", {32, 1, 512}, 16, DType::bf16, 0, {{20, 120}, {1, 900}}},
      {"GQA 24: two slices of 12 heads, f32 cache, window", {24, 1, 512}, 16, DType::f32, 40, {{9, 150}, {1, 700}}},
      {"head_dim 320 (part of the second pass)", {8, 2, 320}, 16, DType::bf16, 0, {{33, 100}, {1, 600}}},
      {"head_dim 264, f32 cache", {4, 2, 264}, 8, DType::f32, 0, {{17, 60}, {1, 300}}},
  };
  for (const Problem& p : problems) check(p, rng);
}

// The launch geometry (host code: runs without a GPU too): every query head of every kv head in
// exactly one block slice, at most 32 queries a block up to head_dim 256 and 16 past it, every
// query row covered, and the shared memory of any launch within what attention_init allows and
// what sm_90 lets a block opt in to (227 KiB).
TEST(GpuAttention, GridFitsTheBlockAndSharedMemory) {
  constexpr size_t kSm90OptIn = 227 * 1024;
  EXPECT_LE(gpu::attention_max_smem_bytes(), kSm90OptIn);
  EXPECT_GT(gpu::attention_smem_bytes(512, 32), kSm90OptIn);  // why the 512 bucket takes 16 queries
  for (const int d : {8, 64, 128, 256, 264, 320, 512})
    for (int group = 1; group <= 32; ++group)
      for (const int max_q : {1, 2, 7, 100, 16384}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << d << ", group " << group << ", max_q_len " << max_q);
        const gpu::AttentionGrid g = gpu::attention_grid({2 * group, 2, d}, max_q);
        const int most = d <= 256 ? 32 : 16;
        EXPECT_EQ(g.heads_per_block * g.head_slices, group);
        EXPECT_LE(g.heads_per_block * g.rows_per_block, most);
        EXPECT_GE(g.rows_per_block * g.n_row_blocks, max_q);
        EXPECT_LT(g.rows_per_block * (g.n_row_blocks - 1), max_q);
        if (d <= 256 || group <= 16) {
          EXPECT_EQ(g.head_slices, 1);
        }
        if (max_q >= most) {
          EXPECT_GT(2 * g.heads_per_block * g.rows_per_block, most);  // no block left half empty
        }
        EXPECT_LE(gpu::attention_smem_bytes(d, g.heads_per_block * g.rows_per_block), gpu::attention_max_smem_bytes());
      }
}

}  // namespace
}  // namespace brigade
