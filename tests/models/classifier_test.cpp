// Sequence classifiers (models/classifier.h) against transformers: the fixtures of
// scripts/make_classifier_fixtures.py (tests/fixtures/classifier/), read as vLLM reads them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "models/classifier.h"
#include "models/tokenizer.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::TempDir;

std::string dir_of(const std::string& name) { return testing::fixture_dir("classifier/" + name); }

json expected(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/expected.json").value()); }

using testing::head_or_fail;

// The last prompt token's final-norm hidden state, through the model's pooling hook.
std::vector<float> last_hidden(Model& model, Backend& backend, const std::vector<int32_t>& ids) {
  constexpr int kPageSize = 16, kPages = 4;
  auto kv = KvCache::allocate(backend, model.kv_layout(kPages, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value());
  StepBatch batch = testing::make_step({{0, ids, 0, false}}, kPageSize, kPages);
  batch.hidden_rows = {batch.n_tokens() - 1};
  const int64_t hidden = model.config().hidden_size;
  auto buf = backend.allocate(static_cast<size_t>(hidden) * sizeof(float));
  EXPECT_TRUE(buf.has_value());
  batch.hidden = buf->view(DType::f32, {1, hidden});
  testing::run_step(model, backend, *kv, batch);
  std::vector<float> out(static_cast<size_t>(hidden));
  backend.download(out.data(), batch.hidden);
  return out;
}

// Qwen3ForSequenceClassification: score.weight read as stored, id2label's names, softmax; the
// checkpoint (no lm_head) loads as its decoder, and the head over its last hidden state gives
// transformers' logits.
TEST(Classifier, ASequenceClassificationCheckpointGivesTransformersLogits) {
  const ClassifierHead head = head_or_fail(dir_of("qwen3_seq_cls"));
  EXPECT_EQ(head.num_labels, 3);
  EXPECT_EQ(head.hidden, 64);
  EXPECT_EQ(head.labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(head.classify_activation, ClassifierActivation::softmax);
  EXPECT_EQ(head.score_activation, ClassifierActivation::softmax);
  EXPECT_EQ(head.source, "score.weight");
  EXPECT_FALSE(head.generates);
  EXPECT_TRUE(head.use_pad_token);

  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("qwen3_seq_cls"), *backend);
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->config().seq_cls);
  const json want = expected("qwen3_seq_cls");
  int n = 0;
  for (const char* kind : {"prompts", "texts"})
    for (const json& c : want[kind]) {
      const auto logits = head.logits(last_hidden(*model, *backend, c["ids"].get<std::vector<int32_t>>()));
      ASSERT_EQ(logits.size(), 3u);
      for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(logits[l], c["logits"][l].get<double>(), 1e-4) << kind << " " << l;
      ++n;
    }
  EXPECT_EQ(n, 6);
}

// A causal LM read as a reranker (vLLM's --hf-overrides for Qwen3-Reranker and mxbai-rerank-v2):
// lm_head["1"] - lm_head["0"], whose sigmoid is the model card's softmax over the two tokens.
TEST(Classifier, FromTwoWaySoftmaxScoresAsTheRerankersModelCard) {
  const std::string overrides =
      R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"],
          "method": "from_2_way_softmax"})";
  const ClassifierHead head = head_or_fail(dir_of("qwen3_reranker"), overrides);
  EXPECT_EQ(head.num_labels, 1);
  EXPECT_EQ(head.labels, std::vector<std::string>{"LABEL_0"});
  EXPECT_EQ(head.classify_activation, ClassifierActivation::sigmoid);
  EXPECT_EQ(head.score_activation, ClassifierActivation::sigmoid);
  EXPECT_TRUE(head.generates);
  EXPECT_FALSE(head.use_pad_token);  // the two texts joined, as vLLM runs an LLM reranker
  // Qwen3-Reranker's own switch means the same method.
  const ClassifierHead same = head_or_fail(
      dir_of("qwen3_reranker"),
      R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"],
          "is_original_qwen3_reranker": true})");
  EXPECT_EQ(same.weight, head.weight);

  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("qwen3_reranker"), *backend);
  ASSERT_TRUE(model);
  const json want = expected("qwen3_reranker");
  ASSERT_EQ(want["pairs"].size(), 3u);
  for (const json& c : want["pairs"]) {
    const auto h = last_hidden(*model, *backend, c["ids"].get<std::vector<int32_t>>());
    EXPECT_NEAR(head.logits(h)[0], c["logit"].get<double>(), 1e-4);
    EXPECT_NEAR(head.outputs(h, PoolingTask::score, true)[0], c["score"].get<double>(), 1e-5);
    EXPECT_NEAR(head.outputs(h, PoolingTask::score, false)[0], c["logit"].get<double>(), 1e-4);
  }
  // no_post_processing: the two tokens' rows, as they are.
  const ClassifierHead rows = head_or_fail(
      dir_of("qwen3_reranker"),
      R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"],
          "method": "no_post_processing"})");
  ASSERT_EQ(rows.num_labels, 2);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(head.weight[static_cast<size_t>(i)], rows.weight[64 + i] - rows.weight[i]);
}

