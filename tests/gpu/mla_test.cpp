// The MLA ops and DeepSeek's routing on the GPU against the CPU backend on the same random
// inputs (bf16 activations and weights on both sides): head_matmul, write_mla_kv +
// mla_attention over shuffled pages (decode rows, a chunk over a cached prefix; f32 and bf16
// caches; eager and replayed as a step graph), and moe_route with sigmoid, bias and groups (ranked
// by the scores or, Kolibri-1's, by the logits).
// Skipped without a CUDA device.
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

TEST(GpuMla, HeadMatmulMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(31);
  const int heads = 16;
  for (const auto& [n, a, b] : {std::tuple{int64_t{1}, int64_t{128}, int64_t{512}}, std::tuple{int64_t{37}, int64_t{512}, int64_t{128}}}) {
    const auto x = random_values(rng, n * heads * a), w = random_values(rng, heads * b * a, -0.1f, 0.1f);
    std::vector<float> out[2];
    Backend* sides[2] = {&cpu(), gpu()};
    for (int s = 0; s < 2; ++s) {
      Backend& be = *sides[s];
      const auto xt = put(be, be.activation_dtype(), {n, heads * a}, x);
      const auto wt = weight(be, heads * b, a, w);
      const auto ot = empty(be, be.activation_dtype(), {n, heads * b});
      be.head_matmul(xt.tensor, wt.tensor, heads, ot.tensor);
      out[s] = get(be, ot.tensor);
    }
    EXPECT_LT(rel_error(out[1], out[0]), 1e-2) << "n " << n;
  }
}

// Latent rows for every context position written through write_mla_kv, then mla_attention of
// the step's rows; returns out [n, H R] as f32. graph_key > 0 runs the pair three times as a step
// graph (the replays must give the eager result).
std::vector<float> run_mla(Backend& be, DType kv_t, const std::vector<std::pair<int, int>>& seqs, uint64_t graph_key,
                           uint64_t seed) {
  const int heads = 8, r = 128, dr = 32, page = 16;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const PagedSeqs ps = paged_seqs(seqs, page, rng);
  const int n = ps.n_rows, ctx_total = ps.n_ctx;
  const DType act = be.activation_dtype();
  const auto cache = empty(be, kv_t, {ps.n_pages, page, 1, r + dr});
  const KvLayer layer{cache.tensor, Tensor(), Tensor(), Tensor()};
  const auto latent = put(be, act, {ctx_total, r}, random_values(rng, int64_t{ctx_total} * r));
  const auto k_pe = put(be, act, {ctx_total, dr}, random_values(rng, int64_t{ctx_total} * dr));
  const auto slot_t = put(be, DType::i32, {ctx_total}, ps.slots);
  const auto q_lat = put(be, act, {n, heads * r}, random_values(rng, int64_t{n} * heads * r));
  const auto q_pe = put(be, act, {n, heads * dr}, random_values(rng, int64_t{n} * heads * dr));
  const auto out = empty(be, act, {n, heads * r});
  const PagedMeta pm = put_meta(be, ps);
  const AttentionMeta& meta = pm.meta;
  for (int i = 0; i < (graph_key > 0 ? 3 : 1); ++i) {
    if (graph_key > 0) be.begin_step(graph_key);
    be.write_mla_kv(layer, latent.tensor, k_pe.tensor, slot_t.tensor);
    be.mla_attention(q_lat.tensor, q_pe.tensor, MlaLayout{heads, r, dr}, layer, meta, 0.1f, out.tensor);
    if (graph_key > 0) be.end_step();
  }
  return get(be, out.tensor);
}

TEST(GpuMla, AttentionMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  const std::vector<std::pair<int, int>> decode = {{1, 1}, {1, 70}, {1, 300}};
  const std::vector<std::pair<int, int>> chunk = {{24, 90}, {1, 33}, {50, 50}};
  for (const DType kv_t : {DType::bf16, DType::f32}) {
    for (const auto& seqs : {decode, chunk}) {
      const auto want = run_mla(cpu(), kv_t, seqs, 0, 7);
      EXPECT_LT(rel_error(run_mla(*gpu(), kv_t, seqs, 0, 7), want), 2e-2) << dtype_name(kv_t);
      EXPECT_LT(rel_error(run_mla(*gpu(), kv_t, seqs, 4242, 7), want), 2e-2) << dtype_name(kv_t) << " graph replay";
    }
  }
}

TEST(GpuMla, DeepseekRoutingMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(41);
  const int64_t n = 29, e = 64;
  std::vector<float> logits = random_values(rng, n * e, -4, 4), bias = random_values(rng, e, -0.3f, 0.3f);
  struct Case { MoeScoring scoring; MoeGroupScore group; int n_group, topk_group, k; bool normalize, with_bias; float scale; bool on_logits = false; };
  for (const Case c : {Case{MoeScoring::sigmoid, MoeGroupScore::top2_sum, 8, 4, 8, true, true, 2.5f},
                       Case{MoeScoring::softmax, MoeGroupScore::max, 4, 1, 6, false, false, 1.0f},
                       Case{MoeScoring::sigmoid, MoeGroupScore::none, 1, 1, 4, false, true, 1.5f},
                       Case{MoeScoring::sigmoid, MoeGroupScore::none, 1, 1, 6, false, true, 1.0f, true},  // Kolibri-1
                       Case{MoeScoring::sigmoid, MoeGroupScore::top2_sum, 8, 4, 8, true, true, 1.0f, true}}) {
    std::vector<float> ids[2], w[2];
    Backend* sides[2] = {&cpu(), gpu()};
    for (int s = 0; s < 2; ++s) {
      Backend& be = *sides[s];
      const auto l = put(be, DType::f32, {n, e}, logits);
      const auto bt = put(be, DType::f32, {e}, bias);
      const auto it = empty(be, DType::i32, {n, c.k}), wt = empty(be, DType::f32, {n, c.k});
      MoeRouting r;
      r.k = c.k;
      r.scoring = c.scoring;
      r.normalize = c.normalize;
      r.n_group = c.n_group;
      r.topk_group = c.topk_group;
      r.group_score = c.group;
      r.scale = c.scale;
      r.select_on_logits = c.on_logits;
      if (c.with_bias) r.bias = bt.tensor;
      be.moe_route(l.tensor, r, it.tensor, wt.tensor);
      ids[s] = get(be, it.tensor);
      w[s] = get(be, wt.tensor);
    }
    EXPECT_EQ(ids[1], ids[0]);
    for (size_t i = 0; i < w[0].size(); ++i) EXPECT_NEAR(w[1][i], w[0][i], 1e-5) << i;
  }
}

}  // namespace
}  // namespace brigade
