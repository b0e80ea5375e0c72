// POST /classify, and /score and /rerank with a cross-encoder, through the real server
// (in-process, any port) on the transformers fixtures of scripts/make_classifier_fixtures.py: the
// probabilities and scores are transformers' (expected.json), the responses vLLM's, generation
// routes on a checkpoint without an lm_head say why not, and bad requests answer 400.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "models/mapped_file.h"
#include "tests/models/hf_fixture.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;

std::string dir_of(const std::string& name) { return brigade::testing::fixture_dir("classifier/" + name); }
json expected(const std::string& name) { return json::parse(read_text_file(dir_of(name) + "/expected.json").value()); }

constexpr const char* kRerankerOverrides =
    R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["0", "1"],
        "is_original_qwen3_reranker": true})";

// The server (model id "tiny") over a fixture, with hf_overrides and an API key when given.
class ClassifyServer : public testing::JsonTestServer {
 public:
  explicit ClassifyServer(const std::string& name, const std::string& overrides = "", const std::string& key = "",
                          const std::string& chat_template = "")
      : JsonTestServer(key) {
    EngineOptions o = brigade::testing::test_engine_options(dir_of(name), 1);
    o.topology.instances.front().kv.memory_mb = 16;
    o.hf_overrides = overrides;
    o.chat_template = chat_template;
    served_.engine = brigade::testing::create_engine(o);
    if (!served_.engine) return;
    ServerOptions options;
    options.port = 0;
    options.model_name = "tiny";
    options.api_key = key;
    auto srv = HttpServer::start(*served_.engine, options);
    EXPECT_TRUE(srv.has_value()) << srv.status().to_string();
    if (srv) served_.server = std::move(*srv);
  }
};

std::vector<double> softmax(const json& logits) {
  std::vector<double> out;
  double m = -1e300, sum = 0;
  for (const json& v : logits) m = std::max(m, v.get<double>());
  for (const json& v : logits) sum += std::exp(v.get<double>() - m);
  for (const json& v : logits) out.push_back(std::exp(v.get<double>() - m) / sum);
  return out;
}

TEST(ServerClassify, ClassifyAnswersVllmsResponseWithTransformersProbabilities) {
  ClassifyServer s("qwen3_seq_cls");
  ASSERT_TRUE(s.ok());
  const json want = expected("qwen3_seq_cls");
  const std::vector<std::string> names{"negative", "neutral", "positive"};
  // Texts in one request, token ids in another (OpenAI's input holds one kind).
  for (const char* kind : {"texts", "prompts"}) {
    json inputs = json::array();
    int64_t tokens = 0;
    for (const json& c : want[kind]) {
      inputs.push_back(kind == std::string("texts") ? c["text"] : c["ids"]);
      tokens += static_cast<int64_t>(c["ids"].size());
    }
    for (const std::string path : {"/classify", "/v1/classify"}) {
      const json r = s.ok_post(path, {{"model", "tiny"}, {"input", inputs}});
      EXPECT_TRUE(r["id"].get<std::string>().starts_with("classify-")) << r.dump();
      EXPECT_EQ(r["object"], "list");
      EXPECT_EQ(r["model"], "tiny");
      EXPECT_TRUE(r["created"].is_number_integer());
      ASSERT_EQ(r["data"].size(), inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        const json& d = r["data"][i];
        EXPECT_EQ(d["index"], i);
        EXPECT_EQ(d["num_classes"], 3);
        const auto probs = softmax(want[kind][i]["logits"]);
        for (size_t l = 0; l < 3; ++l) EXPECT_NEAR(d["probs"][l].get<double>(), probs[l], 1e-4) << path << " " << i;
        const size_t best = static_cast<size_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
        EXPECT_EQ(d["label"], names[best]) << kind << " " << i;
      }
      EXPECT_EQ(r["usage"]["prompt_tokens"], tokens);
      EXPECT_EQ(r["usage"]["total_tokens"], tokens);
      EXPECT_EQ(r["usage"]["completion_tokens"], 0);
    }
  }
  // use_activation false (and vLLM's older name) gives the logits.
  for (const char* field : {"use_activation", "activation"}) {
    const json raw = s.ok_post("/classify", {{"input", want["texts"][0]["text"]}, {field, false}});
    for (size_t l = 0; l < 3; ++l)
      EXPECT_NEAR(raw["data"][0]["probs"][l].get<double>(), want["texts"][0]["logits"][l].get<double>(), 1e-4) << field;
  }
  // A single string truncated to 3 tokens as vLLM truncates a pooling request's text, from the
  // right (this tokenizer adds no special tokens): the same as sending its first 3 ids.
  const json& c = want["texts"][0];
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  const json cut = s.ok_post("/classify", {{"input", c["text"]}, {"truncate_prompt_tokens", 3}});
  const json head = s.ok_post("/classify", {{"input", std::vector<int32_t>(ids.begin(), ids.begin() + 3)}});
  EXPECT_EQ(cut["data"][0]["probs"], head["data"][0]["probs"]);
  EXPECT_EQ(cut["usage"]["prompt_tokens"], 3);
}

