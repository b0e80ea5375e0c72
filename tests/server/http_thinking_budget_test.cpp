// thinking_token_budget through the HTTP server in-process (vLLM's request field; its
// --reasoning-config reasoning_end_str as ServerOptions): the reasoning parser finds the block
// (the template leaves `<think>` open), the first `budget` tokens are the model's free greedy ones,
// then `</think>` (or reasoning_end_str's tokens) is forced and the rest is the answer; a prompt
// that closed the block has nothing to cap; requests and server options that cannot work are
// refused by name. The synthetic model's greedy tokens are compared with its own free run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::model_with_template;

constexpr const char* kOpens =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n";
constexpr const char* kCloses =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n\n</think>\n\n";

json request(json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
               {"max_tokens", 12},
               {"temperature", 0},
               {"return_token_ids", true}};
  body.update(extra);
  return body;
}

json choice_of(const ClientResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body)["choices"][0] : json();
}

std::vector<int32_t> ids_of(const json& choice) {
  return choice.contains("token_ids") ? choice["token_ids"].get<std::vector<int32_t>>() : std::vector<int32_t>{};
}

TEST(ServerThinkingBudget, TheCloseIsForcedAfterTheBudget) {
  const std::string model = model_with_template("budget_open", kOpens);
  const auto [open, close] = testing::add_think_tokens(model);
  testing::ChatTestServer s(model, "", "auto");
  ASSERT_TRUE(s.ok());
  json no_close = {{"logit_bias", {{std::to_string(close), -100}}}};  // the model never closes it itself
  const json free = choice_of(s.chat(request(no_close)));
  const std::vector<int32_t> free_ids = ids_of(free);
  ASSERT_EQ(free_ids.size(), 12u) << free;
  EXPECT_TRUE(free["message"]["content"].is_null()) << "cut while thinking: " << free;

  json budgeted = no_close;
  budgeted["thinking_token_budget"] = 4;
  const json c = choice_of(s.chat(request(budgeted)));
  const std::vector<int32_t> ids = ids_of(c);
  ASSERT_EQ(ids.size(), 12u) << c;
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 4), std::vector<int32_t>(free_ids.begin(), free_ids.begin() + 4));
  EXPECT_EQ(ids[4], close);
  ASSERT_TRUE(c["message"]["reasoning_content"].is_string()) << c;
  ASSERT_TRUE(c["message"]["content"].is_string()) << "the answer follows the forced close: " << c;
  EXPECT_FALSE(c["message"]["content"].get<std::string>().empty()) << c;

  // Streamed: the same split.
  std::string reasoning, content;
  for (const json& chunk : s.chat_stream(request(budgeted))) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, c["message"]["reasoning_content"]);
  EXPECT_EQ(content, c["message"]["content"]);

  budgeted["thinking_token_budget"] = 0;
  EXPECT_EQ(ids_of(choice_of(s.chat(request(budgeted)))).front(), close) << "a budget of 0 closes at once";

  // The Responses API passes it on: the answer is a message item after the reasoning.
  auto kinds = [&](json extra) {
    json body = {{"input", "Why is the sky blue?"}, {"max_output_tokens", 12}, {"temperature", 0}};
    body.update(extra);
    const ClientResponse r = s.post("/v1/responses", body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> out;
    const json response = r.status == 200 ? json::parse(r.body) : json();
    if (response.contains("output"))
      for (const json& item : response["output"]) out.push_back(item["type"]);
    return out;
  };
  EXPECT_EQ(kinds(no_close), std::vector<std::string>{"reasoning"});
  budgeted["thinking_token_budget"] = 4;
  EXPECT_EQ(kinds(budgeted), (std::vector<std::string>{"reasoning", "message"}));
}

