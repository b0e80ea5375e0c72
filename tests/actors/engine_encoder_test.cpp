// Encoders (BERT, RoBERTa: models/bert.h) through the whole engine, against transformers: the
// fixtures of scripts/make_encoder_fixtures.py (tests/fixtures/encoder/). Sentence embeddings
// with the model's sentence-transformers pooling, a BERT cross-encoder scoring pairs with their
// token types, a RoBERTa classifier; prompts run whole and uncached however they arrive; what is
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "brigade/node.h"
#include "models/mapped_file.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr double kTol = 1e-4;  // fp32 both sides

std::string dir_of(const std::string& name) { return testing::fixture_dir("encoder/" + name); }
json expected(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/expected.json").value()); }

// Small steps and pages: the fixtures' prompts (3..71 tokens) take several pages; an encoder's
// steps are raised to its 128 positions, so a step holds a few prompts whole.
EngineOptions options(const std::string& name, int step_tokens = 64) {
  EngineOptions o = testing::test_engine_options(dir_of(name), 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 8;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = step_tokens;
  return o;
}

// nomic_embed (NomicBertModel, nomic-embed-text-v1.5's layer): its modules.json's mean pooling
// and Normalize; text and ids give transformers' sentence embeddings.
TEST(EngineEncoder, NomicBertEmbeddingsMatchTransformers) {
  auto engine = testing::create_engine(options("nomic_embed"));
  ASSERT_TRUE(engine);
  const ModelSummary& m = engine->model();
  EXPECT_TRUE(m.encoder);
  EXPECT_EQ(m.pooling, Pooling::mean);
  EXPECT_TRUE(m.normalize_embeddings);
  EXPECT_EQ(m.max_context, 128);
  const json want = expected("nomic_embed");  // a range-for over a temporary's member would dangle
  for (const json& c : want["texts"]) {
    EmbedOptions text;
    text.prompt = c["text"];
    auto e = engine->embed(text);
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    ASSERT_EQ(e->values.size(), 64u);
    for (size_t i = 0; i < 64; ++i) ASSERT_NEAR(e->values[i], c["embedding"][i].get<double>(), kTol) << text.prompt;
    EXPECT_EQ(e->prompt_tokens, static_cast<int>(c["ids"].size()));
  }
}

// bert_embed: mean pooling and Normalize from its modules.json, as sentence-transformers embeds;
// text and ids; alone, then all at once (several whole prompts per step); the same again (no
// prefix of an encoder's prompt is cached).
TEST(EngineEncoder, SentenceEmbeddingsMatchTransformers) {
  auto engine = testing::create_engine(options("bert_embed"));
  ASSERT_TRUE(engine);
  const ModelSummary& m = engine->model();
  EXPECT_TRUE(m.encoder);
  EXPECT_FALSE(m.generates);
  EXPECT_EQ(m.token_types, 2);
  EXPECT_EQ(m.pooling, Pooling::mean);
  EXPECT_TRUE(m.normalize_embeddings);
  EXPECT_EQ(m.max_context, 128);  // max_position_embeddings; the 64-token steps are raised to hold it
  const json want = expected("bert_embed");
  ASSERT_EQ(want["texts"].size(), 4u);
  auto expect_embedding = [&](const Expected<Embedding>& e, const json& c, const std::string& at) {
    ASSERT_TRUE(e.has_value()) << at << ": " << e.status().to_string();
    ASSERT_EQ(e->values.size(), 64u) << at;
    for (size_t i = 0; i < 64; ++i) ASSERT_NEAR(e->values[i], c["embedding"][i].get<double>(), kTol) << at << " dim " << i;
    EXPECT_EQ(e->prompt_tokens, static_cast<int>(c["ids"].size())) << at;
  };
  for (int round = 0; round < 2; ++round)
    for (const json& c : want["texts"]) {
      EmbedOptions text;
      text.prompt = c["text"];
      expect_embedding(engine->embed(text), c, "text '" + text.prompt + "'");
      EXPECT_EQ(engine->tokenize(text.prompt, true).value(), c["ids"].get<std::vector<int32_t>>());
      EmbedOptions ids;
      ids.prompt_ids = c["ids"].get<std::vector<int32_t>>();
      expect_embedding(engine->embed(ids), c, "ids of '" + text.prompt + "'");
    }
  std::vector<std::promise<Expected<Embedding>>> done(8);
  for (size_t i = 0; i < done.size(); ++i) {
    EmbedOptions e;
    e.prompt = want["texts"][i % 4]["text"];
    ASSERT_TRUE(engine->submit_embed(e, [&done, i](Expected<Embedding> r) { done[i].set_value(std::move(r)); }));
  }
  for (size_t i = 0; i < done.size(); ++i)
    expect_embedding(done[i].get_future().get(), want["texts"][i % 4], "together, " + std::to_string(i));
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.cache_hit_tokens, 0u);
  EXPECT_EQ(s.generated_tokens, 0u);
  EXPECT_EQ(s.n_running, 0);
}

// truncate_prompt_tokens on a text keeps its first tokens and its special tokens, as Hugging
// Face's tokenizer(text, truncation=True, max_length=k) and so vLLM truncate pooling inputs:
// [CLS] t1 t2 t3 [SEP]; token ids keep their last k (vLLM's rule for ids).
TEST(EngineEncoder, TruncationKeepsTheSpecialTokens) {
  auto engine = testing::create_engine(options("bert_embed"));
  ASSERT_TRUE(engine);
  const json c = expected("bert_embed")["texts"][0];
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  ASSERT_GT(ids.size(), 6u);
  EmbedOptions text;
  text.prompt = c["text"];
  text.truncate_prompt_tokens = 5;
  auto cut = engine->embed(text);
  ASSERT_TRUE(cut.has_value()) << cut.status().to_string();
  EXPECT_EQ(cut->prompt_tokens, 5);
  EmbedOptions same;
  same.prompt_ids = {ids[0], ids[1], ids[2], ids[3], ids.back()};
  auto want = engine->embed(same);
  ASSERT_TRUE(want.has_value());
  for (size_t i = 0; i < want->values.size(); ++i) EXPECT_NEAR(cut->values[i], want->values[i], 1e-6) << i;
  text.truncate_prompt_tokens = 2;  // no room beside [CLS] and [SEP]
  auto none = engine->embed(text);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("leaves no room for the input beside its 2 special tokens"), std::string::npos)
      << none.status().message();
  EmbedOptions tail;
  tail.prompt_ids = ids;
  tail.truncate_prompt_tokens = 5;
  EXPECT_EQ(engine->embed(tail).value().prompt_tokens, 5);
}

