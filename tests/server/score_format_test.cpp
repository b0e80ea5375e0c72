// /score and /rerank bodies (server/score_format.h): vLLM's request forms (1:1, 1:N, N:N, its
// other field names, token ids), the errors of bad ones, the cosine, and both responses' shapes
// (rerank sorted and cut to top_n).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/score_format.h"

namespace brigade::server {
namespace {

using nlohmann::json;

TEST(ScoreFormat, ParsesOneToOneOneToManyAndManyToMany) {
  auto one = parse_score_body(R"({"model": "m", "text_1": "a", "text_2": "b"})");
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  EXPECT_EQ(one->api, ScoreApi::score);
  EXPECT_EQ(one->model, "m");
  EXPECT_EQ(one->n_pairs(), 1u);
  auto fan = parse_score_body(R"({"text_1": "q", "text_2": ["x", "y", "z"], "priority": 3, "truncate_prompt_tokens": 5})");
  ASSERT_TRUE(fan.has_value()) << fan.status().to_string();
  EXPECT_EQ(fan->first.size(), 1u);
  EXPECT_EQ(fan->n_pairs(), 3u);
  const std::vector<EmbedOptions> o = fan->embed_options();
  ASSERT_EQ(o.size(), 4u) << "the shared query is embedded once";
  EXPECT_EQ(o[0].prompt, "q");
  EXPECT_EQ(o[3].prompt, "z");
  EXPECT_EQ(o[2].priority, -3) << "vLLM's lower-first priority, negated";
  EXPECT_EQ(o[1].truncate_prompt_tokens, 5);
  auto many = parse_score_body(R"({"text_1": ["a", "b"], "text_2": ["c", "d"]})");
  ASSERT_TRUE(many.has_value());
  EXPECT_EQ(many->first.size(), 2u);
  EXPECT_EQ(many->embed_options().size(), 4u);
  auto ids = parse_score_body(R"({"text_1": [1, 2, 3], "text_2": [[4, 5], [6]]})");
  ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
  EXPECT_EQ(ids->first[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids->embed_options()[2].prompt_ids, (std::vector<int32_t>{6}));
  auto context = parse_score_body(R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": -1})");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(context->truncate_prompt_tokens, -1) << "route() resolves it to the context";
}

TEST(ScoreFormat, ReadsVllmsOtherNamesForThePairs) {
  for (const char* body : {R"({"queries": "q", "documents": ["a", "b"]})", R"({"queries": "q", "items": ["a", "b"]})",
                           R"({"data_1": "q", "data_2": ["a", "b"]})"}) {
    auto r = parse_score_body(body);
    ASSERT_TRUE(r.has_value()) << body << ": " << r.status().to_string();
    EXPECT_EQ(r->first[0].text, "q");
    EXPECT_EQ(r->n_pairs(), 2u) << body;
  }
}

TEST(ScoreFormat, BadScoreBodiesNameTheField) {
  const auto message = [](std::string_view body, int max_inputs = kMaxEmbeddingInputs) {
    auto r = parse_score_body(body, max_inputs);
    EXPECT_FALSE(r.has_value()) << body;
    return r ? std::string() : r.status().message();
  };
  EXPECT_NE(message("[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(message(R"({"model": "m"})").find("'text_1' and 'text_2' are required"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a"})").find("'text_2' is required"), std::string::npos);
  EXPECT_NE(message(R"({"text_2": "a"})").find("'text_1' is required"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})").find("1:1, 1:N or N:N"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": [], "text_2": "b"})").find("empty array"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": ""})").find("empty"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": ["b", ""]})").find("text_2[1]"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": 7, "text_2": "b"})").find("text_1"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": ["b", [1]]})").find("mixes"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": {"content": []}})").find("multimodal"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": "b", "model": 3})").find("'model'"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": 0})").find("truncate_prompt_tokens"),
            std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": "b", "priority": "high"})").find("priority"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": "b", "use_activation": 1})").find("use_activation"), std::string::npos);
  EXPECT_NE(message(R"({"text_1": "a", "text_2": ["b", "c", "d"]})", 2).find("at most 2"), std::string::npos);
  EXPECT_EQ(parse_score_body(R"({"text_1": "a", "text_2": {"content": []}})").status().code(), StatusCode::unsupported);
  EXPECT_TRUE(parse_score_body(R"({"text_1": "a", "text_2": "b", "use_activation": true, "mm_processor_kwargs": {}})")
                  .has_value())
      << "vLLM's fields that do not apply to a cosine are accepted";
}

