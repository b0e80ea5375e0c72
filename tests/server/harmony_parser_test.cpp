// The harmony parser (gpt-oss): the outputs of OpenAI's harmony guide (openai/harmony
// docs/format.md) split as vLLM's openai_gptoss reasoning parser and openai tool parser split
// them, and the same split however the output is cut into streamed pieces.
#include "server/harmony_parser.h"

#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

namespace brigade::server {
namespace {

struct Call {
  std::string name, arguments;
  bool operator==(const Call&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Call& c) { return os << c.name << "(" << c.arguments << ")"; }

struct Split {
  std::string reasoning, content;
  std::vector<Call> calls;
};

void apply(const HarmonyParse& p, Split& s) {
  s.reasoning += p.reasoning;
  s.content += p.content;
  for (const ToolCallDelta& d : p.calls) {
    if (!d.name.empty()) {
      ASSERT_EQ(d.index, static_cast<int>(s.calls.size())) << "calls are numbered in order";
      s.calls.push_back({d.name, ""});
    }
    ASSERT_LT(d.index, static_cast<int>(s.calls.size()));
    s.calls[static_cast<size_t>(d.index)].arguments += d.arguments;
  }
}

constexpr const char* kPrompt = "<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant";

Split run(const std::vector<std::string>& pieces, bool calls = true, int max_calls = INT_MAX,
          const std::string& prompt = kPrompt) {
  HarmonyParser p(prompt, calls, max_calls);
  Split s;
  for (const std::string& piece : pieces) apply(p.feed(piece), s);
  apply(p.finish(), s);
  return s;
}

struct Case {
  const char* name;
  std::string output, reasoning, content;
  std::vector<Call> calls;
  bool with_calls = true;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // The guide's "Example output" (<|return|> as the detokenizer keeps it when it is not EOS).
      {"guide_answer",
       "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.<|end|>"
       "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
       "User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.", "2 + 2 = 4.", {}},
      // The guide's "Receiving tool calls" (recipient after the channel, <|constrain|>json).
      {"guide_call",
       "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"San Francisco\"}<|call|>",
       "Need to use function get_weather.", "", {{"get_weather", "{\"location\":\"San Francisco\"}"}}},
      {"recipient_in_the_role",
       "<|channel|>analysis<|message|>think<|end|><|start|>assistant to=functions.get_time<|channel|>commentary "
       "json<|message|>{}<|call|>",
       "think", "", {{"get_time", "{}"}}},
      // The guide's preamble: a commentary message without a recipient is for the user.
      {"preamble_then_call",
       "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>commentary<|message|>**Action plan**: "
       "two files<|end|><|start|>assistant<|channel|>commentary to=functions.generate_file<|constrain|>json"
       "<|message|>{\"path\": \"index.html\"}<|call|>",
       "plan", "**Action plan**: two files", {{"generate_file", "{\"path\": \"index.html\"}"}}},
      {"two_calls",
       "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{\"x\": 1}<|end|><|start|>assistant"
       "<|channel|>commentary to=functions.b <|constrain|>json<|message|>{}<|call|>",
       "", "", {{"a", "{\"x\": 1}"}, {"b", "{}"}}},
      {"two_analysis_messages_join_with_a_newline",
       "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
       "<|start|>assistant<|channel|>final<|message|>done",
       "one\ntwo", "done", {}},
      {"built_in_tool_is_reasoning",
       "<|channel|>analysis to=browser.search code<|message|>{\"query\": \"x\"}<|call|>", "{\"query\": \"x\"}", "", {}},
      {"calls_off_keeps_the_body_as_content",
       "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>", "", "{\"a\": 1}", {}, false},
      {"cut_while_thinking", "<|channel|>analysis<|message|>still thin", "still thin", "", {}},
      {"cut_in_the_final", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>The ans",
       "a", "The ans", {}},
      {"cut_in_a_header", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin", "a", "", {}},
      {"cut_in_a_marker", "<|channel|>final<|message|>x<|en", "", "x<|en", {}},
      {"cut_in_the_arguments", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ", "", "",
       {{"f", "{\"a\": "}}},
      {"stopped_at_once", "<|call|>", "", "", {}},
      {"not_harmony_is_content", "{\"answer\": 4}", "", "{\"answer\": 4}", {}},
      {"plain_text_like_a_header_start", " t", "", " t", {}},
      {"utf8", "<|channel|>analysis<|message|>Zürich? 東京<|end|><|start|>assistant<|channel|>final<|message|>→ Zürich",
       "Zürich? 東京", "→ Zürich", {}},
      {"angle_brackets_in_a_body", "<|channel|>final<|message|>a < b <| c", "", "a < b <| c", {}},
  };
  return all;
}

TEST(HarmonyParser, SplitsChannelsAndCallsHoweverTheTextIsCut) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto check = [&](const Split& s, const std::string& how) {
      EXPECT_EQ(s.reasoning, c.reasoning) << how;
      EXPECT_EQ(s.content, c.content) << how;
      EXPECT_EQ(s.calls, c.calls) << how;
    };
    check(run({c.output}, c.with_calls), "whole");
    for (size_t cut = 1; cut < c.output.size(); ++cut)
      check(run({c.output.substr(0, cut), c.output.substr(cut)}, c.with_calls), "cut at " + std::to_string(cut));
    std::vector<std::string> bytes;
    for (char ch : c.output) bytes.emplace_back(1, ch);
    check(run(bytes, c.with_calls), "byte by byte");
  }
}

TEST(HarmonyParser, CallsPastTheLimitAreDropped) {
  const std::string two =
      "<|channel|>commentary to=functions.a<|message|>{}<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.b<|message|>{\"y\": 2}<|call|>";
  const Split s = run({two}, true, 1);
  EXPECT_EQ(s.calls, (std::vector<Call>{{"a", "{}"}}));
  EXPECT_EQ(s.content, "");
}

TEST(HarmonyParser, APromptThatOpensTheFinalMessageMakesTheOutputContent) {
  const Split s = run({"The answer.<|return|>"}, true, INT_MAX,
                      "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>");
  EXPECT_EQ(s.content, "The answer.");
  EXPECT_EQ(s.reasoning, "");
  const Split analysis = run({"hmm<|end|><|start|>assistant<|channel|>final<|message|>ok"}, true, INT_MAX,
                             "<|start|>assistant<|channel|>analysis<|message|>");
  EXPECT_EQ(analysis.reasoning, "hmm");
  EXPECT_EQ(analysis.content, "ok");
}

// Where a constrained answer starts (routes.cpp, delay_constraint): at once only in a final
// message the prompt began; else after the output's own final header.
TEST(HarmonyParser, APromptOpensTheFinalMessageOnlyInItsLastOpenMessage) {
  EXPECT_TRUE(harmony_prompt_opens_final("<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>"));
  EXPECT_TRUE(harmony_prompt_opens_final("<|start|>assistant<|channel|>final <|constrain|>json<|message|>"));
  EXPECT_FALSE(harmony_prompt_opens_final("<|start|>user<|message|>Hi<|end|><|start|>assistant"));
  EXPECT_FALSE(harmony_prompt_opens_final("<|start|>assistant<|channel|>analysis<|message|>"));
  EXPECT_FALSE(harmony_prompt_opens_final("<|start|>assistant<|channel|>final"));  // the header not yet ended
  EXPECT_FALSE(harmony_prompt_opens_final("<|start|>assistant<|channel|>final<|message|>Hi<|end|>"))
      << "an earlier answer, closed";
  EXPECT_FALSE(harmony_prompt_opens_final("<|start|>assistant<|channel|>final<|message|>Hi<|end|><|start|>assistant"));
  EXPECT_FALSE(harmony_prompt_opens_final("<|start|>assistant to=functions.f<|channel|>final<|message|>"))
      << "a message to a function is a call";
  EXPECT_FALSE(harmony_prompt_opens_final("<|channel|>final<|message|>")) << "no <|start|>: no message the prompt opened";
}

TEST(HarmonyParser, ACallThePromptBeganIsNotTheOutputs) {
  const Split s = run({"{\"a\": 1}<|call|><|start|>assistant<|channel|>commentary to=functions.g<|message|>{}<|call|>"}, true,
                      INT_MAX, "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
  EXPECT_EQ(s.calls, (std::vector<Call>{{"g", "{}"}}));
  EXPECT_EQ(s.content, "");
}

TEST(HarmonyParser, AClosedPromptStillReadsTheOutputsHeader) {
  // No open header in the prompt (a template of another shape): the output's own header decides.
  const Split s = run({"<|channel|>final<|message|>hi"}, true, INT_MAX, "User: hi\nAssistant:");
  EXPECT_EQ(s.content, "hi");
  const Split plain = run({"hello there"}, true, INT_MAX, "User: hi\nAssistant:");
  EXPECT_EQ(plain.content, "hello there");
}

}  // namespace
}  // namespace brigade::server