// Without the sentence-transformers files an encoder pools its first token (vLLM's default for
// BERT-family models); --pooling still chooses.
TEST(EngineEncoder, PoolsTheFirstTokenByDefault) {
  testing::TempDir dir("encoder_cls");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    std::filesystem::copy_file(dir_of("bert_embed") + "/" + f, dir.file(f));
  EngineOptions o = options("bert_embed");
  o.model_path = dir.str();
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->model().pooling, Pooling::cls);
  const json c = expected("bert_embed")["texts"][0];
  EmbedOptions e;
  e.prompt_ids = c["ids"].get<std::vector<int32_t>>();
  e.normalize = false;
  auto got = engine->embed(e);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(got->values[i], c["hidden"][0][i].get<double>(), kTol) << i;
}

// bert_cross (BertForSequenceClassification, one label): each pair as tokenize_pair gives it,
// its second segment type 1, scored by the sigmoid of the pooler's logit; without the types
// the score differs; token types are checked.
TEST(EngineEncoder, ACrossEncoderScoresPairsWithTheirTokenTypes) {
  auto engine = testing::create_engine(options("bert_cross"));
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->model().classifier);
  EXPECT_EQ(engine->model().classifier->pooling, Pooling::cls);
  const json want = expected("bert_cross");
  for (const json& c : want["pairs"]) {
    std::vector<int32_t> types;
    auto ids = engine->tokenize_pair(c["text_1"], c["text_2"], &types);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(types, c["type_ids"].get<std::vector<int32_t>>());
    EmbedOptions e;
    e.prompt_ids = *ids;
    e.token_type_ids = types;
    e.task = PoolingTask::score;
    auto s = engine->embed(e);
    ASSERT_TRUE(s.has_value()) << s.status().to_string();
    ASSERT_EQ(s->values.size(), 1u);
    EXPECT_NEAR(s->values[0], c["score"].get<double>(), 1e-5);
    e.use_activation = false;
    auto raw = engine->embed(e);
    ASSERT_TRUE(raw.has_value());
    EXPECT_NEAR(raw->values[0], c["logit"].get<double>(), kTol);
    e.token_type_ids.clear();
    auto untyped = engine->embed(e);
    ASSERT_TRUE(untyped.has_value());
    EXPECT_GT(std::abs(untyped->values[0] - c["logit"].get<double>()), 1e-3);
  }
  EmbedOptions bad;
  bad.prompt_ids = {2, 10, 3};
  bad.token_type_ids = {0, 2, 0};
  bad.task = PoolingTask::score;
  auto refused = engine->embed(bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("token type 2 is outside [0, 2)"), std::string::npos)
      << refused.status().message();
  bad.token_type_ids = {0, 1};
  refused = engine->embed(bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("one type per input token id (3 ids, 2 types)"), std::string::npos)
      << refused.status().message();
}

