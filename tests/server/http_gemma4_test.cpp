// Gemma 4 chat through the HTTP server in-process: a tiny synthetic model served with Gemma 4's
// real chat template (tests/fixtures/chat_templates/templates/gemma-4.jinja, llama.cpp's copy of
// google/gemma-4-31B-it's). Conversations with tools, calls, results and enable_thinking reach the
// template as transformers passes them (the prompt is the reference rendering of
// tests/fixtures/chat_gemma4/cases.json); an output forced to Gemma 4's call syntax comes back as
// tool_calls, whole and streamed (the template's syntax, or --tool-call-parser gemma4), a cut-off
// call as content; tool_choice "required" is constrained as for every syntax; with
// --reasoning-parser gemma4 (or auto) the thought channel is reasoning_content, and
// thinking_token_budget forces `<channel|>`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatAnswer;
using testing::ChatTestServer;
using testing::model_with_template;

std::string gemma4_template() { return brigade::testing::chat_template_file("gemma-4"); }

std::string call(const std::string& name, const std::string& args) {
  return "<|tool_call>call:" + name + "{" + args + "}<tool_call|>";
}
const std::string kQ = "<|\"|>";

// The model writes exactly `output` (greedy, one guided choice), with the tools offered.
json forced(const std::string& output, const json& extra = json::object()) {
  return testing::forced_output_chat(output, extra);
}

void expect_answer(const ChatTestServer& s, const json& body, const json& content,
                   const std::vector<std::pair<std::string, std::string>>& calls, const std::string& finish,
                   const json& reasoning = nullptr) {
  for (const ChatAnswer& a : {testing::whole_answer(s, body), testing::streamed_answer(s, body)}) {
    EXPECT_EQ(a.content, content);
    EXPECT_EQ(a.calls, calls);
    EXPECT_EQ(a.finish, finish);
    EXPECT_EQ(a.reasoning, reasoning);
    for (const std::string& id : a.ids) EXPECT_TRUE(id.starts_with("call_")) << id;
  }
}

TEST(ServerGemma4, TheTemplatesCallsComeBackAsToolCalls) {
  const std::string source = gemma4_template();
  ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/templates/gemma-4.jinja is missing";
  ChatTestServer s(model_with_template("gemma4_calls", source));
  ASSERT_TRUE(s.ok());
  const std::string two = "Checking." + call("get_weather", "city:" + kQ + "Oslo" + kQ + ",days:2") + call("get_time", "");
  expect_answer(s, forced(two), "Checking.", {{"get_weather", R"({"city": "Oslo", "days": 2})"}, {"get_time", "{}"}},
                "tool_calls");
  // parallel_tool_calls false: the first call only.
  expect_answer(s, forced(two, {{"parallel_tool_calls", false}}), "Checking.",
                {{"get_weather", R"({"city": "Oslo", "days": 2})"}}, "tool_calls");
  // Cut off before <tool_call|>: no call, the text is the content (vLLM's whole-output reading).
  const std::string cut = "<|tool_call>call:get_weather{city:" + kQ + "Os";
  expect_answer(s, forced(cut), cut, {}, "stop");
  // tool_choice none: the call syntax is text.
  expect_answer(s, forced(two, {{"tool_choice", "none"}}), two, {}, "stop");
}

TEST(ServerGemma4, TheParserByName) {
  constexpr const char* kPlain = "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}model: ";
  ChatTestServer s(model_with_template("gemma4_by_name", kPlain), "", "none", "gemma4");
  ASSERT_TRUE(s.ok());
  expect_answer(s, forced(call("get_time", "")), nullptr, {{"get_time", "{}"}}, "tool_calls");
}

