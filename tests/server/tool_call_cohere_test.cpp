// Cohere Command R7B / Command A's tool calls (cohere_command3, server/tool_call_cohere.cpp) and
// the marker filter they share with the reasoning splitter (server/cohere_markers.h): whole and
// cut at every byte, several calls, answer and plan markers dropped, malformed blocks left as
// content, the call limit; the call the real command-r7b template writes parses back.
#include <gtest/gtest.h>

#include <random>

#include "models/chat_template_jinja.h"
#include "server/cohere_markers.h"
#include "server/openai_tools.h"
#include "tests/models/chat_test_util.h"
#include "tests/server/tool_parse_test_util.h"

namespace brigade::server {
namespace {

using testing::Call;
using testing::expect_every_split;
using testing::Result;

constexpr ToolParserKind kCohere = ToolParserKind::cohere_command3;

// Command R7B's template form: a newline after the bracket, calls indented, one per line.
const std::string kTwoCalls =
    "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich\", "
    "\"days\": 2}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {}}\n]<|END_ACTION|>";
const std::vector<Call> kTwo = {{"get_weather", R"({"city": "Zürich", "days": 2})"}, {"get_time", "{}"}};

TEST(CohereToolCalls, ActionBlocks) {
  expect_every_split(kCohere, kTwoCalls, "", kTwo);
  // Any JSON whitespace; arguments as json.dumps writes them; the model's tool_call_id not kept.
  expect_every_split(kCohere,
                     "<|START_ACTION|>[{\"tool_name\":\"f\",\"parameters\":{\"x\":[1,2.50],\"s\":\"a\\u00e9\"},\"tool_call_id\":\"7\"}]"
                     "<|END_ACTION|>",
                     "", {{"f", R"({"x": [1, 2.5], "s": "aé"})"}});
  // Two blocks, text around them.
  expect_every_split(kCohere, "Checking." + kTwoCalls + " and <|START_ACTION|>[{\"tool_name\": \"g\", \"parameters\": {}}]<|END_ACTION|>",
                     "Checking. and", {kTwo[0], kTwo[1], {"g", "{}"}});
}

// A plan without the reasoning parser is content (its two markers dropped); the answer's markers,
// Command R7B's and Command A Reasoning's, never reach the content.
TEST(CohereToolCalls, PlanAndAnswerMarkersAreDropped) {
  expect_every_split(kCohere, "<|START_THINKING|>I will look up the weather.<|END_THINKING|>" + kTwoCalls,
                     "I will look up the weather.", kTwo);
  expect_every_split(kCohere, "<|START_RESPONSE|>It is sunny in Zürich.<|END_RESPONSE|>", "It is sunny in Zürich.", {});
  expect_every_split(kCohere, "<|START_THINKING|>Easy.<|END_THINKING|><|START_TEXT|>4<|END_TEXT|>", "Easy.4", {});
  // Turn markers too (shown once special tokens are kept); a marker's beginning alone is text.
  expect_every_split(kCohere, "<|START_RESPONSE|>Hi<|END_RESPONSE|><|END_OF_TURN_TOKEN|>", "Hi", {});
  expect_every_split(kCohere, "a <|START_RESP b <|END_", "a <|START_RESP b <|END_", {});
}

TEST(CohereToolCalls, MalformedBlocksStayContent) {
  for (const std::string text :
       {"<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"x\": }}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\"}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": [1]}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"name\": \"f\", \"arguments\": {}}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"a b\", \"parameters\": {}}]<|END_ACTION|>",
        "<|START_ACTION|>{\"tool_name\": \"f\", \"parameters\": {}}<|END_ACTION|>", "<|START_ACTION|>[]<|END_ACTION|>",
        "<|START_ACTION|>not json<|END_ACTION|>", "<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {",
        "<|START_ACTION|>", "<|START_ACT"}) {
    SCOPED_TRACE(text);
    expect_every_split(kCohere, text, text, {});
  }
  // A malformed block next to a good one: the good one is a call.
  const std::string bad = "<|START_ACTION|>[{\"tool_name\": \"f\"}]<|END_ACTION|>";
  expect_every_split(kCohere, bad + kTwoCalls, bad, kTwo);
}

// Cut off by the end of the output (max_tokens, or a stop), a block counts when its array is whole.
TEST(CohereToolCalls, ABlockCutOffCountsWhenItsArrayIsWhole) {
  expect_every_split(kCohere, "<|START_ACTION|>[{\"tool_name\": \"get_time\", \"parameters\": {}}]\n", "", {{"get_time", "{}"}});
  const std::string cut = "<|START_ACTION|>[{\"tool_name\": \"get_time\", \"parameters\": {}},";
  expect_every_split(kCohere, cut, cut, {});
}

TEST(CohereToolCalls, ParallelFalseKeepsTheFirstCall) {
  expect_every_split(kCohere, kTwoCalls, "", {kTwo[0]}, testing::RunOptions{.max_calls = 1});
  expect_every_split(kCohere, kTwoCalls, "", {}, testing::RunOptions{.max_calls = 0});
}

TEST(CohereToolCalls, NamesAndDetection) {
  EXPECT_EQ(*parse_tool_syntax("cohere_command3"), ChatToolSyntax::cohere_command3);
  EXPECT_EQ(*parse_tool_syntax("cohere_command4"), ChatToolSyntax::cohere_command3) << "the same action blocks";
  EXPECT_STREQ(tool_syntax_name(ChatToolSyntax::cohere_command3), "cohere_command3");
  EXPECT_EQ(tool_parser_kind(ChatToolSyntax::cohere_command3), kCohere);
  const std::string source = brigade::testing::real_chat_template("command-r7b");
  ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  EXPECT_EQ(detect_tool_syntax(source), ChatToolSyntax::cohere_command3);
}

// What the real template writes for an assistant's call (transformers' rendering of
// get_weather({"city": "Zürich", "days": 2}) in models.json) parses back into that call.
TEST(CohereToolCalls, TheTemplatesOwnCallParsesBack) {
  const auto rendered = brigade::testing::chat_template_case("command-r7b", "tools_call_and_result", false);
  ASSERT_TRUE(rendered.is_object()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  const std::string text = rendered["expected"].get<std::string>();
  const size_t from = text.rfind("<|CHATBOT_TOKEN|><|START_THINKING|>");  // the assistant's turn (the preamble names the markers)
  ASSERT_NE(from, std::string::npos);
  const size_t to = text.find("<|END_OF_TURN_TOKEN|>", from);
  ASSERT_NE(to, std::string::npos);
  const Result r = testing::run(kCohere, text.substr(from, to - from));
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.calls, (std::vector<Call>{{"get_weather", R"({"city": "Zürich", "days": 2})"}}));
}

// Random texts of markers, JSON pieces and text: the same content and calls however the text is
// split, and no marker but a malformed block's ever reaches the content.
TEST(CohereToolCalls, FuzzSplitsAgree) {
  const char* kPieces[] = {"<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>",
                           "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>",
                           "<|END_OF_TURN_TOKEN|>", "[", "]", "{", "}", "\"tool_name\": \"f\", ", "\"parameters\": {}",
                           R"([{"tool_name": "g", "parameters": {"a": 1}}])", ",", " ", "\n", "x", "ü", "<|", "<|START_",
                           "|>"};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += kPieces[rng() % std::size(kPieces)];
    const Result whole = testing::run(kCohere, text);
    for (size_t step : {size_t{1}, size_t{4}}) {
      const Result split = testing::run(kCohere, text, step);
      ASSERT_EQ(split.content, whole.content) << text;
      ASSERT_EQ(split.calls, whole.calls) << text;
    }
    if (whole.content.find("<|START_ACTION|>") == std::string::npos) {
      for (std::string_view m : cohere::dropped_markers())
        ASSERT_EQ(whole.content.find(m), std::string::npos) << text << " → " << whole.content;
    }
  }
}

TEST(CohereMarkerFilter, RemovesMarkersHoweverTheTextIsSplit) {
  const std::string text = "<|START_RESPONSE|>a <|START_b<|END_RESPONSE|><|END_OF_TURN_TOKEN|>c<|";
  const std::string want = "a <|START_bc<|";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    cohere::MarkerFilter f(cohere::dropped_markers());
    std::string out = f.feed(text.substr(0, cut));
    out += f.feed(text.substr(cut));
    out += f.flush();
    EXPECT_EQ(out, want) << "cut at " << cut;
  }
  cohere::MarkerFilter f(cohere::dropped_markers());
  EXPECT_EQ(f.feed("Hi <|END_"), "Hi ") << "a possible marker is held";
  EXPECT_EQ(f.feed("TEXT|>!"), "!");
}

}  // namespace
}  // namespace brigade::server