TEST(Classifier, ActivationsFollowVllm) {
  const std::vector<double> x{1.0, 2.0, -1.0};
  const auto soft = apply_activation(x, ClassifierActivation::softmax);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(-1.0);
  EXPECT_NEAR(soft[1], std::exp(2.0) / z, 1e-12);
  EXPECT_NEAR(apply_activation({0.5}, ClassifierActivation::sigmoid)[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-12);
  EXPECT_EQ(apply_activation(x, ClassifierActivation::identity), x);
  EXPECT_NEAR(apply_activation({1000.0, 0.0}, ClassifierActivation::softmax)[0], 1.0, 1e-12);  // no overflow

  // problem_type and the cross-encoder activation, laid over the fixture's config.json.
  TempDir dir("cls_activation");
  for (const auto& e : std::filesystem::directory_iterator(dir_of("llama_seq_cls")))
    std::filesystem::copy(e.path(), dir.file(e.path().filename().string()));
  auto config = json::parse(read_text_file(dir.file("config.json")).value());
  EXPECT_EQ(head_or_fail(dir.str()).classify_activation, ClassifierActivation::sigmoid);  // one label
  config["problem_type"] = "regression";
  config["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity";
  testing::write_text(dir.file("config.json"), config.dump());
  ClassifierHead h = head_or_fail(dir.str());
  EXPECT_EQ(h.classify_activation, ClassifierActivation::identity);
  EXPECT_EQ(h.score_activation, ClassifierActivation::identity);
  config.erase("sbert_ce_default_activation_function");
  config["sentence_transformers"] = {{"activation_fn", "torch.nn.modules.activation.Sigmoid"}};
  config["problem_type"] = "multi_label_classification";
  testing::write_text(dir.file("config.json"), config.dump());
  h = head_or_fail(dir.str());
  EXPECT_EQ(h.classify_activation, ClassifierActivation::sigmoid);
  EXPECT_EQ(h.score_activation, ClassifierActivation::sigmoid);
  config["sentence_transformers"] = {{"activation_fn", "os.system"}};
  testing::write_text(dir.file("config.json"), config.dump());
  auto refused = read_classifier(dir.str(), "", nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("'os.system' is not supported"), std::string::npos);
}

TEST(Classifier, ACausalLmWithoutOverridesHasNone) {
  auto none = read_classifier(dir_of("qwen3_reranker"), "", nullptr);
  ASSERT_TRUE(none.has_value()) << none.status().to_string();
  EXPECT_FALSE(none->has_value());
  auto file = read_classifier(testing::fixture_dir("tokenizers") + "/qwen2/tokenizer.json", "", nullptr);
  ASSERT_TRUE(file.has_value());
  EXPECT_FALSE(file->has_value());
}

TEST(Classifier, BadOverridesAndCheckpointsAreRefusedWithTheReason) {
  auto tok = Tokenizer::load(dir_of("qwen3_reranker"));
  ASSERT_TRUE(tok.has_value());
  auto refused = [&](const std::string& path, const std::string& overrides, const std::string& why) {
    auto h = read_classifier(path, overrides, tok->get());
    ASSERT_FALSE(h.has_value()) << overrides;
    EXPECT_NE(h.status().message().find(why), std::string::npos) << h.status().message();
  };
  const std::string causal = dir_of("qwen3_reranker");
  refused(causal, "[1]", "must be a JSON object");
  refused(causal, R"({"rope_theta": 5})", "key 'rope_theta' is not applied");
  refused(causal, R"({"architectures": "Qwen3ForSequenceClassification"})", "wrong type");
  refused(causal, R"({"classifier_from_token": ["0", "1"], "method": "from_2_way_softmax"})",
          "name its *ForSequenceClassification architecture");
  refused(causal, R"({"architectures": ["LlamaForSequenceClassification"], "classifier_from_token": ["0", "1"], "method": "from_2_way_softmax"})",
          "not of the checkpoint's family");
  refused(causal, R"({"architectures": ["Qwen3ForSequenceClassification"]})", "lacks");
  refused(causal, R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"]})",
          "needs a method");
  refused(causal, R"({"architectures": ["Qwen3ForSequenceClassification"], "method": "from_2_way_softmax"})",
          "needs classifier_from_token");
  refused(causal, R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0"], "method": "from_2_way_softmax"})",
          "needs two classifier_from_token");
  refused(causal, R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "yes!"], "method": "from_2_way_softmax"})",
          "'yes!' is not a token of the vocabulary");
  refused(causal, R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"], "method": "mean"})",
          "method 'mean' is not supported");
  refused(testing::fixture_dir("tokenizers") + "/qwen2/tokenizer.json", R"({"num_labels": 2})",
          "applies to a Hugging Face model directory");
  EXPECT_TRUE(check_hf_overrides("").is_ok());
  EXPECT_FALSE(check_hf_overrides(R"({"max_position_embeddings": 5})").is_ok());

  // A classifier whose score.weight does not match the hidden size.
  TempDir dir("cls_bad");
  for (const auto& e : std::filesystem::directory_iterator(dir_of("qwen3_seq_cls")))
    std::filesystem::copy(e.path(), dir.file(e.path().filename().string()));
  auto config = json::parse(read_text_file(dir.file("config.json")).value());
  config["hidden_size"] = 32;
  config["head_dim"] = 8;
  testing::write_text(dir.file("config.json"), config.dump());
  refused(dir.str(), "", "not [n, 32]");
}

}  // namespace
}  // namespace brigade