TEST(ServerClassify, GenerationRoutesSayTheCheckpointDoesNotGenerate) {
  ClassifyServer s("qwen3_seq_cls");
  ASSERT_TRUE(s.ok());
  const std::string why = "sequence classifier (Qwen3ForSequenceClassification) with no lm_head";
  EXPECT_NE(s.error("/v1/completions", {{"prompt", "a"}}).find(why), std::string::npos);
  EXPECT_NE(s.error("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "a"}}}}}).find(why),
            std::string::npos);
  EXPECT_NE(s.error("/v1/responses", {{"input", "a"}}).find(why), std::string::npos);
  // Three labels make no cross-encoder score.
  EXPECT_NE(s.error("/score", {{"text_1", "a"}, {"text_2", "b"}}).find("this one has 3 (use /classify)"),
            std::string::npos);
}

// A one-label classifier scores each pair as a cross-encoder: the pair tokenized as the
// tokenizer's pair (<|begin_of_text|> q <|begin_of_text|> d), the sigmoid of its logit.
TEST(ServerClassify, ScoreAndRerankCrossEncodeWithAOneLabelClassifier) {
  ClassifyServer s("llama_seq_cls");
  ASSERT_TRUE(s.ok());
  const json want = expected("llama_seq_cls");
  json first = json::array(), second = json::array();
  int64_t tokens = 0;
  for (const json& p : want["pairs"]) {
    first.push_back(p["text_1"]);
    second.push_back(p["text_2"]);
    tokens += static_cast<int64_t>(p["ids"].size());
  }
  const json r = s.ok_post("/score", {{"text_1", first}, {"text_2", second}});
  ASSERT_EQ(r["data"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r["data"][i]["object"], "score");
    EXPECT_NEAR(r["data"][i]["score"].get<double>(), want["pairs"][i]["score"].get<double>(), 1e-5) << i;
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], tokens);
  const json raw = s.ok_post("/v1/score", {{"text_1", first}, {"text_2", second}, {"use_activation", false}});
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(raw["data"][i]["score"].get<double>(), want["pairs"][i]["logit"].get<double>(), 1e-4) << i;
  // Pairs 0 and 1 share their query: rerank them, best first.
  const json& p0 = want["pairs"][0];
  const json& p1 = want["pairs"][1];
  const json rr = s.ok_post("/rerank", {{"query", p0["text_1"]}, {"documents", {p0["text_2"], p1["text_2"]}}});
  ASSERT_EQ(rr["results"].size(), 2u);
  const bool first_wins = p0["score"].get<double>() >= p1["score"].get<double>();
  EXPECT_EQ(rr["results"][0]["index"], first_wins ? 0 : 1);
  EXPECT_NEAR(rr["results"][0]["relevance_score"].get<double>(),
              std::max(p0["score"].get<double>(), p1["score"].get<double>()), 1e-5);
  EXPECT_EQ(rr["results"][0]["document"]["text"], first_wins ? p0["text_2"] : p1["text_2"]);
  // /classify on a one-label model: the sigmoid, LABEL_0.
  const json k = s.ok_post("/classify", {{"input", want["texts"][0]["text"]}});
  EXPECT_EQ(k["data"][0]["label"], "LABEL_0");
  EXPECT_NEAR(k["data"][0]["probs"][0].get<double>(), 1.0 / (1.0 + std::exp(-want["texts"][0]["logits"][0].get<double>())),
              1e-5);
}