// A pair longer than truncate_prompt_tokens is cut as Hugging Face's tokenizer(q, d,
// truncation=True, max_length=k) cuts it (truncation.json, from `tokenizers` itself): the
// longer text first, [CLS] and both [SEP] kept, the types with their tokens.
TEST(EngineEncoder, ALongPairIsCutAsTheTokenizerCutsIt) {
  auto engine = testing::create_engine(options("bert_cross"));
  ASSERT_TRUE(engine);
  const json cases = json::parse(read_text_file(dir_of("bert_cross") + "/truncation.json").value());
  int n = 0;
  for (const json& c : cases["pairs"]) {
    if (c["max_length"] != 30) continue;
    std::vector<int32_t> types;
    auto ids = engine->tokenize_pair(c["text_1"], c["text_2"], &types, 30);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(types, c["type_ids"].get<std::vector<int32_t>>());
    EXPECT_LE(ids->size(), 30u);
    ++n;
  }
  EXPECT_EQ(n, 5);
  auto refused = engine->tokenize_pair("a question", "a document", nullptr, 3);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("beside its 3 special tokens"), std::string::npos) << refused.status().message();
}

// xlmr_rerank (XLMRobertaForSequenceClassification, one label, XLM-R's Unigram tokenizer): pairs
// tokenized and scored as bge-reranker-base is; one token type, so none are sent.
TEST(EngineEncoder, AnXlmRobertaRerankerScoresPairs) {
  auto engine = testing::create_engine(options("xlmr_rerank"));  // the longest pair has 71 tokens
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->model().token_types, 1);
  const json want = expected("xlmr_rerank");
  ASSERT_EQ(want["pairs"].size(), 4u);
  for (const json& c : want["pairs"]) {
    auto ids = engine->tokenize_pair(c["text_1"], c["text_2"]);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    EmbedOptions e;
    e.prompt_ids = *ids;
    e.task = PoolingTask::score;
    auto s = engine->embed(e);
    ASSERT_TRUE(s.has_value()) << s.status().to_string();
    EXPECT_NEAR(s->values[0], c["score"].get<double>(), 1e-5) << c["text_2"];
  }
}

// A cross-encoder over two instances behind the router, and over an instance in a node (the front
// reads the model's encoder facts from its config.json; the node reports its step-bound
// context): the same scores, token types included.
TEST(EngineEncoder, ScoresAcrossInstancesAndThroughANode) {
  const json want = expected("bert_cross");
  auto expect_scores = [&](Engine& engine, const std::string& what) {
    EXPECT_TRUE(engine.model().encoder) << what;
    EXPECT_EQ(engine.model().token_types, 2) << what;
    EXPECT_EQ(engine.model().max_context, 128) << what;
    std::vector<std::promise<Expected<Embedding>>> done(want["pairs"].size());
    for (size_t i = 0; i < done.size(); ++i) {
      const json& c = want["pairs"][i];
      std::vector<int32_t> types;
      EmbedOptions e;
      e.prompt_ids = engine.tokenize_pair(c["text_1"], c["text_2"], &types).value();
      e.token_type_ids = types;
      e.task = PoolingTask::score;
      ASSERT_TRUE(engine.submit_embed(e, [&done, i](Expected<Embedding> r) { done[i].set_value(std::move(r)); }));
    }
    for (size_t i = 0; i < done.size(); ++i) {
      auto s = done[i].get_future().get();
      ASSERT_TRUE(s.has_value()) << what << ": " << s.status().to_string();
      EXPECT_NEAR(s->values[0], want["pairs"][i]["score"].get<double>(), 1e-5) << what << " pair " << i;
    }
  };
  EngineOptions two = options("bert_cross");
  two.topology.instances.push_back(two.topology.instances.front());
  two.topology.instances[0].name = "a";
  two.topology.instances[1].name = "b";
  two.topology.router.policy = "round_robin";
  auto dp = testing::create_engine(two);
  ASSERT_TRUE(dp);
  expect_scores(*dp, "two instances");

  EngineOptions served = options("bert_cross");
  served.topology.model = dir_of("bert_cross");
  served.topology.instances.front().name = "n";
  NodeOptions no;
  no.engine = served;
  no.instance = "n";
  no.listen = "127.0.0.1:0";
  auto node = Node::start(no);
  ASSERT_TRUE(node.has_value()) << node.status().to_string();
  EngineOptions front = served;
  front.topology.instances.front().remote = "127.0.0.1:" + std::to_string((*node)->port());
  auto remote = testing::create_engine(front);
  ASSERT_TRUE(remote);
  expect_scores(*remote, "a node");
}

