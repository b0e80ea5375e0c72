// The BERT-family encoders (models/bert.h) against transformers: the fixtures of
// scripts/make_encoder_fixtures.py (tests/fixtures/encoder/): every row of last_hidden_state,
// pairs with token types, RoBERTa's positions around padding ids, and the classification heads.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "models/bert.h"
#include "models/classifier.h"
#include "models/model_config.h"
#include "models/tokenizer.h"
#include "tests/models/encoder_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::encoder_hidden_states;
using testing::typed;
using testing::TempDir;

std::string dir_of(const std::string& name) { return testing::fixture_dir("encoder/" + name); }

json expected(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/expected.json").value()); }

void expect_rows(const std::vector<std::vector<float>>& got, size_t first, const json& want, const std::string& what) {
  ASSERT_GE(got.size(), first + want.size()) << what;
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t i = 0; i < want[r].size(); ++i)
      ASSERT_NEAR(got[first + r][i], want[r][i].get<double>(), 2e-4) << what << " row " << r << " dim " << i;
}

// BertModel: each text alone, then pairs with their token types, then every case in one step
// (each prompt attends to itself only).
TEST(BertEncoder, HiddenStatesMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 512;  // every case in one step
  auto model = testing::load_or_fail(dir_of("bert_embed"), *backend, opts);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.encoder);
  EXPECT_EQ(c.arch, "bert");
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_EQ(c.position_offset, 0);
  EXPECT_EQ(c.max_position, 128);
  EXPECT_EQ(c.mlp_activation, MlpActivation::gelu);
  const json want = expected("bert_embed");
  std::vector<std::vector<int32_t>> all;
  std::vector<const json*> cases;
  for (const char* kind : {"texts", "pairs"})
    for (const json& k : want[kind]) {
      const auto ids = typed(k);
      expect_rows(encoder_hidden_states(*model, *backend, {ids}), 0, k["hidden"], k.value("text", k.value("text_1", "")));
      all.push_back(ids);
      cases.push_back(&k);
    }
  ASSERT_EQ(all.size(), 7u);
  const auto together = encoder_hidden_states(*model, *backend, all);
  size_t first = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    expect_rows(together, first, (*cases[i])["hidden"], "in one step, case " + std::to_string(i));
    first += all[i].size();
  }
}

// Without the pair's token types the second segment reads type 0: another result, so the types
// do reach the model.
TEST(BertEncoder, TokenTypesChangeTheSecondSegment) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("bert_embed"), *backend);
  ASSERT_TRUE(model);
  const json fixture = expected("bert_embed");
  const json& pair = fixture["pairs"][0];
  const auto untyped = encoder_hidden_states(*model, *backend, {pair["ids"].get<std::vector<int32_t>>()});
  ASSERT_FALSE(untyped.empty());
  const double want = pair["hidden"].back()[0].get<double>();
  EXPECT_GT(std::abs(untyped.back()[0] - want), 1e-3);
}

// RoBERTa numbers positions from padding_idx + 1 and leaves padding ids at padding_idx
// (create_position_ids_from_input_ids); gelu_new; one token type.
TEST(BertEncoder, RobertaPositionsSkipPaddingIds) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("roberta_cls"), *backend);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "roberta");
  EXPECT_TRUE(c.seq_cls);
  EXPECT_EQ(c.position_offset, 2);
  EXPECT_EQ(c.max_position, 128);  // max_position_embeddings 130 - 2
  EXPECT_EQ(c.type_vocab_size, 1);
  EXPECT_EQ(c.mlp_activation, MlpActivation::gelu_tanh);
  const json want = expected("roberta_cls");
  ASSERT_EQ(want["prompts"].size(), 3u);
  for (const json& k : want["prompts"])
    expect_rows(encoder_hidden_states(*model, *backend, {k["ids"].get<std::vector<int32_t>>()}), 0, k["hidden"], k["ids"].dump());
}

using testing::head_or_fail;

// BertForSequenceClassification as a cross-encoder: the pooler (dense + tanh over [CLS]) and the
// classifier with its bias give transformers' logit; one label scores by its sigmoid.
TEST(BertEncoder, CrossEncoderLogitsMatchTransformers) {
  const ClassifierHead head = head_or_fail(dir_of("bert_cross"));
  EXPECT_EQ(head.num_labels, 1);
  EXPECT_EQ(head.pooling, Pooling::cls);
  EXPECT_FALSE(head.generates);
  EXPECT_EQ(head.source, "bert.pooler.dense + tanh, classifier over the first token");
  EXPECT_EQ(head.score_activation, ClassifierActivation::sigmoid);
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("bert_cross"), *backend);
  ASSERT_TRUE(model);
  const json want = expected("bert_cross");
  ASSERT_EQ(want["pairs"].size(), 3u);
  for (const json& k : want["pairs"]) {
    const auto rows = encoder_hidden_states(*model, *backend, {typed(k)});
    ASSERT_FALSE(rows.empty());
    EXPECT_NEAR(head.logits(rows[0])[0], k["logit"].get<double>(), 1e-4);
    EXPECT_NEAR(head.outputs(rows[0], PoolingTask::score, true)[0], k["score"].get<double>(), 1e-5);
  }
}

// RobertaForSequenceClassification: classifier.dense + tanh + out_proj over <s>, three labels.
TEST(BertEncoder, RobertaClassifierLogitsMatchTransformers) {
  const ClassifierHead head = head_or_fail(dir_of("roberta_cls"));
  EXPECT_EQ(head.num_labels, 3);
  EXPECT_EQ(head.labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(head.source, "classifier.dense + tanh, classifier.out_proj over the first token");
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("roberta_cls"), *backend);
  ASSERT_TRUE(model);
  const json want = expected("roberta_cls");
  int n = 0;
  for (const char* kind : {"texts", "pairs", "prompts"})
    for (const json& k : want[kind]) {
      const auto rows = encoder_hidden_states(*model, *backend, {k["ids"].get<std::vector<int32_t>>()});
      ASSERT_FALSE(rows.empty());
      const auto logits = head.logits(rows[0]);
      for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(logits[l], k["logits"][l].get<double>(), 1e-4) << kind << " " << l;
      ++n;
    }
  EXPECT_EQ(n, 10);
}

