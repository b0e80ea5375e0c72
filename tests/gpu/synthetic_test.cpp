// synthetic: model specs (models/synthetic_source.h): parsing, loading on the CPU (runs without
// a GPU), and the same synthetic model on the GPU against the CPU.
#include <cmath>

#include "models/synthetic_source.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

TEST(Synthetic, ParsesShapesAndKeys) {
  auto c = synthetic_config("synthetic:llama3-8b");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->n_layers, 32);
  EXPECT_EQ(c->n_kv_heads, 8);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->vocab_size, 128256);
  auto small = synthetic_config("synthetic:llama3-8b,layers=2,vocab=5000,seed=3");
  ASSERT_TRUE(small.has_value()) << small.status().to_string();
  EXPECT_EQ(small->n_layers, 2);
  EXPECT_EQ(small->vocab_size, 5000);
  EXPECT_EQ(synthetic_config("synthetic:gpt5").status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(synthetic_config("synthetic:tiny,heads=3").status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(synthetic_config("synthetic:tiny,layers=x").status().code(), StatusCode::invalid_argument);
  EXPECT_TRUE(is_synthetic_spec("synthetic:tiny"));
  EXPECT_FALSE(is_synthetic_spec("/models/synthetic:tiny"));
}

std::unique_ptr<Model> load(Backend& b, const std::string& spec) {
  LoadOptions o;
  o.max_batch_tokens = 64;
  o.progress = false;
  auto m = Model::load(spec, b, o);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

std::vector<float> prefill(Model& m, Backend& b) {
  auto kv = KvCache::allocate(b, m.kv_layout(8, 16, DType::bf16));
  EXPECT_TRUE(kv.has_value());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 5) % m.config().vocab_size);
  return testing::run_step(m, b, *kv, testing::make_step({{0, tokens, 0, false}}, 16, 8));
}

TEST(Synthetic, LoadsAndRunsOnCpu) {
  auto m = load(cpu(), "synthetic:tiny,layers=2");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  const int64_t per_layer = 2 * c.hidden_size + int64_t{c.hidden_size} * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim +
                            int64_t{c.hidden_size} * c.n_heads * c.head_dim + 3 * int64_t{c.hidden_size} * c.intermediate_size;
  EXPECT_EQ(m->n_params(), 2 * per_layer + 2 * int64_t{c.vocab_size} * c.hidden_size + c.hidden_size);
  const auto logits = prefill(*m, cpu());
  ASSERT_EQ(logits.size(), static_cast<size_t>(c.vocab_size));
  double sq = 0.0;
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    sq += double{x} * x;
  }
  EXPECT_GT(sq, 0.0);  // random weights give non-trivial logits
}

TEST(Synthetic, GpuMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  auto c = load(cpu(), "synthetic:tiny");
  auto g = load(*gpu(), "synthetic:tiny");
  ASSERT_NE(c, nullptr);
  ASSERT_NE(g, nullptr);
  EXPECT_LT(rel_error(prefill(*g, *gpu()), prefill(*c, cpu())), 4e-2);
}

}  // namespace
}  // namespace brigade