// required: the output is constrained to a call array, as for every syntax (vLLM constrains a
// forced choice with JSON whatever the parser), and comes back as a call of one of the tools.
TEST(ServerGemma4, RequiredIsConstrained) {
  ChatTestServer s(model_with_template("gemma4_required", gemma4_template()));
  ASSERT_TRUE(s.ok());
  json bias = {{"2", 100}};
  for (char c : std::string(" \t\r\n")) bias[std::to_string(3 + c)] = -100;
  // Tools whose arguments the tiny model cannot ramble in (EOS pushed up, blanks banned).
  const json tools = json::array(
      {{{"type", "function"},
        {"function", {{"name", "get_time"},
                      {"parameters", {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}}}}},
       {{"type", "function"},
        {"function", {{"name", "get_tz"},
                      {"parameters", {{"type", "object"}, {"properties", {{"tz", {{"enum", {"UTC", "CET"}}}}}},
                                      {"required", {"tz"}}, {"additionalProperties", false}}}}}}});
  json body = forced("", {{"tools", tools}, {"tool_choice", "required"}, {"parallel_tool_calls", false},
                          {"logit_bias", bias}, {"max_tokens", 64}});
  body.erase("guided_choice");
  const ChatAnswer a = testing::whole_answer(s, body);
  EXPECT_EQ(a.finish, "tool_calls");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_TRUE(a.calls[0].first == "get_time" || a.calls[0].first == "get_tz") << a.calls[0].first;
  const json args = json::parse(a.calls[0].second);
  const json utc = {{"tz", "UTC"}}, cet = {{"tz", "CET"}};
  EXPECT_TRUE(args == json::object() || args == utc || args == cet) << args;
}

// The fixtures' conversations sent over HTTP make the prompt transformers renders: compared by
// token count against /tokenize of the reference text.
TEST(ServerGemma4, ConversationsReachTheTemplateAsTransformersPassesThem) {
  const auto data = brigade::testing::load_fixture_json("chat_gemma4/cases.json");
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_gemma4/cases.json: run scripts/make_chat_gemma4_fixtures.py";
  ChatTestServer s(model_with_template("gemma4_history", gemma4_template(), 4096));
  ASSERT_TRUE(s.ok());
  int n_compared = 0;
  for (const auto& c : data["cases"]) {
    if (c["template"] != "gemma-4" || !c["add_generation_prompt"].get<bool>()) continue;
    SCOPED_TRACE(c["conversation"].get<std::string>() + (c.contains("template_kwargs") ? c["template_kwargs"].dump() : ""));
    std::string expected = c["expected"].get<std::string>();
    ASSERT_TRUE(expected.starts_with("<bos>"));
    expected = "<s>" + expected.substr(5);  // the synthetic tokenizer's bos_token
    auto tokens = s.post("/tokenize", {{"prompt", expected}, {"add_special_tokens", false}});
    ASSERT_EQ(tokens.status, 200) << tokens.body;
    json body = {{"model", "tiny"}, {"messages", json::parse(c["messages"].dump())}, {"max_tokens", 1}, {"temperature", 0}};
    if (!c["tools"].empty()) body["tools"] = json::parse(c["tools"].dump());
    if (c.contains("template_kwargs")) body["chat_template_kwargs"] = json::parse(c["template_kwargs"].dump());
    auto r = s.chat(body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], json::parse(tokens.body)["count"]);
    ++n_compared;
  }
  EXPECT_GE(n_compared, 15);
}

// Gemma 4's thought channel: `<|channel>` and `<channel|>` are special tokens of its tokenizer.
std::string model_with_channel_tokens(const std::string& tag, const std::string& source, int32_t& open, int32_t& close) {
  const std::string model = model_with_template(tag, source);
  const auto ids = testing::add_tokens(model, {"<|channel>", "<channel|>"}, /*special=*/true);
  open = ids[0];
  close = ids[1];
  return model;
}