TEST(ScoreFormat, ParsesRerankBodies) {
  auto r = parse_rerank_body(R"({"model": "m", "query": "q", "documents": ["a", "b", "c"], "top_n": 2,
                                 "return_documents": false})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->api, ScoreApi::rerank);
  EXPECT_EQ(r->first.size(), 1u);
  EXPECT_EQ(r->n_pairs(), 3u);
  EXPECT_EQ(r->top_n, 2);
  auto all = parse_rerank_body(R"({"query": [1, 2], "documents": [[3], [4, 5]]})");
  ASSERT_TRUE(all.has_value()) << all.status().to_string();
  EXPECT_EQ(all->top_n, 0);
  EXPECT_EQ(all->first[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(parse_rerank_body(R"({"query": "q", "documents": ["a"], "top_n": 10})").has_value())
      << "more than the documents: all of them";
}

TEST(ScoreFormat, BadRerankBodiesNameTheField) {
  const auto message = [](std::string_view body) {
    auto r = parse_rerank_body(body);
    EXPECT_FALSE(r.has_value()) << body;
    if (r) return std::string();
    EXPECT_TRUE(r.status().code() == StatusCode::invalid_argument || r.status().code() == StatusCode::unsupported);
    return r.status().message();
  };
  EXPECT_NE(message(R"({"documents": ["a"]})").find("'query' is required"), std::string::npos);
  EXPECT_NE(message(R"({"query": "q"})").find("'documents' is required"), std::string::npos);
  EXPECT_NE(message(R"({"query": "q", "documents": []})").find("empty array"), std::string::npos);
  EXPECT_NE(message(R"({"query": "q", "documents": ["a", ""]})").find("documents[1]"), std::string::npos);
  EXPECT_NE(message(R"({"query": "", "documents": ["a"]})").find("'query' is empty"), std::string::npos);
  EXPECT_NE(message(R"({"query": ["q1", "q2"], "documents": ["a"]})").find("one string"), std::string::npos);
  EXPECT_NE(message(R"({"query": "q", "documents": ["a"], "top_n": -1})").find("'top_n' must be in [0"),
            std::string::npos);
  EXPECT_NE(message(R"({"query": "q", "documents": ["a"], "top_n": 1.5})").find("top_n"), std::string::npos);
  EXPECT_NE(message(R"({"query": "q", "documents": ["a"], "return_documents": "yes"})").find("return_documents"),
            std::string::npos);
  EXPECT_NE(message(R"({"query": "q", "documents": [{"content": []}]})").find("multimodal"), std::string::npos);
}

TEST(ScoreFormat, CosineIsTorchs) {
  const std::vector<float> a = {1, 0}, b = {0, 2}, c = {3, 4}, zero = {0, 0};
  EXPECT_DOUBLE_EQ(cosine_similarity(a, a), 1.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(a, b), 0.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(a, c), 0.6) << "scale does not matter";
  EXPECT_DOUBLE_EQ(cosine_similarity(c, std::vector<float>{-3, -4}), -1.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(zero, c), 0.0) << "the 1e-8 floor, not a NaN";
}

TEST(ScoreFormat, PairsAQueryWithEveryDocumentOrEachWithEach) {
  const std::vector<Embedding> fan = {{{1, 0}, 2}, {{1, 0}, 3}, {{0, 1}, 4}, {{3, 4}, 5}};
  const std::vector<PairScore> s = pair_scores(1, fan);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0].score, 1.0);
  EXPECT_DOUBLE_EQ(s[1].score, 0.0);
  EXPECT_DOUBLE_EQ(s[2].score, 0.6);
  EXPECT_EQ(s[2].n_tokens, 2 + 5) << "the query's tokens count in every pair, as vLLM's usage";
  const std::vector<PairScore> n = pair_scores(2, fan);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_DOUBLE_EQ(n[0].score, 0.0) << "first[0] with second[0]";
  EXPECT_DOUBLE_EQ(n[1].score, 0.6) << "first[1] with second[1]";
  EXPECT_EQ(n[1].n_tokens, 3 + 5);
}

TEST(ScoreFormat, ScoreResponseHasVllmsShape) {
  const std::vector<PairScore> s = {{0.5, 4}, {-0.25, 6}};
  const json j = json::parse(score_body(s, "score-7", 1700000000, "tiny"));
  EXPECT_EQ(j.at("id"), "score-7");
  EXPECT_EQ(j.at("object"), "list");
  EXPECT_EQ(j.at("created"), 1700000000);
  EXPECT_EQ(j.at("model"), "tiny");
  ASSERT_EQ(j.at("data").size(), 2u);
  EXPECT_EQ(j.at("data")[1], json({{"index", 1}, {"object", "score"}, {"score", -0.25}}));
  EXPECT_EQ(j.at("usage"), json({{"prompt_tokens", 10}, {"total_tokens", 10}, {"completion_tokens", 0}}));
}

TEST(ScoreFormat, RerankSortsByScoreAndKeepsTopN) {
  const std::vector<PairScore> s = {{0.1, 3}, {0.9, 4}, {0.5, 5}, {0.9, 6}};
  std::vector<PromptInput> docs = {{"a", {}}, {"b", {}}, {"", {7, 8}}, {"d", {}}};
  const json all = json::parse(rerank_body(s, docs, 0, "rerank-1", "tiny"));
  EXPECT_EQ(all.at("id"), "rerank-1");
  EXPECT_EQ(all.at("model"), "tiny");
  EXPECT_EQ(all.at("usage"), json({{"prompt_tokens", 18}, {"total_tokens", 18}}));
  ASSERT_EQ(all.at("results").size(), 4u);
  std::vector<int> order;
  for (const json& r : all.at("results")) order.push_back(r.at("index").get<int>());
  EXPECT_EQ(order, (std::vector<int>{1, 3, 2, 0})) << "highest first; a tie keeps document order";
  EXPECT_EQ(all.at("results")[0], json({{"index", 1}, {"document", {{"text", "b"}}}, {"relevance_score", 0.9}}));
  EXPECT_TRUE(all.at("results")[2].at("document").at("text").is_null()) << "a document sent as token ids";
  const json top = json::parse(rerank_body(s, docs, 2, "rerank-2", "tiny"));
  ASSERT_EQ(top.at("results").size(), 2u);
  EXPECT_EQ(top.at("results")[1].at("index"), 3);
  EXPECT_EQ(top.at("usage").at("total_tokens"), 18) << "usage counts every document, not only the top_n";
  EXPECT_EQ(json::parse(rerank_body(s, docs, 9, "rerank-3", "tiny")).at("results").size(), 4u);
}

}  // namespace
}  // namespace brigade::server
