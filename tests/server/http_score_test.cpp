// POST /score and /rerank through the real server (in-process, any port) on a tiny synthetic
// model: every score is the cosine of the vectors /v1/embeddings gives for the same inputs, rerank
// sorts and cuts, the API key guards the routes, and bad requests answer 400.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "models/make_model.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A tiny synthetic model under the temp dir, named by `tag`.
std::string tiny_model(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("brigade_score_" + tag + "_" + std::to_string(::getpid()));
  EXPECT_TRUE(write_synthetic_model(brigade::testing::tiny_llama(512, 256, 13), d.string()).is_ok());
  return d.string();
}

// The server (model id "tiny") over an engine on `model`, with `api_key` when not empty.
class ScoreServer : public testing::JsonTestServer {
 public:
  explicit ScoreServer(const std::string& model, const std::string& api_key = "") : JsonTestServer(api_key) {
    ServerOptions options;
    options.api_key = api_key;
    testing::start_test_server(served_, model, options);
  }
};

double cosine(const json& a, const json& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const double x = a[k].get<double>(), y = b[k].get<double>();
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  return dot / (std::sqrt(aa) * std::sqrt(bb));
}

const std::string kQuery = "Which station cooks the sauces?";
const std::vector<std::string> kDocs = {"The saucier makes the sauces.", "The patissier bakes the bread and cakes.",
                                        "Every station answers to the chef.", "sauces sauces sauces"};

class ServerScore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ScoreServer(tiny_model("suite")); }
  static void TearDownTestSuite() { delete server_; }
  const ScoreServer& s() const { return *server_; }

  // /v1/embeddings of the query then the documents (floats), and their prompt tokens.
  std::pair<json, std::vector<int>> embeddings() const {
    json input = json::array({kQuery});
    for (const auto& d : kDocs) input.push_back(d);
    const json e = s().ok_post("/v1/embeddings", {{"model", "tiny"}, {"input", input}, {"encoding_format", "float"}});
    json vectors = json::array();
    std::vector<int> tokens;
    for (const json& d : e["data"]) vectors.push_back(d["embedding"]);
    for (const auto& t : input) {
      const json tok = s().ok_post("/tokenize", {{"prompt", t}});
      tokens.push_back(tok["count"].get<int>());
    }
    return {vectors, tokens};
  }

  static ScoreServer* server_;
};
ScoreServer* ServerScore::server_ = nullptr;

TEST_F(ServerScore, ScoresAreTheCosineOfTheEmbeddingsEndpointsVectors) {
  ASSERT_TRUE(s().ok());
  const auto [vec, tokens] = embeddings();
  ASSERT_EQ(vec.size(), kDocs.size() + 1);
  for (const char* path : {"/score", "/v1/score"}) {
    const json one_to_n = s().ok_post(path, {{"model", "tiny"}, {"text_1", kQuery}, {"text_2", kDocs}});
    EXPECT_EQ(one_to_n["object"], "list");
    EXPECT_EQ(one_to_n["model"], "tiny");
    EXPECT_TRUE(one_to_n["id"].get<std::string>().starts_with("score-"));
    EXPECT_GT(one_to_n["created"].get<int64_t>(), 0);
    ASSERT_EQ(one_to_n["data"].size(), kDocs.size());
    int n_tokens = 0;
    for (size_t i = 0; i < kDocs.size(); ++i) {
      const json& d = one_to_n["data"][i];
      EXPECT_EQ(d["index"], i);
      EXPECT_EQ(d["object"], "score");
      EXPECT_NEAR(d["score"].get<double>(), cosine(vec[0], vec[i + 1]), 1e-6) << path << " pair " << i;
      n_tokens += tokens[0] + tokens[i + 1];
    }
    EXPECT_EQ(one_to_n["usage"]["prompt_tokens"], n_tokens) << "the query counts in every pair, as vLLM's";
    EXPECT_EQ(one_to_n["usage"]["total_tokens"], n_tokens);
  }
  // N:N pairs each with each; 1:1 is one pair.
  const json n_to_n = s().ok_post("/v1/score", {{"text_1", {kDocs[0], kDocs[1]}}, {"text_2", {kDocs[2], kDocs[3]}}});
  ASSERT_EQ(n_to_n["data"].size(), 2u);
  EXPECT_NEAR(n_to_n["data"][0]["score"].get<double>(), cosine(vec[1], vec[3]), 1e-6);
  EXPECT_NEAR(n_to_n["data"][1]["score"].get<double>(), cosine(vec[2], vec[4]), 1e-6);
  const json one = s().ok_post("/v1/score", {{"text_1", kDocs[0]}, {"text_2", kDocs[0]}});
  EXPECT_NEAR(one["data"][0]["score"].get<double>(), 1.0, 1e-6);
  EXPECT_EQ(one["model"], "tiny") << "no model sent: the served name";
}

