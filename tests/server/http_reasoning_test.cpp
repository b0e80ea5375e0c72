// Reasoning through the HTTP server in-process (`brigade serve --reasoning-parser`): where the
// chat template leaves the prompt decides whether the output starts as reasoning; the request's
// include_reasoning / separate_reasoning switches and a constrained output's whole content; a
// parser name that does not exist stops the server from starting. The synthetic model's greedy
// text is the same whichever way it is returned, so each answer is compared with the raw one.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::model_with_template;

// Templates of no built-in family (run as Jinja): one opens a thinking block for the answer, as
// DeepSeek-R1's and QwQ's do; one closes it at once, as Qwen3's with enable_thinking false.
constexpr const char* kOpens =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n";
constexpr const char* kCloses =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n\n</think>\n\n";

json request(json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}}, {"max_tokens", 12},
               {"temperature", 0}};
  body.update(extra);
  return body;
}

json message_of(const ClientResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body)["choices"][0]["message"] : json();
}

TEST(ServerReasoning, AnOpenBlockMakesTheOutputReasoning) {
  testing::ChatTestServer s(model_with_template("reason_open", kOpens), "", "qwen3");
  ASSERT_TRUE(s.ok());
  const json raw = message_of(s.chat(request({{"separate_reasoning", false}})));
  ASSERT_TRUE(raw["content"].is_string());
  const std::string text = raw["content"];
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.find("</think>"), std::string::npos) << "the test needs an output that never closes the block";
  EXPECT_FALSE(raw.contains("reasoning_content")) << "separate_reasoning false: the output stays whole";

  const json split = message_of(s.chat(request()));
  EXPECT_EQ(split["reasoning_content"], text);
  EXPECT_EQ(split["reasoning"], text);
  EXPECT_TRUE(split["content"].is_null()) << "cut by max_tokens while thinking: no answer";

  const json dropped = message_of(s.chat(request({{"include_reasoning", false}})));
  EXPECT_FALSE(dropped.contains("reasoning_content"));
  EXPECT_TRUE(dropped["content"].is_null());

  std::string streamed, content;
  for (const json& chunk : s.chat_stream(request())) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) streamed += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(content, "");

  // A constrained output obeys its constraint from the first token: all of it is content.
  const json constrained = message_of(s.chat(request({{"response_format", {{"type", "json_object"}}}})));
  EXPECT_TRUE(constrained["content"].is_string());
  EXPECT_FALSE(constrained.contains("reasoning_content"));
}

TEST(ServerReasoning, AClosedBlockMakesTheOutputContent) {
  testing::ChatTestServer s(model_with_template("reason_closed", kCloses), "", "deepseek_r1");
  ASSERT_TRUE(s.ok());
  const json raw = message_of(s.chat(request({{"separate_reasoning", false}})));
  const json split = message_of(s.chat(request()));
  EXPECT_EQ(split["content"], raw["content"]);
  EXPECT_TRUE(split["reasoning_content"].is_null());
}

TEST(ServerReasoning, WithoutAParserTheOutputStaysWhole) {
  testing::ChatTestServer s(model_with_template("reason_none", kOpens));
  ASSERT_TRUE(s.ok());
  const json m = message_of(s.chat(request()));
  EXPECT_TRUE(m["content"].is_string());
  EXPECT_FALSE(m.contains("reasoning_content"));
  auto bad = s.chat(request({{"include_reasoning", "yes"}}));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("include_reasoning"), std::string::npos) << bad.body;
}

TEST(ServerReasoning, AnUnknownParserStopsTheServer) {
  EngineOptions o = brigade::testing::test_engine_options(model_with_template("reason_bad", kOpens), 1);
  o.topology.instances.front().kv.memory_mb = 64;
  auto engine = brigade::testing::create_engine(o);
  ASSERT_TRUE(engine);
  ServerOptions options;
  options.port = 0;
  options.reasoning_parser = "r1";
  auto srv = HttpServer::start(*engine, options);
  ASSERT_FALSE(srv.has_value());
  EXPECT_EQ(srv.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(srv.status().message().find("deepseek_r1"), std::string::npos) << srv.status().message();
  options.reasoning_parser = "auto";  // the synthetic vocabulary has no </think> token: no parser
  srv = HttpServer::start(*engine, options);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  auto r = http_request("127.0.0.1", (*srv)->port(), {"POST", "/v1/chat/completions", request().dump(), ""});
  ASSERT_TRUE(r.has_value());
  const json m = message_of(*r);
  EXPECT_TRUE(m["content"].is_string());
  EXPECT_FALSE(m.contains("reasoning_content"));
}

}  // namespace
}  // namespace brigade::server
