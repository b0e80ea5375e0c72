// Whole model with fp8 weights (LoadOptions::weight_dtype = f8e4m3) against the same checkpoint
// with bf16 weights, both on the GPU: only the linear layers were quantized, and prefill and
// decode logits stay close to bf16's with the same greedy choice wherever bf16's is decisive.
#include "models/make_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

struct Side {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
};

Side load(const std::string& dir, std::optional<DType> weights) {
  LoadOptions o;
  o.max_batch_tokens = 128;
  o.progress = false;
  o.weight_dtype = weights;
  auto m = Model::load(dir, *gpu(), o);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  Side s;
  if (!m) return s;
  s.model = std::move(*m);
  auto kv = KvCache::allocate(*gpu(), s.model->kv_layout(32, 16, DType::bf16));
  EXPECT_TRUE(kv.has_value()) << kv.status().to_string();
  s.kv = std::make_unique<KvCache>(std::move(*kv));
  return s;
}

// Compares logits rows [rows, vocab] of the fp8 model with the bf16 model's and returns bf16's
// greedy tokens. Bounds: fp8 rounds each matmul operand by about 2.6% rms (fp8_test.cpp), so a
// matmul is off by about 3.6% and the logits by a few percent after the residual stream mixes the
// layers; cosine 0.99 allows 14% relative error, well clear of that and far from unrelated logits
// (cosine near 0). The argmax must agree where bf16's margin exceeds twice the largest logit
// difference (then no perturbation of that size can flip it), and on at least half of all rows:
// a random model's top two logits are often closer than fp8's noise, but unrelated logits would
// agree on 1 row in vocab.
struct RowStats {
  int rows = 0, agree = 0, decisive = 0;
};
std::vector<int32_t> compare(const std::vector<float>& fp8, const std::vector<float>& bf16, int vocab, RowStats& st) {
  EXPECT_EQ(fp8.size(), bf16.size());
  std::vector<int32_t> greedy;
  for (size_t r = 0; r * vocab < bf16.size(); ++r) {
    const float* b = bf16.data() + r * vocab;
    const float* f = fp8.data() + r * vocab;
    EXPECT_GT(cosine(f, b, vocab), 0.99) << "row " << r;
    const int best = testing::argmax(b, vocab);
    float second = -1e30f, max_diff = 0.0f;
    for (int i = 0; i < vocab; ++i) {
      if (i != best) second = std::max(second, b[i]);
      max_diff = std::max(max_diff, std::abs(b[i] - f[i]));
    }
    const bool same = testing::argmax(f, vocab) == best;
    if (b[best] - second > 2 * max_diff) {
      ++st.decisive;
      EXPECT_TRUE(same) << "row " << r << ": bf16's decisive argmax " << best << " lost under fp8";
    }
    st.agree += same;
    ++st.rows;
    greedy.push_back(best);
  }
  return greedy;
}

TEST(GpuFp8Model, LinearLayersQuantizedLogitsAndGreedyTokensFollowBf16) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_fp8_model");
  SyntheticModelSpec spec = small_gpu_model(21);
  spec.tie_embeddings = false;  // lm_head is a table of its own: it must stay bf16 too
  ASSERT_TRUE(write_synthetic_model(spec, dir.str()).is_ok());
  Side b = load(dir.str(), DType::bf16), f = load(dir.str(), DType::f8e4m3);
  ASSERT_TRUE(b.model && f.model);

  // One byte saved per linear-layer parameter, none on the embedding, lm_head or norms.
  const int64_t hidden = spec.hidden_size, head_dim = hidden / spec.n_heads;
  const int64_t q = spec.n_heads * head_dim, kv = spec.n_kv_heads * head_dim, inter = spec.intermediate_size;
  const int64_t linear = spec.n_layers * (hidden * (q + 2 * kv) + q * hidden + 3 * inter * hidden);
  EXPECT_EQ(b.model->weight_bytes() - f.model->weight_bytes(), linear);
  EXPECT_EQ(b.model->n_params(), f.model->n_params());

  const int vocab = spec.vocab_size, page_size = 16, pages_per_seq = 16;
  std::mt19937 rng(22);
  std::vector<int32_t> p0(48), p1(30);
  for (auto& t : p0) t = static_cast<int32_t>(rng() % vocab);
  for (auto& t : p1) t = static_cast<int32_t>(rng() % vocab);
  RowStats st;
  // Prefill: every row of sequence 0 (teacher forcing over the prompt) and the last of sequence 1.
  const StepBatch prefill = testing::make_step({{0, p0, 0, true}, {1, p1, 0, false}}, page_size, pages_per_seq);
  const auto lb = testing::run_step(*b.model, *gpu(), *b.kv, prefill);
  const auto lf = testing::run_step(*f.model, *gpu(), *f.kv, prefill);
  std::vector<int32_t> next = compare(lf, lb, vocab, st);
  int32_t t0 = next[next.size() - 2], t1 = next.back();
  // Decode (n = 2 rows per matmul), both models fed bf16's greedy tokens so contexts stay equal.
  int n0 = 48, n1 = 30;
  for (int step = 0; step < 12; ++step) {
    SCOPED_TRACE(step);
    const StepBatch d = testing::make_step({{0, {t0}, n0++, false}, {1, {t1}, n1++, false}}, page_size, pages_per_seq);
    const auto db = testing::run_step(*b.model, *gpu(), *b.kv, d);
    const auto df = testing::run_step(*f.model, *gpu(), *f.kv, d);
    next = compare(df, db, vocab, st);
    t0 = next[0];
    t1 = next[1];
  }
  EXPECT_EQ(st.rows, 48 + 1 + 12 * 2);
  EXPECT_GE(2 * st.agree, st.rows) << st.agree << " of " << st.rows << " greedy choices agree";
  std::printf("fp8 vs bf16: %d of %d greedy choices agree, %d decisive\n", st.agree, st.rows, st.decisive);
}

}  // namespace
}  // namespace brigade
