// Pooling (models/pooling.h): the forward's hidden-state hook against transformers'
// last_hidden_state (tests/fixtures/qwen3/embeddings.json), sentence-transformers' pooling files
// as Qwen3-Embedding and gte-style models ship them, and the Matryoshka cut + L2 norm.
#include <gtest/gtest.h>

#include <cmath>

#include "models/pooling.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using testing::TempDir;

// Two prompts in one step, hidden rows for every position and logits for each last one: the rows
// pool (first, last, mean) to transformers' values and the logits stay transformers' too.
TEST(PoolingHook, HiddenRowsAreTransformersLastHiddenState) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(testing::fixture_dir("qwen3"), *backend);
  ASSERT_TRUE(model);
  auto text = read_text_file(testing::fixture_dir("qwen3") + "/embeddings.json");
  ASSERT_TRUE(text.has_value());
  const auto cases = nlohmann::json::parse(*text).at("cases");
  const auto logit_cases = testing::read_fixture_cases("qwen3");
  const std::vector<int32_t> a = cases[0].at("prompt").get<std::vector<int32_t>>();
  const std::vector<int32_t> b = cases[2].at("prompt").get<std::vector<int32_t>>();
  ASSERT_EQ(a, logit_cases[0].prompt);
  constexpr int kPageSize = 16, kPages = 4;
  auto kv = KvCache::allocate(*backend, model->kv_layout(2 * kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepBatch batch = testing::make_step({{0, a, 0, false}, {1, b, 0, false}}, kPageSize, kPages);
  for (int r = 0; r < batch.n_tokens(); ++r) batch.hidden_rows.push_back(r);
  const int64_t hidden = model->config().hidden_size, n = batch.n_tokens();
  auto hbuf = backend->allocate(static_cast<size_t>(n * hidden) * sizeof(float));
  ASSERT_TRUE(hbuf.has_value());
  batch.hidden = hbuf->view(DType::f32, {n, hidden});
  const std::vector<float> logits = testing::run_step(*model, *backend, *kv, batch);
  std::vector<float> rows(static_cast<size_t>(n * hidden));
  backend->download(rows.data(), batch.hidden);
  for (int s = 0; s < 2; ++s) {
    const auto& c = cases[s == 0 ? 0 : 2];
    const int first = batch.q_start[static_cast<size_t>(s)], len = batch.q_start[static_cast<size_t>(s) + 1] - first;
    for (int64_t k = 0; k < hidden; ++k) {
      double sum = 0.0;
      for (int r = first; r < first + len; ++r) sum += rows[static_cast<size_t>(r * hidden + k)];
      const auto at = [&](int r) { return rows[static_cast<size_t>(r * hidden + k)]; };
      EXPECT_NEAR(at(first), c.at("raw").at("cls")[static_cast<size_t>(k)].get<float>(), 1e-4f) << s << " cls " << k;
      EXPECT_NEAR(at(first + len - 1), c.at("raw").at("last")[static_cast<size_t>(k)].get<float>(), 1e-4f) << s << " last " << k;
      EXPECT_NEAR(sum / len, c.at("raw").at("mean")[static_cast<size_t>(k)].get<float>(), 1e-4f) << s << " mean " << k;
    }
  }
  const std::vector<float>& want = logit_cases[0].logits.back();
  for (size_t v = 0; v < want.size(); ++v) EXPECT_NEAR(logits[v], want[v], testing::kLogitTol) << "logit " << v;
}

TEST(PoolingHook, RowsOutsideTheStepOrAWrongOutputAreRefused) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(testing::fixture_dir("qwen3"), *backend);
  ASSERT_TRUE(model);
  auto kv = KvCache::allocate(*backend, model->kv_layout(4, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepBatch batch = testing::make_step({{0, {1, 2, 3}, 0, false}}, 16, 4);
  batch.logit_rows.clear();
  auto hbuf = backend->allocate(64 * sizeof(float) * 2);
  batch.hidden_rows = {3};
  batch.hidden = hbuf->view(DType::f32, {1, 64});
  EXPECT_NE(model->forward(batch, *kv, Tensor()).message().find("hidden row 3"), std::string::npos);
  batch.hidden_rows = {0, 2};
  batch.hidden = hbuf->view(DType::f32, {1, 64});
  EXPECT_NE(model->forward(batch, *kv, Tensor()).message().find("hidden must be"), std::string::npos);
}

// Qwen3-Embedding's files, byte for byte as the model ships them.
TEST(PoolingConfig, ReadsSentenceTransformersLastTokenAndNormalize) {
  TempDir dir("st_last");
  testing::write_text(dir.file("modules.json"), R"([
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
])");
  std::filesystem::create_directories(dir.file("1_Pooling"));
  testing::write_text(dir.file("1_Pooling/config.json"), R"({
  "word_embedding_dimension": 1024,
  "pooling_mode_cls_token": false,
  "pooling_mode_mean_tokens": false,
  "pooling_mode_max_tokens": false,
  "pooling_mode_mean_sqrt_len_tokens": false,
  "pooling_mode_weightedmean_tokens": false,
  "pooling_mode_lasttoken": true,
  "include_prompt": true
})");
  auto c = read_pooling_config(dir.str());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->mode, Pooling::last);
  EXPECT_TRUE(c->normalize);
}

