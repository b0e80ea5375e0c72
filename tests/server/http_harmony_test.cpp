// gpt-oss's harmony format through the HTTP server in-process: a tiny synthetic model with the
// harmony tokens in its vocabulary, served with the built-in `harmony` chat template, has its
// output forced (guided_choice of one harmony text; the tokens are added as plain tokens here so
// that guided decoding can spell them). The openai_gptoss reasoning parser puts the analysis
// channel in reasoning_content, the final channel in content, and commentary messages to
// functions.NAME become tool_calls (finish_reason tool_calls), whole and streamed; a model whose
// harmony tokens are special tokens (as gpt-oss's) gets `auto` resolved to openai_gptoss and
// stops at `<|call|>` / `<|return|>`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatAnswer;
using testing::ChatTestServer;
using testing::model_with_template;

const std::vector<std::string> kHarmonyTokens = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                                                 "<|constrain|>", "<|return|>", "<|call|>"};

// model_with_template's model (its own template never used: `--chat-template harmony`) with the
// harmony tokens; returns the path and the tokens' ids (in kHarmonyTokens' order).
std::pair<std::string, std::vector<int32_t>> harmony_model(const std::string& tag, bool special) {
  const std::string model = model_with_template(tag, "{{ 'unused' }}");
  return {model, testing::add_tokens(model, kHarmonyTokens, special)};
}

// The model whose output the tests below force with a guided_choice of a whole harmony text: the
// harmony tokens plain, but for `<|message|>`, which the vocabulary then spells in bytes. With
// `<|message|>` one token a constraint would wait for the final channel's header
// (AConstrainedAnswerIsTheFinalMessage); without it the constraint applies from the first token
// and forces the analysis too.
std::string forced_harmony_model(const std::string& tag) {
  const std::string model = model_with_template(tag, "{{ 'unused' }}");
  std::vector<std::string> tokens = kHarmonyTokens;
  std::erase(tokens, "<|message|>");
  testing::add_tokens(model, tokens, /*special=*/false);
  return model;
}

json forced(const std::string& output, bool tools) {
  json body = {{"model", "tiny"},
               {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
               {"guided_choice", {output}},
               {"max_tokens", 400},
               {"temperature", 0}};
  if (tools) body["tools"] = testing::weather_and_time_tools();
  return body;
}

ChatAnswer whole(const ChatTestServer& s, const json& body) {
  ChatAnswer a = testing::whole_answer(s, body);
  for (const std::string& id : a.ids) EXPECT_TRUE(id.starts_with("call_")) << id;
  return a;
}

void expect_both(const ChatTestServer& s, const json& body, const ChatAnswer& want) {
  for (const ChatAnswer& got : {whole(s, body), testing::streamed_answer(s, body)}) {
    EXPECT_EQ(got.reasoning, want.reasoning);
    EXPECT_EQ(got.content, want.content);
    EXPECT_EQ(got.calls, want.calls);
    EXPECT_EQ(got.finish, want.finish);
  }
}

constexpr const char* kAnswer =
    "<|channel|>analysis<|message|>User asks about Oslo. Answer.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>It is cold in Oslo.<|return|>";
constexpr const char* kCalls =
    "<|channel|>analysis<|message|>Need get_weather.<|end|><|start|>assistant<|channel|>commentary "
    "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|end|><|start|>assistant to=functions.get_time"
    "<|channel|>commentary json<|message|>{}<|call|>";

TEST(ServerHarmony, AnalysisIsReasoningAndFinalIsContent) {
  ChatTestServer s(forced_harmony_model("harmony_answer"), "harmony", "openai_gptoss");
  ASSERT_TRUE(s.ok());
  expect_both(s, forced(kAnswer, false), {"User asks about Oslo. Answer.", "It is cold in Oslo.", {}, "stop"});
  json dropped = forced(kAnswer, false);
  dropped["include_reasoning"] = false;
  expect_both(s, dropped, {nullptr, "It is cold in Oslo.", {}, "stop"});
}

TEST(ServerHarmony, CommentaryCallsBecomeToolCalls) {
  ChatTestServer s(forced_harmony_model("harmony_calls"), "harmony", "openai_gptoss");
  ASSERT_TRUE(s.ok());
  expect_both(s, forced(kCalls, true),
              {"Need get_weather.", nullptr, {{"get_weather", "{\"city\":\"Oslo\"}"}, {"get_time", "{}"}}, "tool_calls"});
  // parallel_tool_calls false: the first call only.
  json one = forced(kCalls, true);
  one["parallel_tool_calls"] = false;
  expect_both(s, one, {"Need get_weather.", nullptr, {{"get_weather", "{\"city\":\"Oslo\"}"}}, "tool_calls"});
  // A final answer with tools offered is content.
  expect_both(s, forced(kAnswer, true), {"User asks about Oslo. Answer.", "It is cold in Oslo.", {}, "stop"});
  // Forcing a call would constrain the header too: refused by name.
  json required = forced(kCalls, true);
  required.erase("guided_choice");
  required["tool_choice"] = "required";
  auto r = s.chat(required);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("harmony"), std::string::npos) << r.body;
}

