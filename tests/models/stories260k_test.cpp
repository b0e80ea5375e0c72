// The real stories260K llama2.c checkpoint against llama2.c run.c's greedy output
// (shared/testdata/README.md): the model must reproduce the reference ids exactly.
#include <gtest/gtest.h>

#include <filesystem>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using testing::argmax;
using testing::make_step;
using testing::run_step;
using testing::SeqChunk;

const std::string kPath = std::string(BRIGADE_TESTDATA) + "/models/stories260K.bin";
constexpr int kPageSize = 16;

// run.c, temperature 0, prompt = BOS (1), 64 steps.
const std::vector<int32_t> kReference = {
    461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299, 362, 409, 283, 264,
    283, 452, 288, 13,  431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431,
    431, 293, 430, 417, 363, 416, 315, 342, 418, 424, 400, 442, 402, 303, 266, 299,
    374, 466, 396, 303, 271, 362, 390, 469, 306, 469, 423, 314, 347, 305, 356, 333};

class Stories260K : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kPath)) GTEST_SKIP() << "test data absent: " << kPath;
    backend_ = make_cpu_backend({.n_threads = 2});
    LoadOptions opts;
    opts.max_batch_tokens = 128;
    opts.progress = false;
    auto m = Model::load(kPath, *backend_, opts);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    model_ = std::move(*m);
    auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value()) << kv.status().to_string();
    kv_ = std::make_unique<KvCache>(std::move(*kv));
  }

  static constexpr int kPages = 8;  // 128 positions: enough for 1 + 64
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
};

TEST_F(Stories260K, ConfigFromHeader) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position, 512);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved);
  // embed + 5 layers (2 norms, q, k, v, o, w1, w2, w3) + final norm; freq_cis is not a parameter.
  const int64_t per_layer = 2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 172 * 64;
  EXPECT_EQ(model_->n_params(), 512 * 64 + 5 * per_layer + 64);
  EXPECT_EQ(model_->weight_bytes(), model_->n_params() * 4);
}

TEST_F(Stories260K, GreedyDecodeMatchesLlama2c) {
  std::vector<int32_t> got;
  int32_t token = 1;  // BOS
  for (int step = 0; step < 64; ++step) {
    const StepBatch b = make_step({SeqChunk{0, {token}, step, false}}, kPageSize, kPages);
    const std::vector<float> logits = run_step(*model_, *backend_, *kv_, b);
    token = argmax(logits.data(), 512);
    got.push_back(token);
  }
  EXPECT_EQ(got, kReference);
}

// The whole prompt in chunks of `chunk` tokens; the argmax at every row predicts the next id.
void check_prefill(Model& model, Backend& backend, const KvCache& kv, int chunk) {
  std::vector<int32_t> prompt = {1};
  prompt.insert(prompt.end(), kReference.begin(), kReference.begin() + 32);
  std::vector<int32_t> predicted;
  for (int start = 0; start < static_cast<int>(prompt.size()); start += chunk) {
    const int n = std::min<int>(chunk, static_cast<int>(prompt.size()) - start);
    std::vector<int32_t> part(prompt.begin() + start, prompt.begin() + start + n);
    const StepBatch b = make_step({SeqChunk{0, part, start, true}}, kPageSize, 8);
    const std::vector<float> logits = run_step(model, backend, kv, b);
    for (int r = 0; r < n; ++r) predicted.push_back(argmax(logits.data() + static_cast<size_t>(r) * 512, 512));
  }
  // Row i predicts reference id i (row 0 is BOS -> reference[0]).
  ASSERT_EQ(predicted.size(), 33u);
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(predicted[i], kReference[i]) << "row " << i << ", chunk " << chunk;
}

TEST_F(Stories260K, PrefillOneChunkMatchesLlama2c) { check_prefill(*model_, *backend_, *kv_, 64); }
TEST_F(Stories260K, PrefillChunksOf7MatchLlama2c) { check_prefill(*model_, *backend_, *kv_, 7); }

}  // namespace
}  // namespace brigade
