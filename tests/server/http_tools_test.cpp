// Tool calling through the HTTP server in-process, on a tiny synthetic model whose
// tokenizer_config.json carries a real template (Qwen2.5's, Llama 3.1's, Llama 2's; from
// tests/fixtures/chat_templates/models.json): a forced call (named or required) comes back as
// tool_calls whose arguments fit the function's schema, streamed and not; tool_choice none leaves
// the text alone; a conversation with calls and results reaches the template as transformers
// passes it (the prompt is the reference rendering); a model without a tool format answers 400.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>


#include "core/json_schema.h"
#include "core/schema_matcher.h"
#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;

const json kWeatherParams = json::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 5},
  "days": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["city", "days"]})");
const json kTools = json::array(
    {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"description", "Weather"}, {"parameters", kWeatherParams}}}},
     {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"}, {"properties", {{"tz", {{"enum", {"UTC", "CET"}}}}}}, {"required", {"tz"}}}}}}}});

using testing::model_with_template;
using ToolServer = testing::ChatTestServer;

// Greedy, EOS at +100 (the output ends as soon as the constraint lets it), whitespace banned.
json request(const json& tool_choice) {
  json bias = {{"2", 100}};
  for (char c : std::string(" \t\r\n")) bias[std::to_string(3 + c)] = -100;
  return {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}}, {"tools", kTools},
          {"tool_choice", tool_choice}, {"max_tokens", 48}, {"temperature", 0}, {"logit_bias", bias}};
}

bool fits(const json& schema, const std::string& text) {
  auto compiled = CompiledSchema::compile(schema.dump());
  EXPECT_TRUE(compiled) << compiled.status().to_string();
  SchemaMatcher m(**compiled);
  return m.feed(text) && m.complete();
}

TEST(ServerTools, ForcedCallsComeBackAsToolCalls) {
  ToolServer s(model_with_template("qwen25", brigade::testing::real_chat_template("qwen2.5")));
  ASSERT_TRUE(s.ok());
  const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  auto r = s.chat(request(named));
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop") << "a named call: stop, as OpenAI and vLLM";
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  const std::string args = call["function"]["arguments"];
  EXPECT_TRUE(fits(kWeatherParams, args)) << args;

  // Streamed: the same call, in pieces.
  std::string streamed;
  for (const json& c : s.chat_stream(request(named))) {
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("tool_calls")) streamed += delta["tool_calls"][0]["function"]["arguments"].get<std::string>();
    EXPECT_FALSE(delta.contains("content") && !delta["content"].get<std::string>().empty());
  }
  EXPECT_EQ(streamed, args);

  // required: a call of one of the tools with arguments fitting its schema (one: with parallel
  // calls the greedy model goes on calling until max_tokens).
  json one = request("required");
  one["parallel_tool_calls"] = false;
  auto req = s.chat(one);
  ASSERT_EQ(req.status, 200) << req.body;
  const json rc = json::parse(req.body)["choices"][0];
  EXPECT_EQ(rc["finish_reason"], "tool_calls") << rc.dump();
  ASSERT_EQ(rc["message"]["tool_calls"].size(), 1u) << rc.dump();
  for (const json& c : rc["message"]["tool_calls"]) {
    const std::string name = c["function"]["name"];
    const json& params = name == "get_weather" ? kWeatherParams : kTools[1]["function"]["parameters"];
    EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
    EXPECT_TRUE(fits(params, json::parse(c["function"]["arguments"].get<std::string>()).dump())) << c.dump();
  }

  // none: the tools are in the prompt, the output is text.
  json plain = request("none");
  plain["logit_bias"] = json::object();
  plain["max_tokens"] = 4;
  auto none = s.chat(plain);
  ASSERT_EQ(none.status, 200) << none.body;
  const json nb = json::parse(none.body);
  EXPECT_FALSE(nb["choices"][0]["message"].contains("tool_calls"));
  EXPECT_TRUE(nb["choices"][0]["message"]["content"].is_string());
  plain.erase("tools");
  plain.erase("tool_choice");
  const json without = json::parse(s.chat(plain).body);
  EXPECT_GT(nb["usage"]["prompt_tokens"].get<int>(), without["usage"]["prompt_tokens"].get<int>() + 100)
      << "the tools are rendered into the prompt";
}

// Llama 3.1 writes {"name", "parameters"}: the forced output and its parsing agree on the key.
TEST(ServerTools, Llama3RequiredCallParses) {
  ToolServer s(model_with_template("llama31", brigade::testing::real_chat_template("llama-3.1")));
  ASSERT_TRUE(s.ok());
  json one = request("required");
  one["parallel_tool_calls"] = false;
  one["max_tokens"] = 128;
  auto r = s.chat(one);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
  EXPECT_TRUE(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()).is_object());
}

// The tools, an assistant's calls (arguments as a JSON string, as clients send it) and the tools'
// results, sent over HTTP, make the prompt transformers renders with the real template (Qwen2.5's,
// Llama 3.1's, and the Mistral, GLM and Kimi templates whose call syntaxes brigade parses). Compared
// by token count against /tokenize of the reference text (hundreds of tokens, one per byte of
// most markup).
TEST(ServerTools, CallsAndResultsReachTheRealTemplateAsTransformersPassesThem) {
  int n_compared = 0;
  for (const char* name : {"qwen2.5", "llama-3.1", "mistral-v0.3", "glm-4.6", "kimi-k2"}) {
    SCOPED_TRACE(name);
    const std::string source = brigade::testing::real_chat_template(name);
    ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
    ToolServer s(model_with_template(std::string("history_") + name, source));
    ASSERT_TRUE(s.ok());
    for (const char* conversation : {"tools_call_and_result", "tools_full_exchange", "tools_parallel_calls"}) {
      SCOPED_TRACE(conversation);
      const auto c = brigade::testing::chat_template_case(name, conversation, true);
      ASSERT_TRUE(c.is_object()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
      if (!c.contains("expected")) continue;  // the template refuses it (Llama 3.1: one call per turn)
      // The synthetic tokenizer's bos_token is <s>; Llama 3.1's template writes it first.
      std::string expected = c["expected"].get<std::string>();
      const std::string llama_bos = "<|begin_of_text|>";
      if (expected.starts_with(llama_bos)) expected = "<s>" + expected.substr(llama_bos.size());
      auto tokens = s.post("/tokenize", {{"prompt", expected}, {"add_special_tokens", false}});
      ASSERT_EQ(tokens.status, 200) << tokens.body;
      auto r = s.chat({{"model", "tiny"}, {"messages", json::parse(c["messages"].dump())},
                       {"tools", json::parse(c["tools"].dump())}, {"max_tokens", 1}, {"temperature", 0}});
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], json::parse(tokens.body)["count"]);
      ++n_compared;
    }
  }
  EXPECT_EQ(n_compared, 14) << "every template's three conversations, but Llama 3.1's parallel calls";
}

TEST(ServerTools, AModelWithoutAToolFormatAnswers400) {
  ToolServer s(model_with_template("llama2", brigade::testing::real_chat_template("llama-2")));
  ASSERT_TRUE(s.ok());
  auto r = s.chat(request("auto"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no tool-call format"), std::string::npos) << r.body;
  // A tool result in the history needs a tool format too (Llama 2's template would drop it).
  json history = {{"model", "tiny"},
                  {"messages", {{{"role", "user"}, {"content", "x"}}, {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "1"}}}}};
  auto h = s.chat(history);
  EXPECT_EQ(h.status, 400);
  EXPECT_NE(h.body.find("tool"), std::string::npos) << h.body;
}

}  // namespace
}  // namespace brigade::server
