// DeepSeek Sparse Attention ops on the GPU against the CPU backend (core/backend.h): index keys
// written by write_kv_columns into shuffled pages beside latent rows, dsa_topk's choice (small
// integer q, keys and weights, so every score is exact on both sides and the many ties must go to
// the lower position alike; decode rows and a chunk over a cached prefix; eager, chunked by a
// small workspace, and replayed as a step graph), and mla_sparse_attention over that choice.
// Skipped without a CUDA device.
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

std::vector<float> small_ints(std::mt19937& rng, int64_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

struct DsaRun {
  std::vector<float> indices;  // [n, topk] as floats
  std::vector<float> out;      // [n, H R]
};

// seqs: (query rows, context) per sequence. ws_rows: workspace rows of max_ctx_len scores.
DsaRun run_dsa(Backend& be, DType kv_t, const std::vector<std::pair<int, int>>& seqs, int ws_rows, uint64_t graph_key) {
  const int heads = 4, r = 64, dr = 16, page = 16, idx_heads = 8, idx_dim = 32, topk = 20, col = 32;
  std::mt19937 rng(11);
  const PagedSeqs ps = paged_seqs(seqs, page, rng);
  const int n = ps.n_rows, ctx_total = ps.n_ctx, n_pages = ps.n_pages, max_ctx = ps.max_ctx;
  const DType act = be.activation_dtype();
  const auto latent_cache = empty(be, kv_t, {n_pages, page, 1, r + dr});
  const auto key_cache = empty(be, kv_t, {n_pages, page, 1, r + dr});  // keys at columns [col, col + idx_dim)
  const KvLayer latent_layer{latent_cache.tensor, Tensor(), Tensor(), Tensor()};
  const KvLayer key_layer{key_cache.tensor, Tensor(), Tensor(), Tensor()};
  const auto latent = put(be, act, {ctx_total, r}, random_values(rng, int64_t{ctx_total} * r));
  const auto k_pe = put(be, act, {ctx_total, dr}, random_values(rng, int64_t{ctx_total} * dr));
  const auto keys = put(be, act, {ctx_total, idx_dim}, small_ints(rng, int64_t{ctx_total} * idx_dim, -2, 2));
  const auto slot_t = put(be, DType::i32, {ctx_total}, ps.slots);
  const auto q = put(be, act, {n, idx_heads * idx_dim}, small_ints(rng, int64_t{n} * idx_heads * idx_dim, -2, 2));
  const auto w = put(be, act, {n, idx_heads}, small_ints(rng, int64_t{n} * idx_heads, -3, 3));
  const auto q_lat = put(be, act, {n, heads * r}, random_values(rng, int64_t{n} * heads * r));
  const auto q_pe = put(be, act, {n, heads * dr}, random_values(rng, int64_t{n} * heads * dr));
  const PagedMeta pm = put_meta(be, ps);
  const AttentionMeta& meta = pm.meta;
  const auto ws = empty(be, DType::f32, {ws_rows, max_ctx});
  const auto idx = empty(be, DType::i32, {n, topk});
  const auto out = empty(be, act, {n, heads * r});
  for (int i = 0; i < (graph_key > 0 ? 3 : 1); ++i) {
    if (graph_key > 0) be.begin_step(graph_key);
    be.write_mla_kv(latent_layer, latent.tensor, k_pe.tensor, slot_t.tensor);
    be.write_kv_columns(key_layer, keys.tensor, col, slot_t.tensor);
    be.dsa_topk(q.tensor, w.tensor, key_layer, DsaLayout{idx_heads, idx_dim, col, topk, 1.0f}, meta, ws.tensor, idx.tensor);
    be.mla_sparse_attention(q_lat.tensor, q_pe.tensor, MlaLayout{heads, r, dr}, latent_layer, meta, idx.tensor, 0.1f,
                            out.tensor);
    if (graph_key > 0) be.end_step();
  }
  return {get(be, idx.tensor), get(be, out.tensor)};
}

// Contexts shorter than topk (every position listed), of exactly topk and one more, and long
// ones; decode rows and chunks over a cached prefix. Workspaces of 128 rows (one chunk), 3 rows
// (the rows scored a few at a time) and a graph replay.
TEST(GpuDsa, TopkAndSparseAttentionMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  const std::vector<std::vector<std::pair<int, int>>> steps = {{{1, 1}, {1, 20}, {1, 21}, {1, 300}},
                                                               {{24, 90}, {3, 7}, {50, 50}}};
  const std::vector<std::pair<int, uint64_t>> gpu_runs = {{128, 0}, {3, 0}, {128, 777}};
  for (const DType kv_t : {DType::bf16, DType::f32})
    for (const auto& seqs : steps) {
      const DsaRun want = run_dsa(cpu(), kv_t, seqs, 1, 0);
      for (const auto& [ws_rows, graph_key] : gpu_runs) {
        const DsaRun got = run_dsa(*gpu(), kv_t, seqs, ws_rows, graph_key);
        EXPECT_EQ(got.indices, want.indices) << dtype_name(kv_t) << ", workspace rows " << ws_rows << ", graph " << graph_key;
        EXPECT_LT(rel_error(got.out, want.out), 2e-2) << dtype_name(kv_t) << ", workspace rows " << ws_rows;
      }
    }
}

}  // namespace
}  // namespace brigade
