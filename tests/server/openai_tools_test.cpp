// tools / tool_choice / parallel_tool_calls in chat bodies, tool calls and results in messages,
// and the schema that forces a call (checked with brigade's schema matcher: the outputs it admits
// are exactly the calls the tools allow).
#include "server/openai_tools.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "core/json_schema.h"
#include "core/schema_matcher.h"
#include "server/openai_parse.h"

namespace brigade::server {
namespace {

using nlohmann::json;

const char* kWeather = R"({"type": "function", "function": {"name": "get_weather", "description": "d",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
  "required": ["city"]}}})";
const char* kTime = R"({"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
  "properties": {"tz": {"type": "string"}}, "required": ["tz"]}, "strict": true}})";

std::string chat_body(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "hi"}], "tools": [)" + std::string(kWeather) + ", " + kTime + "]" +
         extra + "}";
}

Expected<CompletionRequest> parse(const std::string& body) { return parse_completion_body(body, Endpoint::chat); }

TEST(OpenaiTools, ToolsAndChoices) {
  auto r = parse(chat_body(""));
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ(r->tools.tools.size(), 2u);
  EXPECT_EQ(r->tools.choice, ToolChoice::automatic) << "OpenAI's default with tools";
  EXPECT_TRUE(r->tools.parallel);
  EXPECT_EQ(r->tools.functions[0].name, "get_weather");
  // The body's key order survives (the template prints tools as sent).
  EXPECT_EQ(r->tools.tools[0].find("\"type\""), 1u);
  EXPECT_LT(r->tools.functions[0].parameters.find("city"), r->tools.functions[0].parameters.find("unit"));
  EXPECT_EQ(r->gen.response_format, ResponseFormat::text) << "auto does not constrain";

  auto named = parse(chat_body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "parallel_tool_calls": false)"));
  ASSERT_TRUE(named) << named.status().to_string();
  EXPECT_EQ(named->tools.choice, ToolChoice::named);
  EXPECT_EQ(named->tools.named, "get_time");
  EXPECT_FALSE(named->tools.parallel);
  EXPECT_EQ(parse(chat_body(R"(, "tool_choice": "required")"))->tools.choice, ToolChoice::required);
  EXPECT_EQ(parse(chat_body(R"(, "tool_choice": "none")"))->tools.choice, ToolChoice::none);
  auto none_without_tools = parse(R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "none"})");
  ASSERT_TRUE(none_without_tools);
  EXPECT_EQ(none_without_tools->tools.choice, ToolChoice::none);
  // The completions endpoint has no tools (an unknown field there, as in OpenAI's API).
  auto completion = parse_completion_body(R"({"prompt": "x", "tools": 5})", Endpoint::completions);
  EXPECT_TRUE(completion);
}

TEST(OpenaiTools, MalformedToolsAre400WithTheField) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::pair<std::string, std::string> cases[] = {
      {R"("tools": {})", "'tools'"},
      {R"("tools": [5])", "tools[0]"},
      {R"("tools": [{"type": "retrieval"}])", "tools[0].type"},
      {R"("tools": [{"type": "function"}])", "tools[0].function"},
      {R"("tools": [{"type": "function", "function": {"description": "x"}}])", "tools[0].function.name"},
      {R"("tools": [{"type": "function", "function": {"name": "has space"}}])", "a-z"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}])", "parameters"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "strict": 1}}])", "strict"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])", "twice"},
      {R"("tool_choice": "auto")", "needs 'tools'"},
      {R"("tool_choice": {"type": "function", "function": {"name": "f"}})", "needs 'tools'"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "any")", "none, auto, required"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}})", "not in 'tools'"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"name": "f"})", "tool_choice"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": "yes")", "parallel_tool_calls"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required", "response_format": {"type": "json_object"})", "response_format"},
  };
  for (const auto& [fields, says] : cases) {
    auto r = parse("{" + msgs + ", " + fields + "}");
    ASSERT_FALSE(r) << fields;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << fields;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << fields << " → " << r.status().message();
  }
}

TEST(OpenaiTools, ToolCallsAndResultsInMessages) {
  auto r = parse(R"({"messages": [{"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "-3 C"}]}]})");
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ(r->messages.size(), 3u);
  ASSERT_EQ(r->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r->messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r->messages[1].tool_calls[0].arguments, R"({"city": "Oslo"})");
  EXPECT_EQ(r->messages[1].content, "");
  EXPECT_EQ(r->messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r->messages[2].content, "-3 C");

  const std::pair<std::string, std::string> bad[] = {
      {R"({"role": "tool", "content": "x"})", "tool_call_id"},
      {R"({"role": "user", "content": "x", "tool_calls": []})", "only valid on assistant"},
      {R"({"role": "assistant", "tool_calls": {}})", "tool_calls"},
      {R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]})", "arguments"},
      {R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]})", "not a JSON object"},
      {R"({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})", "name"},
      {R"({"role": "assistant", "tool_calls": [{"type": "code", "function": {"name": "f", "arguments": "{}"}}]})", "type"},
  };
  for (const auto& [msg, says] : bad) {
    auto e = parse(R"({"messages": [)" + msg + "]}");
    ASSERT_FALSE(e) << msg;
    EXPECT_NE(e.status().message().find(says), std::string::npos) << msg << " → " << e.status().message();
  }
}

// Whether the schema's matcher takes `text` as a whole instance.
bool admits(const CompiledSchema& schema, const std::string& text) {
  SchemaMatcher m(schema);
  return m.feed(text) && m.complete();
}