// Qwen3-Reranker as vLLM serves it: a causal LM with --hf-overrides; /score joins the two texts
// (use_pad_token false) and answers the model card's probability; completions still work.
TEST(ServerClassify, ARerankerFromACausalLmServesScoresAndCompletions) {
  ClassifyServer s("qwen3_reranker", kRerankerOverrides);
  ASSERT_TRUE(s.ok());
  const json want = expected("qwen3_reranker");
  for (const json& p : want["pairs"]) {
    const json r = s.ok_post("/score", {{"text_1", p["text_1"]}, {"text_2", p["text_2"]}});
    EXPECT_NEAR(r["data"][0]["score"].get<double>(), p["score"].get<double>(), 1e-5) << p["text_2"];
    EXPECT_EQ(r["usage"]["prompt_tokens"], p["ids"].size());
  }
  const json c = s.ok_post("/v1/completions", {{"prompt", want["greedy"][0]["ids"]}, {"max_tokens", 6}, {"temperature", 0},
                                               {"return_token_ids", true}});
  EXPECT_EQ(c["choices"][0]["token_ids"], want["greedy"][0]["tokens"]) << c.dump();
}

// vLLM's chat form of /classify and /v1/embeddings: the messages rendered by the chat template
// (here the built-in ChatML; the qwen2 fixture tokenizer has its tokens), without a generation
// prompt unless asked, give what the rendered ids give (/tokenize's chat form renders the same).
TEST(ServerClassify, TheChatFormClassifiesAndEmbedsTheRenderedMessages) {
  ClassifyServer s("qwen3_seq_cls", "", "", "chatml");
  ASSERT_TRUE(s.ok());
  const json messages = {{{"role", "system"}, {"content", "Rate the sentiment."}},
                         {{"role", "user"}, {"content", "The quick brown fox jumps over the lazy dog."}}};
  for (const bool generation_prompt : {false, true}) {
    const json tokenized = s.ok_post("/tokenize", {{"messages", messages}, {"add_generation_prompt", generation_prompt}});
    const json ids = tokenized["tokens"];
    ASSERT_GT(ids.size(), 10u);
    json chat = {{"messages", messages}};
    if (generation_prompt) chat["add_generation_prompt"] = true;
    const json by_chat = s.ok_post("/classify", chat);
    const json by_ids = s.ok_post("/classify", {{"input", ids}});
    EXPECT_EQ(by_chat["data"][0]["probs"], by_ids["data"][0]["probs"]) << generation_prompt;
    EXPECT_EQ(by_chat["usage"]["prompt_tokens"], ids.size());
    const json e_chat = s.ok_post("/v1/embeddings", chat);
    const json e_ids = s.ok_post("/v1/embeddings", {{"input", ids}});
    EXPECT_EQ(e_chat["data"][0]["embedding"], e_ids["data"][0]["embedding"]) << generation_prompt;
  }
  EXPECT_NE(s.error("/classify", {{"messages", messages}, {"input", "a"}}).find("not both"), std::string::npos);
  EXPECT_NE(s.error("/v1/embeddings", {{"messages", json::array()}}).find("messages"), std::string::npos);
}

TEST(ServerClassify, BadRequestsAndModelsWithoutAClassifierAnswer400) {
  {
    ClassifyServer s("qwen3_seq_cls", "", "k3y");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s.call("POST", "/classify", json{{"input", "a"}}.dump(), "").status, 401);
    EXPECT_NE(s.error("/classify", json::object()).find("'input' is required"), std::string::npos);
    EXPECT_NE(s.error("/classify", {{"input", json::array()}}).find("empty array"), std::string::npos);
    EXPECT_NE(s.error("/classify", {{"input", 5}}).find("input"), std::string::npos);
    EXPECT_NE(s.error("/classify", {{"input", "a"}, {"use_activation", "no"}}).find("use_activation"), std::string::npos);
    EXPECT_NE(s.error("/classify", {{"input", {1, 100000}}}).find("100000"), std::string::npos);
  }
  ClassifyServer causal("qwen3_reranker");
  ASSERT_TRUE(causal.ok());
  EXPECT_NE(causal.error("/classify", {{"input", "a"}}).find("has no classifier"), std::string::npos);
}

}  // namespace
}  // namespace brigade::server
