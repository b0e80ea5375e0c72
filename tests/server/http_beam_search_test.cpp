// use_beam_search through the HTTP server in-process: each prompt's n choices are the beams of
// Engine::beam_search with the request's settings, best first (its equality with transformers
// is tests/actors/engine_beam_search_test.cpp), in completions and chat, streamed or not, with
// logprobs and return_token_ids; what a beam search cannot honour answers 400.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;

constexpr const char* kTemplate =
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

class BeamServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new testing::ChatTestServer(testing::model_with_template("beam", kTemplate)); }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_TRUE(server_->ok()); }

  // The engine's own beam search of `prompt` (text) with width n.
  static BeamSearchResult engine_beams(const std::string& prompt, int n, int max_tokens, bool add_bos = true) {
    BeamSearchOptions o;
    o.prompt = prompt;
    o.add_bos = add_bos;
    o.beam_width = n;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    auto r = server_->engine().beam_search(o);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : BeamSearchResult{};
  }

  static testing::ChatTestServer* server_;
};
testing::ChatTestServer* BeamServer::server_ = nullptr;

json beam_completion(const json& prompt, int n, int max_tokens) {
  return {{"model", "tiny"}, {"prompt", prompt},   {"n", n}, {"max_tokens", max_tokens},
          {"use_beam_search", true}, {"ignore_eos", true}, {"return_token_ids", true}};
}

TEST_F(BeamServer, CompletionChoicesAreTheBeamsBestFirst) {
  const BeamSearchResult want = engine_beams("Once upon a time", 3, 8);
  ASSERT_EQ(want.beams.size(), 3u);
  json req = beam_completion("Once upon a time", 3, 8);
  req["logprobs"] = 2;
  auto r = server_->post("/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 3u);
  int completion_tokens = 0;
  for (size_t k = 0; k < 3; ++k) {
    const json& c = body["choices"][k];
    EXPECT_EQ(c["index"], k);
    EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(), want.beams[k].token_ids) << "choice " << k;
    EXPECT_EQ(c["text"], want.beams[k].text);
    EXPECT_EQ(c["finish_reason"], "length");
    EXPECT_EQ(c["prompt_token_ids"].get<std::vector<int32_t>>(), want.prompt_token_ids);
    const json& lp = c["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), want.beams[k].token_ids.size());
    double sum = 0.0;
    for (size_t i = 0; i < lp["token_logprobs"].size(); ++i) {
      sum += lp["token_logprobs"][i].get<double>();
      EXPECT_EQ(lp["top_logprobs"][i].size(), 2u);
    }
    EXPECT_NEAR(sum, want.beams[k].cumulative_logprob, 1e-3);
    completion_tokens += static_cast<int>(want.beams[k].token_ids.size());
  }
  EXPECT_EQ(body["usage"]["completion_tokens"], completion_tokens);
  EXPECT_EQ(body["usage"]["prompt_tokens"], want.prompt_token_ids.size());
}

TEST_F(BeamServer, StreamedBeamsCarryTheSameText) {
  const BeamSearchResult want = engine_beams("The little dog", 2, 6);
  json req = beam_completion("The little dog", 2, 6);
  req["stream"] = true;
  std::string raw = server_->stream_raw("/v1/completions", req);
  SseSplitter split;
  std::vector<std::string> events;
  split.feed(raw, events);
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const json& c : chunk["choices"]) {
      text[c["index"].get<int>()] += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) finish[c["index"].get<int>()] = c["finish_reason"];
    }
  }
  ASSERT_EQ(text.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(text[k], want.beams[static_cast<size_t>(k)].text);
    EXPECT_EQ(finish[k], "length");
  }
}

TEST_F(BeamServer, EachPromptOfABatchRunsItsOwnSearch) {
  auto r = server_->post("/v1/completions", beam_completion(json::array({"Once upon a time", "The little dog"}), 2, 5));
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 4u);
  const BeamSearchResult second = engine_beams("The little dog", 2, 5);
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(body["choices"][2 + k]["token_ids"].get<std::vector<int32_t>>(), second.beams[static_cast<size_t>(k)].token_ids);
}

TEST_F(BeamServer, ChatChoicesAreTheBeamsOfTheRenderedPrompt) {
  const json messages = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
  auto rendered = server_->engine().format_chat({ChatTurn{"user", "Tell me a story"}}, true);
  ASSERT_TRUE(rendered.has_value()) << rendered.status().to_string();
  const BeamSearchResult want = engine_beams(*rendered, 2, 6, /*add_bos=*/false);
  auto r = server_->chat({{"messages", messages}, {"n", 2}, {"max_tokens", 6}, {"use_beam_search", true},
                          {"ignore_eos", true}, {"logprobs", true}, {"top_logprobs", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(body["choices"][k]["message"]["content"], want.beams[k].text);
    EXPECT_EQ(body["choices"][k]["logprobs"]["content"].size(), want.beams[k].token_ids.size());
  }
}

TEST_F(BeamServer, WhatABeamSearchCannotHonourIs400) {
  auto refused = [](json extra, const std::string& says) {
    json req = beam_completion("Once", 2, 4);
    for (auto& [k, v] : extra.items()) req[k] = v;
    auto r = server_->post("/v1/completions", req);
    EXPECT_EQ(r.status, 400) << req.dump() << " -> " << r.body;
    EXPECT_NE(r.body.find(says), std::string::npos) << r.body;
  };
  refused({{"stop", json::array({"."})}}, "stop");
  refused({{"response_format", {{"type", "json_object"}}}}, "structured output");
  refused({{"logit_bias", {{"5", 1.0}}}}, "logit_bias");
  refused({{"min_tokens", 2}}, "min_tokens");
  refused({{"frequency_penalty", 0.5}}, "penalty");
  refused({{"early_stopping", "sometimes"}}, "early_stopping");
  refused({{"length_penalty", "long"}}, "length_penalty");
  refused({{"n", 17}}, "n");
  // The sampling settings do not apply and are accepted; the server serves on.
  json ok = beam_completion("Once", 2, 4);
  ok["temperature"] = 0.7;
  ok["top_p"] = 0.9;
  ok["seed"] = 3;
  ok["early_stopping"] = "never";
  ok["length_penalty"] = 0.5;
  EXPECT_EQ(server_->post("/v1/completions", ok).status, 200);
}

}  // namespace
}  // namespace brigade::server