TEST(PoolingConfig, MeanWithoutNormalizeClsAndDefaults) {
  TempDir dir("st_mean");
  testing::write_text(dir.file("modules.json"),
                      R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                          {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  std::filesystem::create_directories(dir.file("1_Pooling"));
  testing::write_text(dir.file("1_Pooling/config.json"),
                      R"({"word_embedding_dimension": 768, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true})");
  auto mean = read_pooling_config(dir.str());
  ASSERT_TRUE(mean.has_value()) << mean.status().to_string();
  EXPECT_EQ(mean->mode, Pooling::mean);
  EXPECT_FALSE(mean->normalize) << "no Normalize module";
  testing::write_text(dir.file("1_Pooling/config.json"), R"({"pooling_mode_cls_token": true})");
  EXPECT_EQ(read_pooling_config(dir.str())->mode, Pooling::cls);
  testing::write_text(dir.file("1_Pooling/config.json"), R"({"pooling_mode_max_tokens": true})");
  auto max = read_pooling_config(dir.str());
  ASSERT_FALSE(max.has_value());
  EXPECT_EQ(max.status().code(), StatusCode::unsupported);
  EXPECT_NE(max.status().message().find("--pooling"), std::string::npos) << max.status().message();
  testing::write_text(dir.file("1_Pooling/config.json"), "{not json");
  EXPECT_EQ(read_pooling_config(dir.str()).status().code(), StatusCode::corrupt);
  TempDir plain("st_none");  // no modules.json: vLLM's default for decoder models
  auto none = read_pooling_config(plain.str());
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->mode, Pooling::last);
  EXPECT_TRUE(none->normalize);
  EXPECT_EQ(read_pooling_config(plain.file("model.gguf"))->mode, Pooling::last);
}

TEST(PoolingConfig, NamesParseAndBadOnesListTheValidOnes) {
  EXPECT_EQ(*parse_pooling("mean"), Pooling::mean);
  EXPECT_EQ(*parse_pooling("lasttoken"), Pooling::last);
  auto bad = parse_pooling("max");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("last, mean, cls"), std::string::npos);
}

// torch.nn.functional.normalize([3, 4, 12]) = [3, 4, 12] / 13; the first two of it, renormalized: / 5.
TEST(PoolingConfig, FinishEmbeddingCutsThenNormalizes) {
  const std::vector<float> v = {3.0f, 4.0f, 12.0f};
  EXPECT_EQ(finish_embedding(v, 0, false), v);
  const auto unit = finish_embedding(v, 0, true);
  EXPECT_FLOAT_EQ(unit[2], 12.0f / 13.0f);
  const auto cut = finish_embedding(v, 2, true);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_FLOAT_EQ(cut[0], 0.6f);
  EXPECT_FLOAT_EQ(cut[1], 0.8f);
  EXPECT_EQ(finish_embedding(std::vector<float>{0.0f, 0.0f}, 0, true), (std::vector<float>{0.0f, 0.0f}));
}

}  // namespace
}  // namespace brigade