// The thought channel comes back as reasoning_content under --reasoning-parser `parser`.
void check_thought_channel(const std::string& parser) {
  int32_t open = -1, close = -1;
  ChatTestServer s(model_with_channel_tokens("gemma4_reason_" + parser, gemma4_template(), open, close), "", parser);
  ASSERT_TRUE(s.ok());
  // enable_thinking false ends the prompt with an empty closed channel: the output is read from
  // its first token; forced to think anyway, and to call after it.
  const json off = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  const std::string thought = "<|channel>thought\nOslo: call get_weather.<channel|>";
  json body = forced(thought + call("get_weather", "city:" + kQ + "Oslo" + kQ), off);
  expect_answer(s, body, nullptr, {{"get_weather", R"({"city": "Oslo"})"}}, "tool_calls", "Oslo: call get_weather.");
  body = forced(thought + "It is cold.", off);
  body.erase("tools");
  body.erase("tool_choice");
  expect_answer(s, body, "It is cold.", {}, "stop", "Oslo: call get_weather.");
  // Without the channel: all content.
  body["guided_choice"] = {"Just an answer."};
  expect_answer(s, body, "Just an answer.", {}, "stop");
}

// By name, and by `auto` from the vocabulary's `<|channel>` and `<channel|>` tokens.
TEST(ServerGemma4, TheThoughtChannelIsReasoning) {
  for (const char* parser : {"gemma4", "auto"}) {
    SCOPED_TRACE(parser);
    check_thought_channel(parser);
  }
}

// thinking_token_budget: the block the model opens with `<|channel>` (the thinking prompt leaves
// it to the model) is closed by a forced `<channel|>` after the budget.
TEST(ServerGemma4, TheThinkingBudgetClosesTheChannel) {
  int32_t open = -1, close = -1;
  ChatTestServer s(model_with_channel_tokens("gemma4_budget", gemma4_template(), open, close), "", "gemma4");
  ASSERT_TRUE(s.ok());
  json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
               {"chat_template_kwargs", {{"enable_thinking", true}}}, {"max_tokens", 2}, {"temperature", 0},
               {"return_token_ids", true}, {"thinking_token_budget", 0},
               {"logit_bias", {{std::to_string(open), 100}}}};
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  ASSERT_EQ(choice["token_ids"].size(), 2u) << choice;
  EXPECT_EQ(choice["token_ids"][0], open);
  EXPECT_EQ(choice["token_ids"][1], close) << "a budget of 0 closes the channel at once";
  const json& reasoning = choice["message"]["reasoning_content"];
  EXPECT_TRUE(reasoning.is_null() || reasoning == "") << choice << ": an empty channel";

  // A prompt that leaves the channel open (as llama.cpp's continuation of a reasoning prefill
  // writes it): the first tokens think, then `<channel|>` is forced and the rest is the answer.
  const std::string opens = std::string("{%- for m in messages %}<|turn>{{ m.role }}\n{{ m.content }}<turn|>\n") +
                            "{% endfor %}<|turn>model\n<|channel>thought\n";
  ChatTestServer o(model_with_channel_tokens("gemma4_budget_open", opens, open, close), "", "gemma4");
  ASSERT_TRUE(o.ok());
  body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
          {"max_tokens", 12}, {"temperature", 0}, {"return_token_ids", true}, {"thinking_token_budget", 4},
          {"logit_bias", {{std::to_string(close), -100}}}};
  r = o.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json budgeted = json::parse(r.body)["choices"][0];
  ASSERT_EQ(budgeted["token_ids"].size(), 12u) << budgeted;
  EXPECT_EQ(budgeted["token_ids"][4], close);
  ASSERT_TRUE(budgeted["message"]["reasoning_content"].is_string()) << budgeted;
  ASSERT_TRUE(budgeted["message"]["content"].is_string()) << "the answer follows the forced close: " << budgeted;
  const ChatAnswer streamed = testing::streamed_answer(o, body);
  EXPECT_EQ(streamed.reasoning, budgeted["message"]["reasoning_content"]);
  EXPECT_EQ(streamed.content, budgeted["message"]["content"]);
}

}  // namespace
}  // namespace brigade::server