TEST_F(ServerScore, RerankSortsByRelevanceAndKeepsTopN) {
  ASSERT_TRUE(s().ok());
  const auto [vec, tokens] = embeddings();
  std::vector<double> want;
  for (size_t i = 0; i < kDocs.size(); ++i) want.push_back(cosine(vec[0], vec[i + 1]));
  for (const char* path : {"/rerank", "/v1/rerank", "/v2/rerank"}) {
    const json r = s().ok_post(path, {{"model", "tiny"}, {"query", kQuery}, {"documents", kDocs}});
    EXPECT_TRUE(r["id"].get<std::string>().starts_with("rerank-"));
    EXPECT_EQ(r["model"], "tiny");
    ASSERT_EQ(r["results"].size(), kDocs.size()) << path;
    double last = 2;
    for (const json& res : r["results"]) {
      const size_t i = res["index"].get<size_t>();
      ASSERT_LT(i, kDocs.size());
      EXPECT_EQ(res["document"]["text"], kDocs[i]);
      EXPECT_NEAR(res["relevance_score"].get<double>(), want[i], 1e-6);
      EXPECT_LE(res["relevance_score"].get<double>(), last) << "highest first";
      last = res["relevance_score"].get<double>();
    }
    int n_tokens = 0;
    for (size_t i = 0; i < kDocs.size(); ++i) n_tokens += tokens[0] + tokens[i + 1];
    EXPECT_EQ(r["usage"]["total_tokens"], n_tokens);
    EXPECT_EQ(r["usage"]["prompt_tokens"], n_tokens);
  }
  const json all = s().ok_post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}});
  const json top = s().ok_post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}, {"top_n", 2}});
  ASSERT_EQ(top["results"].size(), 2u);
  EXPECT_EQ(top["results"][0], all["results"][0]);
  EXPECT_EQ(top["results"][1], all["results"][1]);
  EXPECT_EQ(s().ok_post("/v1/rerank", {{"query", kQuery}, {"documents", kDocs}, {"top_n", 99}})["results"].size(),
            kDocs.size());
}

TEST_F(ServerScore, TruncationKeepsTheLastTokens) {
  ASSERT_TRUE(s().ok());
  std::vector<int32_t> longer, tail;
  for (int i = 0; i < 400; ++i) longer.push_back(1 + (i * 7) % 500);  // past the 256-token context
  tail.assign(longer.end() - 30, longer.end());
  EXPECT_NE(s().error("/v1/score", {{"text_1", longer}, {"text_2", tail}}).find("context"), std::string::npos);
  const json cut = s().ok_post("/v1/score", {{"text_1", longer}, {"text_2", tail}, {"truncate_prompt_tokens", 30}});
  EXPECT_NEAR(cut["data"][0]["score"].get<double>(), 1.0, 1e-5) << "the same 30 tokens";
  EXPECT_EQ(cut["usage"]["prompt_tokens"], 60);
  const json context = s().ok_post("/v1/rerank", {{"query", longer}, {"documents", {tail}}, {"truncate_prompt_tokens", -1}});
  EXPECT_EQ(context["usage"]["total_tokens"], 256 + 30) << "-1: the model's context";
  const json e = s().ok_post("/v1/embeddings", {{"input", longer}, {"truncate_prompt_tokens", 30}, {"encoding_format", "float"}});
  EXPECT_EQ(e["usage"]["prompt_tokens"], 30) << "/v1/embeddings takes vLLM's truncate_prompt_tokens too";
}

