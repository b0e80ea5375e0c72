// Tool calls in the syntaxes beyond Hermes and Llama 3 JSON, through the HTTP server in-process:
// a tiny synthetic model served with a real template (Mistral v0.3's, DeepSeek V3.1's, GLM-4.6's,
// Kimi-K2's, Phi-4-mini's, from tests/fixtures/chat_templates/models.json; Granite 3.3's, LFM2's,
// Nemotron-Nano-v2's, Apertus-8B-Instruct's, MiniMax-M1's and FireFunction v2's, llama.cpp's copies in
// tests/fixtures/chat_templates/templates/) has its output forced to a call in
// that template's syntax (guided_choice of the one text, tool_choice auto); the answer carries
// it as message.tool_calls, and streamed as delta.tool_calls, with the ids each syntax wants.
// --tool-call-parser overrides the template's syntax, and an unknown parser fails the start.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <tuple>

#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatTestServer;
using testing::model_with_template;

// The model writes exactly `output` (greedy, one guided choice), with the tools offered; `extra`:
// more members of the body.
json forced(const std::string& output, const json& extra = json::object()) {
  return testing::forced_output_chat(output, extra);
}

struct Expected {
  std::string content;  // "" → null
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

// The answer, whole and streamed, has the calls; returns the ids (whole answer's).
std::vector<std::string> expect_calls(const ChatTestServer& s, const std::string& output, const Expected& want,
                                      const json& extra = json::object()) {
  std::vector<std::string> ids;
  auto r = s.chat(forced(output, extra));
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return ids;
  const json choice = json::parse(r.body)["choices"][0];
  const json& m = choice["message"];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
  EXPECT_EQ(m["content"], want.content.empty() ? json(nullptr) : json(want.content)) << m.dump();
  EXPECT_EQ(m["tool_calls"].size(), want.calls.size()) << m.dump();
  for (size_t i = 0; i < std::min(m["tool_calls"].size(), want.calls.size()); ++i) {
    const json& c = m["tool_calls"][i];
    EXPECT_EQ(c["type"], "function");
    EXPECT_EQ(c["function"]["name"], want.calls[i].first);
    EXPECT_EQ(c["function"]["arguments"], want.calls[i].second);
    ids.push_back(c["id"].get<std::string>());
  }
  // Streamed: the same content and calls, in deltas.
  std::string content, finish;
  std::vector<std::pair<std::string, std::string>> calls;
  std::vector<std::string> stream_ids;
  for (const json& chunk : s.chat_stream(forced(output, extra))) {
    const json& ch = chunk["choices"][0];
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"].get<std::string>();
    const json& d = ch["delta"];
    if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
    if (!d.contains("tool_calls")) continue;
    for (const json& c : d["tool_calls"]) {
      const size_t index = c["index"].get<size_t>();
      if (c.contains("id")) {
        EXPECT_EQ(index, calls.size());
        calls.push_back({c["function"]["name"].get<std::string>(), ""});
        stream_ids.push_back(c["id"].get<std::string>());
      }
      if (index < calls.size()) calls[index].second += c["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, want.content);
  EXPECT_EQ(calls, want.calls);
  EXPECT_EQ(stream_ids.size(), ids.size());
  return ids;
}

// A real template: models.json's, else tests/fixtures/chat_templates/templates/<name>.jinja.
std::string template_source(const std::string& name) {
  const std::string source = brigade::testing::real_chat_template(name);
  return source.empty() ? brigade::testing::chat_template_file(name) : source;
}

bool alnum(const std::string& s) { return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }); }

TEST(ServerToolSyntaxes, EachTemplatesCallsComeBackAsToolCalls) {
  struct Case {
    const char* tmpl;
    std::string output;
  };
  const Expected both{"", {{"get_weather", R"({"city": "Oslo", "days": 2})"}, {"get_time", "{}"}}};
  const Case cases[] = {
      {"mistral-v0.3", R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, {"name": "get_time", "arguments": {}}])"},
      {"deepseek-v3.1",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\", \"days\": 2}<｜tool▁call▁end｜>"
       "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"glm-4.6",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n"
       "<arg_value>2</arg_value>\n</tool_call>\n<tool_call>get_time\n</tool_call>"},
      {"kimi-k2",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
       "{\"city\": \"Oslo\", \"days\": 2}<|tool_call_end|><|tool_call_begin|>functions.get_time:1"
       "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tmpl);
    const std::string source = brigade::testing::real_chat_template(c.tmpl);
    ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
    ChatTestServer s(model_with_template(std::string("syntax_") + c.tmpl, source));
    ASSERT_TRUE(s.ok());
    const auto ids = expect_calls(s, c.output, both);
    ASSERT_EQ(ids.size(), 2u);
    if (std::string(c.tmpl) == "mistral-v0.3") {
      for (const auto& id : ids) EXPECT_TRUE(id.size() == 9 && alnum(id)) << id << ": Mistral's template takes 9 alphanumerics";
    } else if (std::string(c.tmpl) == "kimi-k2") {
      EXPECT_EQ(ids, (std::vector<std::string>{"functions.get_weather:0", "functions.get_time:1"}));
    } else {
      for (const auto& id : ids) EXPECT_TRUE(id.starts_with("call_") && id.size() == 29) << id;
    }
  }
}

// Granite 3.3's, LFM2's, Nemotron-Nano-v2's, Apertus', Phi-4-mini's, MiniMax-M1's and FireFunction
// v2's templates (llama.cpp's copies) pick their syntaxes (granite, lfm2, nemotron_nano_v2, apertus,
// phi4_mini_json, minimax, phi4_mini_json), whose calls come back as tool_calls; text around the
// tagged blocks is content.
TEST(ServerToolSyntaxes, ListSyntaxesCallsFromTheirTemplates) {
  const Expected both{"", {{"get_weather", R"({"city": "Oslo", "days": 2})"}, {"get_time", "{}"}}};
  const std::pair<const char*, std::string> cases[] = {
      {"granite-3.3",
       R"(<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, {"name": "get_time", "arguments": {}}])"},
      {"lfm2", "<|tool_call_start|>[get_weather(city=\"Oslo\", days=2), get_time()]<|tool_call_end|>"},
      {"lfm2.5", "<|tool_call_start|>[get_weather(city='Oslo', days=2), get_time()]<|tool_call_end|>"},
      {"nemotron-nano-v2",
       R"(<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, {"name": "get_time", "arguments": {}}]</TOOLCALL>)"},
      {"apertus", R"(<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 2}}, {"get_time": {}}]<|tools_suffix|>)"},
      {"phi-4-mini",
       R"(<|tool_call|>{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}<|/tool_call|><|tool_call|>{"name": "get_time", "arguments": {}}<|/tool_call|>)"},
      {"minimax-m1",
       "<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n"
       "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_calls>"},
      {"firefunction-v2",  // its calls begin with a space, as the template shows them
       R"( functools[{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, {"name": "get_time", "arguments": {}}])"},
  };
  // FireFunction's template prints the tools from its own variables (llama.cpp sets them).
  const json kwargs = {{"chat_template_kwargs",
                        {{"functions", testing::weather_and_time_tools().dump()}, {"datetime", "Jul 26 2024"}}}};
  for (const auto& [tmpl, output] : cases) {
    SCOPED_TRACE(tmpl);
    const std::string source = template_source(tmpl);
    ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/templates/" << tmpl << ".jinja";
    ChatTestServer s(model_with_template(std::string("syntax_") + tmpl, source, 4096));
    ASSERT_TRUE(s.ok());
    const auto ids = expect_calls(s, output, both, std::string(tmpl) == "firefunction-v2" ? kwargs : json::object());
    for (const auto& id : ids) EXPECT_TRUE(id.starts_with("call_") && id.size() == 29) << id;
  }
  const std::tuple<const char*, std::string, std::string> with_text[] = {
      {"lfm2", "Let me check.<|tool_call_start|>[get_time()]<|tool_call_end|>", "Let me check."},
      {"nemotron-nano-v2", "Let me check.\n<TOOLCALL>[{\"name\": \"get_time\", \"arguments\": {}}]</TOOLCALL>", "Let me check."},
      {"apertus", "Checking. <|tools_prefix|>[{\"get_time\": {}}]<|tools_suffix|>", "Checking."},
  };
  for (const auto& [tmpl, output, content] : with_text) {
    SCOPED_TRACE(tmpl);
    ChatTestServer s(model_with_template(std::string("syntax_text_") + tmpl, template_source(tmpl), 4096));
    ASSERT_TRUE(s.ok());
    expect_calls(s, output, {content, {{"get_time", "{}"}}});
  }
}

TEST(ServerToolSyntaxes, TextBeforeTheCallIsContent) {
  ChatTestServer s(model_with_template("syntax_text", brigade::testing::real_chat_template("mistral-v0.3")));
  ASSERT_TRUE(s.ok());
  expect_calls(s, "Let me check.[TOOL_CALLS]get_time[ARGS]{}", {"Let me check.", {{"get_time", "{}"}}});
  // A malformed call stays content (finish_reason stop).
  auto r = s.chat(forced("[TOOL_CALLS] [{\"name\": \"get_time\"}]"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"]["content"], "[TOOL_CALLS] [{\"name\": \"get_time\"}]");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
}

// A forced call is JSON whatever the syntax (guided decoding), read by the forced parsers.
TEST(ServerToolSyntaxes, ForcedCallsAreJsonInEverySyntax) {
  for (const char* tmpl : {"mistral-v0.3", "glm-4.6", "granite-3.3", "lfm2"}) {
    SCOPED_TRACE(tmpl);
    ChatTestServer s(model_with_template(std::string("syntax_forced_") + tmpl, template_source(tmpl), 4096));
    ASSERT_TRUE(s.ok());
    json bias = {{"2", 100}};  // EOS as soon as the constraint allows; no whitespace
    for (char c : std::string(" \t\r\n")) bias[std::to_string(3 + c)] = -100;
    for (const json& choice : {json{{"type", "function"}, {"function", {{"name", "get_time"}}}}, json("required")}) {
      json body = forced("unused");
      body.erase("guided_choice");
      body["tools"] = json::array({testing::weather_and_time_tools()[1]});  // get_time: its arguments are {} (short, whatever the model)
      body["tool_choice"] = choice;
      body["parallel_tool_calls"] = false;
      body["logit_bias"] = bias;
      body["max_tokens"] = 64;
      auto r = s.chat(body);
      ASSERT_EQ(r.status, 200) << r.body;
      const json m = json::parse(r.body)["choices"][0]["message"];
      ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
      const json& call = m["tool_calls"][0];
      EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>()).is_object()) << call.dump();
      if (choice.is_object()) {
        EXPECT_EQ(call["function"]["name"], "get_time");
      }
      const std::string id = call["id"].get<std::string>();
      if (std::string(tmpl) == "mistral-v0.3") {
        EXPECT_TRUE(id.size() == 9 && alnum(id)) << id;
      }
    }
  }
}

// Mistral's [TOOL_CALLS] is a special token of its tokenizers, and LFM2's <|tool_call_start|> of
// its, which the output drops by default (skip_special_tokens): with tools the parser gets them,
// as vLLM's mistral and lfm2 parsers do.
TEST(ServerToolSyntaxes, SpecialMarkersReachTheParser) {
  for (const auto& [tmpl, tag] : {std::pair<const char*, const char*>{"mistral-v0.3", "[TOOL_CALLS]"},
                                  std::pair<const char*, const char*>{"lfm2", "<|tool_call_start|>"}}) {
    SCOPED_TRACE(tmpl);
    const std::string model = model_with_template(std::string("syntax_special_") + tmpl, template_source(tmpl), 4096);
    const int32_t marker = testing::add_tokens(model, {tag}, /*special=*/true)[0];
    ChatTestServer s(model);
    ASSERT_TRUE(s.ok());
    json body = forced("unused");
    body.erase("guided_choice");
    body["logit_bias"] = {{std::to_string(marker), 100}};
    body["max_tokens"] = 1;
    auto r = s.chat(body);
    ASSERT_EQ(r.status, 200) << r.body;
    // The marker alone is no call: content, which shows it reached the parser.
    EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], tag) << r.body;
    body.erase("tools");
    body.erase("tool_choice");
    r = s.chat(body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "") << "without tools it is skipped";
    body["skip_special_tokens"] = false;
    r = s.chat(body);
    EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], tag) << "as asked";
  }
}

