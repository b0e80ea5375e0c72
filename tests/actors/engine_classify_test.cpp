// Classification and cross-encoder scores (EmbedOptions::task, Engine::classify) through the whole
// engine, against transformers: the fixtures of scripts/make_classifier_fixtures.py
// (tests/fixtures/classifier/). A Qwen3ForSequenceClassification checkpoint on the host and
// device paths, under tensor parallelism, PD separation and chunked prefill; a causal LM read as
// a reranker through EngineOptions::hf_overrides (vLLM's --hf-overrides for Qwen3-Reranker); a
// Llama classifier scoring pairs tokenized as a tokenizer pair; and what is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "models/mapped_file.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr double kTol = 1e-4;  // fp32 both sides; probabilities and logits of O(1..10)

std::string dir_of(const std::string& name) { return testing::fixture_dir("classifier/" + name); }
json expected(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/expected.json").value()); }

constexpr const char* kRerankerOverrides =
    R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"],
        "method": "from_2_way_softmax"})";

EngineOptions options(const std::string& name, int step_tokens = 16) {
  EngineOptions o = testing::test_engine_options(dir_of(name), 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 8;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = step_tokens;  // the 40-token prompt takes several chunks
  return o;
}

std::vector<double> softmax(const std::vector<double>& x) {
  double m = x[0], sum = 0;
  for (double v : x) m = std::max(m, v);
  std::vector<double> out;
  for (double v : x) sum += std::exp(v - m);
  for (double v : x) out.push_back(std::exp(v - m) / sum);
  return out;
}

EmbedOptions classify_ids(const std::vector<int32_t>& ids, PoolingTask task = PoolingTask::classify) {
  EmbedOptions e;
  e.prompt_ids = ids;
  e.task = task;
  return e;
}

// Every case of qwen3_seq_cls alone (ids and text), then all together: softmax of transformers'
// logits, the winning label's name, and the raw logits with use_activation false.
void expect_transformers(const EngineOptions& o, const std::string& what) {
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->model().classifier);
  EXPECT_FALSE(engine->model().generates);
  const json want = expected("qwen3_seq_cls");
  std::vector<std::pair<EmbedOptions, std::vector<double>>> cases;
  for (const json& c : want["prompts"]) cases.emplace_back(classify_ids(c["ids"]), c["logits"].get<std::vector<double>>());
  for (const json& c : want["texts"]) {
    EmbedOptions e;
    e.prompt = c["text"];
    cases.emplace_back(e, c["logits"].get<std::vector<double>>());
  }
  ASSERT_EQ(cases.size(), 6u);
  const std::vector<std::string> names{"negative", "neutral", "positive"};
  for (const auto& [request, logits] : cases) {
    const std::string at = what + ": " + (request.prompt.empty() ? std::to_string(request.prompt_ids.size()) + " ids"
                                                                  : "'" + request.prompt + "'");
    auto c = engine->classify(request);
    ASSERT_TRUE(c.has_value()) << at << ": " << c.status().to_string();
    const auto probs = softmax(logits);
    ASSERT_EQ(c->probs.size(), 3u) << at;
    for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(c->probs[l], probs[l], kTol) << at << " label " << l;
    const int best = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(c->label, best) << at;
    EXPECT_EQ(c->label_name, names[static_cast<size_t>(best)]) << at;
    EmbedOptions raw = request;
    raw.use_activation = false;
    auto r = engine->classify(raw);
    ASSERT_TRUE(r.has_value()) << at << ": " << r.status().to_string();
    for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(r->probs[l], logits[l], kTol) << at << " logit " << l;
  }
  std::vector<std::promise<Expected<Embedding>>> done(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EmbedOptions e = cases[i].first;
    e.task = PoolingTask::classify;
    ASSERT_TRUE(engine->submit_embed(e, [&done, i](Expected<Embedding> r) { done[i].set_value(std::move(r)); }));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    auto e = done[i].get_future().get();
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    const auto probs = softmax(cases[i].second);
    for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(e->values[l], probs[l], kTol) << what << " together, case " << i;
  }
  EXPECT_EQ(engine->stats().generated_tokens, 0u);
  EXPECT_EQ(engine->stats().n_running, 0);
}

TEST(EngineClassify, ALabelModelGivesTransformersProbabilities) {
  expect_transformers(options("qwen3_seq_cls"), "host");
  EngineOptions device = options("qwen3_seq_cls");
  device.topology.instances.front().executors.front().step_path = "device";
  device.topology.instances.front().scheduler.max_inflight_steps = 2;
  expect_transformers(device, "device, depth 2");
}

TEST(EngineClassify, UnderTensorParallelismPdSeparationAndChunks) {
  EngineOptions tp = options("qwen3_seq_cls");
  tp.topology.instances.front().executors.front().tp = 2;
  expect_transformers(tp, "tp 2");
  expect_transformers(testing::prefill_decode(options("qwen3_seq_cls")), "pd");
  expect_transformers(options("qwen3_seq_cls", 4), "4-token chunks");
}