TEST_F(ServerScore, BadRequestsAre400WithTheReason) {
  ASSERT_TRUE(s().ok());
  EXPECT_NE(s().error("/v1/score", {{"text_1", "a"}}).find("'text_2' is required"), std::string::npos);
  EXPECT_NE(s().error("/score", {{"text_1", {"a", "b"}}, {"text_2", {"c", "d", "e"}}}).find("1:1, 1:N or N:N"),
            std::string::npos);
  EXPECT_NE(s().error("/score", {{"text_1", 5}, {"text_2", "b"}}).find("text_1"), std::string::npos);
  EXPECT_NE(s().error("/v1/rerank", {{"query", "q"}, {"documents", json::array()}}).find("empty"), std::string::npos);
  EXPECT_NE(s().error("/v1/rerank", {{"query", "q"}, {"documents", {"a"}}, {"top_n", -1}}).find("top_n"),
            std::string::npos);
  EXPECT_NE(s().error("/v2/rerank", {{"documents", {"a"}}}).find("'query' is required"), std::string::npos);
  EXPECT_NE(s().error("/rerank", {{"query", "q"}, {"documents", {"a", ""}}}).find("documents[1]"), std::string::npos);
  EXPECT_NE(s().error("/v1/score", {{"text_1", "a"}, {"text_2", {1, 99999}}}).find("vocabulary"), std::string::npos)
      << "the engine's error reaches the client";
  EXPECT_EQ(s().call("GET", "/v1/score", "", "").status, 405);
  EXPECT_EQ(s().call("POST", "/v1/rerank", "not json", "").status, 400);
  // The server still scores after the errors.
  EXPECT_EQ(s().ok_post("/score", {{"text_1", "a"}, {"text_2", "b"}})["data"].size(), 1u);
}

TEST(ServerScoreRoutes, ApiKeyGuardsEveryScoreRouteAnd404ListsThem) {
  ScoreServer s(tiny_model("key"), "sekret");
  ASSERT_TRUE(s.ok());
  const std::string score = json({{"text_1", "a"}, {"text_2", "b"}}).dump();
  const std::string rerank = json({{"query", "a"}, {"documents", {"b"}}}).dump();
  for (const char* path : {"/score", "/v1/score", "/rerank", "/v1/rerank", "/v2/rerank"}) {
    const std::string& body = std::string(path).ends_with("score") ? score : rerank;
    EXPECT_EQ(s.call("POST", path, body, "").status, 401) << path;
    EXPECT_EQ(s.call("POST", path, body, "wrong").status, 401) << path;
    EXPECT_EQ(s.call("POST", path, body, "sekret").status, 200) << path;
  }
  const ClientResponse missing = s.call("POST", "/v1/nothing", "{}", "sekret");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("POST /v1/score"), std::string::npos) << missing.body;
  EXPECT_NE(missing.body.find("POST /v2/rerank"), std::string::npos) << missing.body;
}

TEST(ServerScoreRoutes, AModelThatServesNoEmbeddingsAnswers400) {
  // A sentence-transformers Pooling module brigade does not run turns embeddings off.
  const std::string model = tiny_model("nopool");
  std::ofstream(fs::path(model) / "modules.json")
      << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  fs::create_directories(fs::path(model) / "1_Pooling");
  std::ofstream(fs::path(model) / "1_Pooling" / "config.json") << R"({"pooling_mode_max_tokens": true})";
  ScoreServer s(model);
  ASSERT_TRUE(s.ok());
  const std::string embed = s.error("/v1/embeddings", {{"input", "a"}});
  EXPECT_NE(embed.find("serves no embeddings"), std::string::npos) << embed;
  EXPECT_EQ(s.error("/v1/score", {{"text_1", "a"}, {"text_2", "b"}}), embed) << "the same reason as /v1/embeddings";
  EXPECT_EQ(s.error("/v1/rerank", {{"query", "a"}, {"documents", {"b", "c"}}}), embed);
}

}  // namespace
}  // namespace brigade::server