TEST(OpenaiTools, ForcingANamedFunctionConstrainsItsArguments) {
  auto r = parse(chat_body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_TRUE(r);
  force_tool_choice(r->tools, ToolFormat::hermes, r->gen);
  ASSERT_EQ(r->gen.response_format, ResponseFormat::json_schema);
  auto schema = CompiledSchema::compile(r->gen.json_schema);
  ASSERT_TRUE(schema) << schema.status().to_string();
  EXPECT_TRUE(admits(**schema, R"({"city":"Oslo"})"));
  EXPECT_TRUE(admits(**schema, R"({"city":"Oslo","unit":"c"})"));
  EXPECT_FALSE(admits(**schema, R"({"unit":"c"})")) << "city is required";
  EXPECT_FALSE(admits(**schema, R"({"tz":"UTC"})"));
}

TEST(OpenaiTools, RequiredIsAnArrayOfTheToolsCallsInTheFamilysKeys) {
  auto r = parse(chat_body(R"(, "tool_choice": "required")"));
  ASSERT_TRUE(r);
  GenerateOptions hermes = r->gen, llama = r->gen;
  force_tool_choice(r->tools, ToolFormat::hermes, hermes);
  force_tool_choice(r->tools, ToolFormat::llama3_json, llama);
  auto h = CompiledSchema::compile(hermes.json_schema);
  auto l = CompiledSchema::compile(llama.json_schema);
  ASSERT_TRUE(h) << h.status().to_string() << "\n" << hermes.json_schema;
  ASSERT_TRUE(l) << l.status().to_string();
  EXPECT_TRUE(admits(**h, R"([{"name":"get_weather","arguments":{"city":"Oslo"}}])"));
  EXPECT_TRUE(admits(**h, R"([{"name":"get_time","arguments":{"tz":"UTC"}},{"name":"get_weather","arguments":{"city":"x"}}])"));
  EXPECT_FALSE(admits(**h, R"([])")) << "at least one call";
  EXPECT_FALSE(admits(**h, R"([{"name":"get_time","arguments":{"city":"Oslo"}}])")) << "each name with its own schema";
  EXPECT_FALSE(admits(**h, R"([{"name":"other","arguments":{}}])"));
  EXPECT_TRUE(admits(**l, R"([{"name":"get_time","parameters":{"tz":"UTC"}}])"));
  EXPECT_FALSE(admits(**l, R"([{"name":"get_time","arguments":{"tz":"UTC"}}])"));

  r->tools.parallel = false;
  GenerateOptions one = r->gen;
  force_tool_choice(r->tools, ToolFormat::hermes, one);
  auto o = CompiledSchema::compile(one.json_schema);
  ASSERT_TRUE(o);
  EXPECT_FALSE(admits(**o, R"([{"name":"get_time","arguments":{"tz":"UTC"}},{"name":"get_time","arguments":{"tz":"UTC"}}])"));
}

TEST(OpenaiTools, RequiredWithManyToolsKeepsEveryToolCallable) {
  std::string tools;
  for (int i = 0; i < 6; ++i) {
    if (i > 0) tools += ",";
    tools += R"({"type": "function", "function": {"name": "t)" + std::to_string(i) +
             R"(", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}})";
  }
  auto r = parse(R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required", "tools": [)" + tools + "]}");
  ASSERT_TRUE(r) << r.status().to_string();
  force_tool_choice(r->tools, ToolFormat::hermes, r->gen);
  auto schema = CompiledSchema::compile(r->gen.json_schema);
  ASSERT_TRUE(schema) << schema.status().to_string();
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(admits(**schema, R"([{"name":"t)" + std::to_string(i) + R"(","arguments":{"x":1}}])")) << "tool " << i;
  EXPECT_FALSE(admits(**schema, R"([{"name":"t6","arguments":{"x":1}}])"));
  EXPECT_FALSE(admits(**schema, R"([{"name":"t0","arguments":[]}])"));
}

// Byte mutations of a body with tools, a call and a result: an answer (a request or an error
// naming what was wrong), never a crash.
TEST(OpenaiTools, FuzzMutatedBodies) {
  const std::string seed = chat_body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}},
    "parallel_tool_calls": false)").insert(14, R"({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
    "function": {"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"}}]}, {"role": "tool", "tool_call_id": "c",
    "content": "12:00"}, )");
  ASSERT_TRUE(parse(seed)) << parse(seed).status().to_string();
  std::mt19937_64 rng(99);
  int n_ok = 0, n_err = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = seed;
    for (int m = 0; m < 2; ++m) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;
        case 1: text.erase(at, rng() % 8); break;
        default: text.insert(at, 1, "{}[]\",:0-e\\"[rng() % 11]); break;
      }
    }
    auto r = parse(text);
    if (r) {
      ++n_ok;
      if (r->tools.choice == ToolChoice::named) {
        EXPECT_FALSE(r->tools.named.empty());
      }
    } else {
      ++n_err;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(n_ok, 100);
  EXPECT_GT(n_err, 100);
}

TEST(OpenaiTools, AutoAndNoneDoNotConstrain) {
  for (const char* choice : {R"("auto")", R"("none")"}) {
    auto r = parse(chat_body(std::string(R"(, "tool_choice": )") + choice));
    ASSERT_TRUE(r);
    force_tool_choice(r->tools, ToolFormat::hermes, r->gen);
    EXPECT_EQ(r->gen.response_format, ResponseFormat::text);
  }
}

}  // namespace
}  // namespace brigade::server