// Qwen3's enable_thinking=false: the prompt closed the block; the budget has nothing to cap.
TEST(ServerThinkingBudget, AClosedBlockIsLeftAlone) {
  const std::string model = model_with_template("budget_closed", kCloses);
  const auto [open, close] = testing::add_think_tokens(model);
  testing::ChatTestServer s(model, "", "qwen3");
  ASSERT_TRUE(s.ok());
  const json bias = {{"logit_bias", {{std::to_string(close), -100}, {std::to_string(open), -100}}}};
  json budgeted = bias;
  budgeted["thinking_token_budget"] = 0;
  EXPECT_EQ(ids_of(choice_of(s.chat(request(budgeted)))), ids_of(choice_of(s.chat(request(bias)))));
}

// The server's reasoning_end_str (vLLM's --reasoning-config) is what is forced, token by token.
TEST(ServerThinkingBudget, TheServersEndTextIsForced) {
  const std::string model = model_with_template("budget_end_str", kOpens);
  const auto [open, close] = testing::add_think_tokens(model);
  ServerOptions options;
  options.reasoning_parser = "qwen3";
  options.reasoning_start_str = "<think>";
  options.reasoning_end_str = "!\n</think>";
  testing::ChatTestServer s(model, options);
  ASSERT_TRUE(s.ok());
  const auto forced = s.engine().tokenize("!\n</think>", /*add_bos=*/false);
  ASSERT_TRUE(forced.has_value());
  ASSERT_EQ(forced->size(), 3u);
  const json c = choice_of(s.chat(request({{"thinking_token_budget", 2}, {"logit_bias", {{std::to_string(close), -100}}}})));
  const std::vector<int32_t> ids = ids_of(c);
  ASSERT_GE(ids.size(), 5u) << c;
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 2, ids.begin() + 5), *forced) << c;
  EXPECT_TRUE(c["message"]["reasoning_content"].get<std::string>().ends_with("!\n")) << c;
}

TEST(ServerThinkingBudget, WhatCannotWorkIsRefused) {
  const std::string model = model_with_template("budget_refused", kOpens);
  testing::add_think_tokens(model);
  {
    testing::ChatTestServer s(model, "", "none");
    ASSERT_TRUE(s.ok());
    const ClientResponse r = s.chat(request({{"thinking_token_budget", 4}}));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("--reasoning-parser"), std::string::npos) << r.body;
  }
  testing::ChatTestServer s(model, "", "qwen3");
  ASSERT_TRUE(s.ok());
  for (const auto& [body, says] : std::vector<std::pair<json, std::string>>{
           {request({{"thinking_token_budget", -1}}), "thinking_token_budget"},
           {request({{"thinking_token_budget", "4"}}), "thinking_token_budget"},
           {request({{"thinking_token_budget", 4}, {"use_beam_search", true}, {"n", 2}}), "use_beam_search"}}) {
    const ClientResponse r = s.chat(body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(r.body.find(says), std::string::npos) << r.body;
  }
  const ClientResponse completion =
      s.post("/v1/completions", {{"prompt", "<think>\nhmm"}, {"max_tokens", 4}, {"thinking_token_budget", 2}});
  EXPECT_EQ(completion.status, 400) << completion.body;
  EXPECT_NE(completion.body.find("/v1/chat/completions"), std::string::npos) << completion.body;

  auto engine = [&] {
    EngineOptions o = brigade::testing::test_engine_options(model, 1);
    o.topology.instances.front().kv.memory_mb = 64;
    return brigade::testing::create_engine(o);
  }();
  ASSERT_TRUE(engine);
  for (const auto& [start, end, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"", "</think> done", "must end with the parser's closing tag"},
           {"<reason>", "</think>", "is not the opening tag"}}) {
    ServerOptions options;
    options.port = 0;
    options.reasoning_parser = "qwen3";
    options.reasoning_start_str = start;
    options.reasoning_end_str = end;
    auto srv = HttpServer::start(*engine, options);
    ASSERT_FALSE(srv.has_value()) << says;
    EXPECT_NE(srv.status().message().find(says), std::string::npos) << srv.status().message();
  }
}

}  // namespace
}  // namespace brigade::server