TEST(ServerHarmony, ToolParserAloneReadsTheCalls) {
  // --tool-call-parser openai without a reasoning parser: the analysis is neither content nor a call.
  ChatTestServer s(forced_harmony_model("harmony_tools_only"), "harmony", "none", "openai");
  ASSERT_TRUE(s.ok());
  expect_both(s, forced(kCalls, true), {nullptr, nullptr, {{"get_weather", "{\"city\":\"Oslo\"}"}, {"get_time", "{}"}}, "tool_calls"});
}

TEST(ServerHarmony, OutputCutByMaxTokensKeepsItsField) {
  ChatTestServer s(forced_harmony_model("harmony_cut"), "harmony", "openai_gptoss");
  ASSERT_TRUE(s.ok());
  const std::string analysis = "<|channel|>analysis<|message|>", final = "<|start|>assistant<|channel|>final<|message|>";
  int n_in_analysis = 0, n_in_final = 0;
  // The model spells most of the harmony tokens byte by byte here (guided decoding lets it): cuts
  // fall inside markers too.
  for (int max_tokens = 1; max_tokens <= 160; max_tokens += 3) {
    SCOPED_TRACE(max_tokens);
    json body = forced(kAnswer, false);
    body["max_tokens"] = max_tokens;
    // The raw text of the first tokens (separate_reasoning false: the output stays whole).
    json raw_body = body;
    raw_body["separate_reasoning"] = false;
    auto raw = s.chat(raw_body);
    ASSERT_EQ(raw.status, 200) << raw.body;
    const std::string text = json::parse(raw.body)["choices"][0]["message"]["content"];
    if (text.find("<|return|>") != std::string::npos) break;
    if (!text.starts_with(analysis) || text.size() == analysis.size()) continue;  // in a header: nothing yet
    const size_t end = text.find("<|end|>");
    if (end == std::string::npos) {  // in the analysis: a marker's start that never completed is body text
      ++n_in_analysis;
      expect_both(s, body, {text.substr(analysis.size()), nullptr, {}, "length"});
      continue;
    }
    const size_t body_at = text.find(final);
    if (body_at == std::string::npos || text.size() == body_at + final.size()) continue;
    ++n_in_final;
    expect_both(s, body, {text.substr(analysis.size(), end - analysis.size()), text.substr(body_at + final.size()), {}, "length"});
  }
  EXPECT_GT(n_in_analysis, 2);
  EXPECT_GT(n_in_final, 2);
}

TEST(ServerHarmony, ReasoningEffortIsATemplateVariable) {
  // A Jinja template that shows what it was given (as transformers passes reasoning_effort to gpt-oss's).
  const std::string model = model_with_template(
      "harmony_effort", "{%- if reasoning_effort is defined %}{{ raise_exception('effort ' + reasoning_effort) }}{% endif %}"
                        "{%- for m in messages %}{{ m.content }}{% endfor %}");
  ChatTestServer s(model);
  ASSERT_TRUE(s.ok());
  json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1}};
  EXPECT_EQ(s.chat(body).status, 200);
  body["reasoning_effort"] = "high";
  auto r = s.chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("effort high"), std::string::npos) << r.body;
  body["reasoning_effort"] = "extreme";
  r = s.chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("low, medium, high"), std::string::npos) << r.body;
  // The built-in harmony family takes it (and no other variable).
  ChatTestServer h(forced_harmony_model("harmony_effort_builtin"), "harmony");
  ASSERT_TRUE(h.ok());
  body["reasoning_effort"] = "low";
  EXPECT_EQ(h.chat(body).status, 200);
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  r = h.chat(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("only reasoning_effort"), std::string::npos) << r.body;
}