// XLMRobertaForSequenceClassification (bge-reranker-base's shape) with XLM-R's Unigram tokenizer:
// pairs tokenized as HF tokenizers does (<s> A </s></s> B </s>), transformers' logit.
TEST(BertEncoder, XlmRobertaRerankerMatchesTransformers) {
  const ClassifierHead head = head_or_fail(dir_of("xlmr_rerank"));
  EXPECT_EQ(head.num_labels, 1);
  EXPECT_EQ(head.architecture, "XLMRobertaForSequenceClassification");
  auto tok = Tokenizer::load(dir_of("xlmr_rerank"));
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions opts;
  opts.max_batch_tokens = 128;
  auto model = testing::load_or_fail(dir_of("xlmr_rerank"), *backend, opts);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config().arch, "roberta");
  const json want = expected("xlmr_rerank");
  ASSERT_EQ(want["pairs"].size(), 4u);
  for (const json& k : want["pairs"]) {
    auto ids = (*tok)->encode_pair(k["text_1"].get<std::string>(), k["text_2"].get<std::string>());
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, k["ids"].get<std::vector<int32_t>>());
    const auto rows = encoder_hidden_states(*model, *backend, {k["ids"].get<std::vector<int32_t>>()});
    ASSERT_FALSE(rows.empty());
    EXPECT_NEAR(head.logits(rows[0])[0], k["logit"].get<double>(), 1e-4);
    EXPECT_NEAR(head.outputs(rows[0], PoolingTask::score, true)[0], k["score"].get<double>(), 1e-5);
  }
}

// DistilBertForSequenceClassification (distilbert-base-uncased-finetuned-sst-2-english's shape):
// DistilBERT's layer names, no token types, every hidden row, and pre_classifier + ReLU +
// classifier over [CLS].
TEST(BertEncoder, DistilBertMatchesTransformers) {
  const ClassifierHead head = head_or_fail(dir_of("distilbert_sst"));
  EXPECT_EQ(head.num_labels, 2);
  EXPECT_EQ(head.pre_activation, DenseActivation::relu);
  EXPECT_EQ(head.labels, (std::vector<std::string>{"NEGATIVE", "POSITIVE"}));
  EXPECT_EQ(head.source, "pre_classifier + relu, classifier over the first token");
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("distilbert_sst"), *backend);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config().arch, "distilbert");
  EXPECT_EQ(model->config().type_vocab_size, 0);
  const json want = expected("distilbert_sst");
  ASSERT_EQ(want["texts"].size(), 4u);
  for (const json& k : want["texts"]) {
    const auto rows = encoder_hidden_states(*model, *backend, {k["ids"].get<std::vector<int32_t>>()});
    expect_rows(rows, 0, k["hidden"], k["text"]);
    ASSERT_FALSE(rows.empty());
    const auto logits = head.logits(rows[0]);
    for (size_t l = 0; l < 2; ++l) EXPECT_NEAR(logits[l], k["logits"][l].get<double>(), 1e-4) << k["text"] << " " << l;
  }
}

// Steps an encoder cannot run are refused with the reason, before anything is computed.
TEST(BertEncoder, RefusesStepsItCannotRun) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = testing::load_or_fail(dir_of("roberta_cls"), *backend);
  ASSERT_TRUE(model);
  // A chunk that continues a prompt: the encoder needs it whole.
  Status st = testing::encoder_step_status(*model, *backend, {0, {5, 6, 7}, 4, false});
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("whole in one step"), std::string::npos) << st.to_string();
  // Logits.
  st = testing::encoder_step_status(*model, *backend, {0, {0, 5, 2}, 0, false}, true);
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("computes no logits"), std::string::npos) << st.to_string();
  // A token type this encoder does not have (RoBERTa has one).
  st = testing::encoder_step_status(*model, *backend, {0, {0, with_token_type(5, 1), 2}, 0, false});
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("token type 1"), std::string::npos) << st.to_string();
  // An id outside the vocabulary.
  EXPECT_EQ(testing::encoder_step_status(*model, *backend, {0, {0, 100000, 2}, 0, false}).code(),
            StatusCode::invalid_argument);
}

// config.json fields an encoder here does not run are refused by name.
TEST(BertEncoder, RefusesConfigsItDoesNotRun) {
  const json base = json::parse(read_text_file(dir_of("bert_embed") + "/config.json").value());
  auto refused = [&](const char* key, const json& value, const std::string& needle) {
    json c = base;
    c[key] = value;
    auto parsed = parse_hf_config(c.dump());
    ASSERT_FALSE(parsed.has_value()) << key;
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << parsed.status().to_string();
  };
  refused("position_embedding_type", "relative_key", "position_embedding_type 'relative_key'");
  refused("is_decoder", true, "is_decoder");
  refused("hidden_act", "relu", "hidden_act 'relu'");
  refused("type_vocab_size", 3, "type_vocab_size 3");
  json mt = base;
  mt.erase("architectures");
  mt["model_type"] = "xlm-roberta";
  auto parsed = parse_hf_config(mt.dump());
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  EXPECT_EQ(parsed->arch, "roberta");
  EXPECT_EQ(parsed->position_offset, 1);  // pad_token_id 0 in this config: positions from 1
}

}  // namespace
}  // namespace brigade