TEST(ServerToolSyntaxes, ToolCallParserOverridesTheTemplate) {
  // Qwen2.5's template teaches Hermes calls; --tool-call-parser glm45 reads GLM's instead.
  ChatTestServer s(model_with_template("syntax_override", brigade::testing::real_chat_template("qwen2.5")), "", "none", "glm45");
  ASSERT_TRUE(s.ok());
  expect_calls(s, "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
               {"", {{"get_weather", R"({"days": 3})"}}});
  // --tool-call-parser qwen3_xml (vLLM's other name of qwen3_coder): Qwen3.5's XML calls, their
  // values typed by the tools' schema (days an integer, city a string).
  ChatTestServer qwen(model_with_template("syntax_qwen3_coder", brigade::testing::real_chat_template("qwen2.5")), "", "none",
                      "qwen3_xml");
  ASSERT_TRUE(qwen.ok());
  expect_calls(qwen,
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n"
               "</parameter>\n</function>\n</tool_call>",
               {"", {{"get_weather", R"({"city": "Oslo", "days": 3})"}}});
  // --tool-call-parser minimax_m2: MiniMax-M2's invoke blocks through the server, values typed by
  // the tools' schema.
  ChatTestServer minimax(model_with_template("syntax_minimax_m2", brigade::testing::real_chat_template("qwen2.5")), "",
                         "none", "minimax_m2");
  ASSERT_TRUE(minimax.ok());
  expect_calls(minimax,
               "Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo</parameter>\n"
               "<parameter name=\"days\">3</parameter>\n</invoke>\n</minimax:tool_call>",
               {"Checking.", {{"get_weather", R"({"city": "Oslo", "days": 3})"}}});
  // --tool-call-parser hunyuan_a13b / jamba (no template of theirs here): <tool_calls> blocks.
  for (const char* parser : {"hunyuan_a13b", "jamba"}) {
    ChatTestServer list(model_with_template(std::string("syntax_") + parser, brigade::testing::real_chat_template("qwen2.5")),
                        "", "none", parser);
    ASSERT_TRUE(list.ok());
    expect_calls(list, "Checking.\n<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}]</tool_calls>",
                 {"Checking.", {{"get_weather", R"({"days": 3})"}}});
  }
  // Phi-4-mini's llama.cpp template teaches no syntax vLLM parses; --tool-call-parser
  // phi4_mini_json reads its functools[..] lists.
  ChatTestServer phi4(model_with_template("syntax_phi4", brigade::testing::real_chat_template("phi-4-mini")), "", "none",
                      "phi4_mini_json");
  ASSERT_TRUE(phi4.ok());
  expect_calls(phi4, "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
               {"", {{"get_weather", R"({"city": "Oslo"})"}}});
  // --tool-call-parser olmo3: OLMo 3's call lines.
  ChatTestServer olmo(model_with_template("syntax_olmo3", brigade::testing::real_chat_template("qwen2.5")), "", "none", "olmo3");
  ASSERT_TRUE(olmo.ok());
  expect_calls(olmo, "get_weather(city=\"Oslo\", days=3)\nget_time()",
               {"", {{"get_weather", R"({"city": "Oslo", "days": 3})"}, {"get_time", "{}"}}});
  // A Llama 2 template has no call syntax; a named parser makes tools usable.
  ChatTestServer llama2(model_with_template("syntax_llama2", brigade::testing::real_chat_template("llama-2")), "", "none", "kimi_k2");
  ASSERT_TRUE(llama2.ok());
  expect_calls(llama2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
               {"", {{"get_time", "{}"}}});
}

TEST(ServerToolSyntaxes, AnUnknownParserFailsTheStart) {
  EngineOptions o = brigade::testing::test_engine_options(model_with_template("syntax_unknown", "{{ 'x' }}"), 1);
  o.topology.instances.front().kv.memory_mb = 64;
  auto engine = brigade::testing::create_engine(o);
  ASSERT_TRUE(engine);
  ServerOptions options;
  options.port = 0;
  options.tool_call_parser = "xlam";
  auto srv = HttpServer::start(*engine, options);
  ASSERT_FALSE(srv.has_value());
  EXPECT_EQ(srv.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(srv.status().message().find("--tool-call-parser"), std::string::npos) << srv.status().message();
  EXPECT_NE(srv.status().message().find("mistral, deepseek_v3"), std::string::npos) << srv.status().message();
}

}  // namespace
}  // namespace brigade::server