// distilbert_sst (DistilBertForSequenceClassification, the sst-2 shape): /classify's softmax over
// transformers' logits from text; no token types.
TEST(EngineEncoder, ADistilBertClassifierGivesTransformersProbabilities) {
  auto engine = testing::create_engine(options("distilbert_sst"));
  ASSERT_TRUE(engine);
  EXPECT_TRUE(engine->model().encoder);
  EXPECT_EQ(engine->model().token_types, 0);
  const json want = expected("distilbert_sst");
  for (const json& c : want["texts"]) {
    EmbedOptions e;
    e.prompt = c["text"];
    auto k = engine->classify(e);
    ASSERT_TRUE(k.has_value()) << k.status().to_string();
    const double l0 = c["logits"][0], l1 = c["logits"][1];
    const double p1 = 1.0 / (1.0 + std::exp(l0 - l1));
    EXPECT_NEAR(k->probs[1], p1, 1e-5) << c["text"];
    EXPECT_EQ(k->label_name, p1 > 0.5 ? "POSITIVE" : "NEGATIVE");
    EXPECT_EQ(k->prompt_tokens, static_cast<int>(c["ids"].size()));
  }
}

// roberta_cls (RobertaForSequenceClassification, three labels): /classify's softmax over
// transformers' logits, texts and pairs (48-token steps asked for, raised to the 128 positions).
TEST(EngineEncoder, ARobertaClassifierGivesTransformersProbabilities) {
  auto engine = testing::create_engine(options("roberta_cls", 48));
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->model().token_types, 1);
  const json want = expected("roberta_cls");
  const std::vector<std::string> names{"negative", "neutral", "positive"};
  int n = 0;
  std::vector<std::pair<std::promise<Expected<Embedding>>, std::vector<double>>> together;
  together.reserve(8);
  for (const char* kind : {"texts", "pairs"})
    for (const json& c : want[kind]) {
      std::vector<double> logits = c["logits"];
      EmbedOptions e;
      if (c.contains("text")) e.prompt = c["text"];
      else e.prompt_ids = c["ids"].get<std::vector<int32_t>>();
      auto k = engine->classify(e);
      ASSERT_TRUE(k.has_value()) << k.status().to_string();
      double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
      for (double v : logits) sum += std::exp(v - mx);
      for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(k->probs[l], std::exp(logits[l] - mx) / sum, 1e-5) << kind << " " << l;
      const size_t best = static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(k->label_name, names[best]);
      auto& slot = together.emplace_back();
      slot.second = logits;
      e.task = PoolingTask::classify;
      e.use_activation = false;
      auto* p = &slot.first;
      ASSERT_TRUE(engine->submit_embed(e, [p](Expected<Embedding> r) { p->set_value(std::move(r)); }));
      ++n;
    }
  EXPECT_EQ(n, 7);
  for (auto& [p, logits] : together) {
    auto r = p.get_future().get();
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(r->values[l], logits[l], kTol);
  }
}

// An encoder does not generate; its steps (16 tokens here) are raised to hold its longest prompt
// (vLLM's rule without chunked prefill), and a prompt longer than its positions is refused with
// the reason.
TEST(EngineEncoder, RefusesGenerationAndPromptsLongerThanItsPositions) {
  auto engine = testing::create_engine(options("bert_embed", 16));
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->model().max_context, 128);
  auto g = engine->generate(testing::greedy_ids({2, 10, 3}, 4));
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.status().code(), StatusCode::unsupported);
  EXPECT_NE(g.status().message().find("an encoder (bert)"), std::string::npos) << g.status().message();
  EmbedOptions fits;
  fits.prompt_ids = std::vector<int32_t>(128, 10);
  auto whole = engine->embed(fits);
  EXPECT_TRUE(whole.has_value()) << whole.status().to_string();
  EmbedOptions long_one;
  long_one.prompt_ids = std::vector<int32_t>(129, 10);
  auto e = engine->embed(long_one);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(e.status().message().find("the input has 129 tokens; the model's context is 128"), std::string::npos)
      << e.status().message();
  // Topologies an encoder cannot run.
  EngineOptions pd = testing::prefill_decode(options("bert_embed"));
  auto refused = Engine::create(pd);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("is an encoder"), std::string::npos) << refused.status().message();
  EngineOptions tp = options("bert_embed");
  tp.topology.instances.front().executors.front().tp = 2;
  refused = Engine::create(tp);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("run at tp 1"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace brigade