// gpt-oss's harmony tokens are special tokens: `auto` finds `<|channel|>` in the vocabulary, and
// the output ends at `<|call|>` or `<|return|>` (stop tokens a harmony chat adds), whose text never
// reaches the answer.
TEST(ServerHarmony, SpecialTokensAutoAndStops) {
  const auto [model, ids] = harmony_model("harmony_special", true);
  ChatTestServer s(model, "harmony", "auto");
  ASSERT_TRUE(s.ok());
  json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 5}, {"temperature", 0}};
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["choices"][0]["message"].contains("reasoning_content")) << "auto: openai_gptoss";
  for (const int32_t stop : {ids[5], ids[6]}) {  // <|return|>, <|call|>
    SCOPED_TRACE(stop);
    body["logit_bias"] = {{std::to_string(stop), 100}};
    r = s.chat(body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["usage"]["completion_tokens"], 1) << "stopped at the token";
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(j["choices"][0]["message"]["content"].is_null()) << j;
  }
}

// A constrained answer (guided_choice here; response_format alike) is the final channel's
// message, as vLLM's gpt-oss structured output: the output is free until `<|message|>` comes
// shortly after `<|channel|>final` ("final" one plain token, as in o200k_harmony), whatever came
// before, and the choice follows it.
TEST(ServerHarmony, AConstrainedAnswerIsTheFinalMessage) {
  std::vector<std::pair<std::string, bool>> tags;
  for (const std::string& t : kHarmonyTokens) tags.emplace_back(t, true);
  tags.emplace_back("final", false);
  const std::string model = model_with_template("harmony_constrained", "{{ 'unused' }}");
  const std::vector<int32_t> ids = testing::add_tokens(model, tags);
  const int32_t message = ids[2], channel = ids[3], final_word = ids[7];
  ChatTestServer s(model, "harmony", "auto");
  ASSERT_TRUE(s.ok());
  const std::vector<std::string> choices = {"A", "B", "C"};  // one byte token each
  json body = {{"messages", {{{"role", "user"}, {"content", "Pick one."}}}},
               {"guided_choice", choices},
               {"max_tokens", 200},
               {"temperature", 1.0}};

  // The three header tokens pushed up: the output wanders among them until the header comes
  // whole (drawn by the seed), then the mask leaves only the choices, then the end.
  body["logit_bias"] = {{std::to_string(channel), 100}, {std::to_string(final_word), 100}, {std::to_string(message), 100}};
  for (int seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    body["seed"] = seed;
    auto r = s.chat(body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    const json& choice = j["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop") << j;
    ASSERT_TRUE(choice["message"]["content"].is_string()) << j;
    std::string content = choice["message"]["content"];
    // An output that does not start like a header is read raw (all content, markers kept): the
    // stop that ended it, `<|return|>` or `<|call|>` (both end ids once the choice is whole), goes.
    for (const char* stop : {"<|return|>", "<|call|>"})
      if (content.ends_with(stop)) content.resize(content.size() - std::string_view(stop).size());
    ASSERT_FALSE(content.empty());
    const std::string answer = content.substr(content.size() - 1);
    EXPECT_NE(std::find(choices.begin(), choices.end(), answer), choices.end()) << content;
    // Before it: the header (read by the parser, or left in the content when the walk wrote
    // more tokens into the message), at least `<|channel|>final<|message|>` and the end.
    EXPECT_GE(j["usage"]["completion_tokens"].get<int>(), 5) << "the choice did not come first: " << content;
    if (content.size() > 1) {
      EXPECT_TRUE(content.ends_with("<|message|>" + answer)) << content;
    }
  }

  // `<|message|>` with no header before it never ends the reasoning: nothing is masked.
  body["logit_bias"] = {{std::to_string(message), 100}};
  body["max_tokens"] = 12;
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length") << j;
  EXPECT_EQ(j["usage"]["completion_tokens"], 12) << j;

  // A template that begins the final message itself: the choice from the first token.
  const std::string opened = model_with_template("harmony_opened", "{{ '<|start|>assistant<|channel|>final<|message|>' }}");
  testing::add_tokens(opened, tags);
  ChatTestServer t(opened, "", "openai_gptoss");
  ASSERT_TRUE(t.ok());
  r = t.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop") << j;
  EXPECT_EQ(j["usage"]["completion_tokens"], 2) << j;
  const json& content = j["choices"][0]["message"]["content"];
  ASSERT_TRUE(content.is_string()) << j;
  EXPECT_NE(std::find(choices.begin(), choices.end(), content.get<std::string>()), choices.end()) << j;
}

}  // namespace
}  // namespace brigade::server
