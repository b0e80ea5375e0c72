// FP8 checkpoints on the GPU (scripts/make_fp8_fixtures.py's fixtures): loaded with weights auto
// they are dequantized into bf16 and follow transformers' fp32 logits within bf16's error (cosine
// per row, and the argmax wherever transformers' margin is decisive); with weights: fp8 the
// dequantized matrices are quantized again per tensor for the fp8 GEMMs and still follow them.
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/hf_fixture.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

// Every prompt position's logits of every case against transformers'. bf16 weights and
// activations move logits by a few percent (model_test.cpp's bound); fp8 GEMMs by a few more
// (fp8_model_test.cpp), hence cosine 0.995 / 0.99.
void expect_follows_transformers(const std::string& fixture, std::optional<DType> weights, double min_cosine) {
  SCOPED_TRACE(fixture + (weights ? std::string(" weights ") + dtype_name(*weights) : " weights auto"));
  LoadOptions o;
  o.max_batch_tokens = 64;
  o.progress = false;
  o.weight_dtype = weights;
  auto m = Model::load(testing::fixture_dir(fixture), *gpu(), o);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  const int vocab = (*m)->config().vocab_size;
  for (const testing::FixtureCase& fc : testing::read_fixture_cases(fixture)) {
    auto kv = KvCache::allocate(*gpu(), (*m)->kv_layout(4, 16, DType::bf16));
    ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
    const std::vector<float> got =
        testing::run_step(**m, *gpu(), *kv, testing::make_step({{0, fc.prompt, 0, true}}, 16, 4));
    for (size_t r = 0; r < fc.logits.size(); ++r) {
      const float* g = got.data() + r * static_cast<size_t>(vocab);
      const float* w = fc.logits[r].data();
      EXPECT_GT(cosine(g, w, vocab), min_cosine) << "position " << r;
      const int best = testing::argmax(w, vocab);
      float second = -1e30f, max_diff = 0.0f;
      for (int i = 0; i < vocab; ++i) {
        if (i != best) second = std::max(second, w[i]);
        max_diff = std::max(max_diff, std::abs(g[i] - w[i]));
      }
      if (w[best] - second > 2 * max_diff) {
        EXPECT_EQ(testing::argmax(g, vocab), best) << "position " << r;
      }
    }
  }
}

class GpuFp8Checkpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuFp8Checkpoint, DequantizedToBf16FollowsTransformers) {
  BRIGADE_REQUIRE_GPU();
  expect_follows_transformers(GetParam(), std::nullopt, 0.995);
}

INSTANTIATE_TEST_SUITE_P(Formats, GpuFp8Checkpoint,
                         ::testing::Values("qwen3_fp8_block", "deepseek_v3_fp8_block", "llama_ct_channel",
                                           "llama_ct_tensor"));

// weights: fp8 over the formats that take it; deepseek refuses it (below) rather than skipping
// here, since gpu_check.sh counts a skip on a GPU machine as a failure.
class GpuFp8CheckpointRequantized : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuFp8CheckpointRequantized, ForFp8GemmsFollowsTransformers) {
  BRIGADE_REQUIRE_GPU();
  expect_follows_transformers(GetParam(), DType::f8e4m3, 0.99);
}

INSTANTIATE_TEST_SUITE_P(Formats, GpuFp8CheckpointRequantized,
                         ::testing::Values("qwen3_fp8_block", "llama_ct_channel", "llama_ct_tensor"));

// DeepSeek's experts read bf16: fp8 weights made at load are refused with the reason.
TEST(GpuFp8CheckpointDeepseek, RefusesFp8WeightsMadeAtLoad) {
  BRIGADE_REQUIRE_GPU();
  LoadOptions o;
  o.max_batch_tokens = 64;
  o.progress = false;
  o.weight_dtype = DType::f8e4m3;
  auto m = Model::load(testing::fixture_dir("deepseek_v3_fp8_block"), *gpu(), o);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().code(), StatusCode::unsupported) << m.status().to_string();
}

}  // namespace
}  // namespace brigade