// A checkpoint with no lm_head does not generate; every generation entry point says why.
TEST(EngineClassify, AClassifierCheckpointRefusesToGenerate) {
  auto engine = testing::create_engine(options("qwen3_seq_cls"));
  ASSERT_TRUE(engine);
  auto g = engine->generate(testing::greedy_ids({5, 6, 7}, 4));
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.status().code(), StatusCode::unsupported);
  EXPECT_NE(g.status().message().find("sequence classifier (Qwen3ForSequenceClassification)"), std::string::npos)
      << g.status().message();
  BeamSearchOptions beam;
  beam.prompt_ids = {5, 6, 7};
  beam.beam_width = 2;
  beam.max_tokens = 3;
  auto b = engine->beam_search(beam);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.status().code(), StatusCode::unsupported);
  // Embeddings still come from its hidden states.
  EmbedOptions e;
  e.prompt_ids = {5, 6, 7};
  EXPECT_TRUE(engine->embed(e).has_value());
}

// Qwen3-Reranker served as vLLM serves it: the causal LM's lm_head rows make a one-label
// classifier whose sigmoid is the model card's softmax over the two tokens; it still generates
// transformers' greedy tokens.
TEST(EngineClassify, ACausalLmTurnedRerankerScoresAndStillGenerates) {
  EngineOptions o = options("qwen3_reranker");
  o.hf_overrides = kRerankerOverrides;
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->model().classifier);
  EXPECT_TRUE(engine->model().generates);
  EXPECT_FALSE(engine->model().classifier->use_pad_token);
  const json want = expected("qwen3_reranker");
  for (const json& c : want["pairs"]) {
    // use_pad_token false: the two texts joined, tokenized as one.
    auto ids = engine->tokenize(c["text_1"].get<std::string>() + c["text_2"].get<std::string>(), true);
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    auto s = engine->embed(classify_ids(*ids, PoolingTask::score));
    ASSERT_TRUE(s.has_value()) << s.status().to_string();
    ASSERT_EQ(s->values.size(), 1u);
    EXPECT_NEAR(s->values[0], c["score"].get<double>(), 1e-5);
  }
  for (const json& c : want["greedy"]) {
    auto g = engine->generate(testing::greedy_ids(c["ids"], 6));
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
    EXPECT_EQ(g->token_ids, c["tokens"].get<std::vector<int32_t>>());
  }
}

// A cross-encoder's pair through tokenize_pair (<|begin_of_text|> q <|begin_of_text|> d), scored
// through the sigmoid of the one label.
TEST(EngineClassify, ACrossEncoderScoresPairsTokenizedAsTheTokenizerDoes) {
  auto engine = testing::create_engine(options("llama_seq_cls"));
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->model().classifier->use_pad_token);
  const json want = expected("llama_seq_cls");
  ASSERT_EQ(want["pairs"].size(), 3u);
  for (const json& c : want["pairs"]) {
    auto ids = engine->tokenize_pair(c["text_1"], c["text_2"]);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    auto s = engine->embed(classify_ids(*ids, PoolingTask::score));
    ASSERT_TRUE(s.has_value()) << s.status().to_string();
    EXPECT_NEAR(s->values[0], c["score"].get<double>(), 1e-5);
    EmbedOptions raw = classify_ids(*ids, PoolingTask::score);
    raw.use_activation = false;
    auto r = engine->embed(raw);
    ASSERT_TRUE(r.has_value());
    EXPECT_NEAR(r->values[0], c["logit"].get<double>(), kTol);
  }
  for (const json& c : want["texts"]) {  // one label: /classify's activation is the sigmoid too
    EmbedOptions e;
    e.prompt = c["text"];
    auto k = engine->classify(e);
    ASSERT_TRUE(k.has_value()) << k.status().to_string();
    EXPECT_NEAR(k->probs[0], 1.0 / (1.0 + std::exp(-c["logits"][0].get<double>())), 1e-5);
    EXPECT_EQ(k->label_name, "LABEL_0");
  }
}

TEST(EngineClassify, WhatCannotBeAskedIsRefusedWithTheReason) {
  {  // a causal LM without overrides has no classifier
    auto engine = testing::create_engine(options("qwen3_reranker"));
    ASSERT_TRUE(engine);
    EXPECT_FALSE(engine->model().classifier);
    auto c = engine->classify(classify_ids({5, 6}));
    ASSERT_FALSE(c.has_value());
    EXPECT_EQ(c.status().code(), StatusCode::unsupported);
    EXPECT_NE(c.status().message().find("has no classifier"), std::string::npos) << c.status().message();
  }
  {
    auto engine = testing::create_engine(options("qwen3_seq_cls"));
    ASSERT_TRUE(engine);
    auto s = engine->embed(classify_ids({5, 6}, PoolingTask::score));
    ASSERT_FALSE(s.has_value());
    EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(s.status().message().find("this one has 3"), std::string::npos) << s.status().message();
    EmbedOptions dims = classify_ids({5, 6});
    dims.dimensions = 8;
    auto d = engine->embed(dims);
    ASSERT_FALSE(d.has_value());
    EXPECT_NE(d.status().message().find("dimensions applies to embeddings"), std::string::npos);
    auto outside = engine->classify(classify_ids({5, 100000}));
    ASSERT_FALSE(outside.has_value());
    EXPECT_NE(outside.status().message().find("100000"), std::string::npos);
  }
  EngineOptions bad = options("qwen3_reranker");
  bad.hf_overrides = R"({"rope_theta": 1})";
  auto e = Engine::create(bad);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("key 'rope_theta' is not applied"), std::string::npos) << e.status().message();
  bad.hf_overrides = R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "nope"],
                        "method": "from_2_way_softmax"})";
  e = Engine::create(bad);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("'nope' is not a token"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace brigade
