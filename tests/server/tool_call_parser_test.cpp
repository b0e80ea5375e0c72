// ToolCallParser: model text → content and tool calls, whole and in pieces. Expected results
// follow vLLM's hermes and llama3_json parsers (arguments re-serialized as Python's json.dumps
// writes them), with brigade's documented differences: a malformed block stays content instead
// of turning the whole output into content.
#include "server/tool_call_parser.h"
#include "tests/server/tool_parse_test_util.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

namespace brigade::server {
namespace {

using testing::Call;
using testing::expect_any_split;
using testing::Result;

Result run(ToolParserKind kind, const std::string& text, size_t step = 0, int max_calls = INT_MAX,
           const std::string& named = "", const std::string& key = "arguments") {
  return testing::run(kind, text, step, {max_calls, named, key, {}});
}

TEST(ToolCallParser, HermesCallsAndContent) {
  expect_any_split(ToolParserKind::hermes,
                   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Zürich\",\"days\":2}}\n</tool_call>",
                   "", {{"get_weather", R"({"city": "Zürich", "days": 2})"}});
  // Text before the calls is content; whitespace between and after the calls is not.
  expect_any_split(ToolParserKind::hermes,
                   "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                   "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2.5, null, true]}}\n</tool_call>\n",
                   "Let me check.", {{"a", "{}"}, {"b", R"({"x": [1, 2.5, null, true]})"}});
  // No call: everything is content, whitespace included.
  expect_any_split(ToolParserKind::hermes, "Just text, <b>tags</b> and a < sign\n\n", "Just text, <b>tags</b> and a < sign\n\n", {});
  expect_any_split(ToolParserKind::hermes, "ends with a partial <tool_c", "ends with a partial <tool_c", {});
}

TEST(ToolCallParser, HermesMalformedBlocksStayContent) {
  const std::string bad = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>";
  expect_any_split(ToolParserKind::hermes, bad, bad, {});
  // A valid call next to a malformed one: the malformed one is content.
  expect_any_split(ToolParserKind::hermes,
                   bad + "\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>", bad, {{"b", "{}"}});
  // Missing name, arguments not an object.
  for (const std::string body : {R"({"arguments": {}})", R"({"name": "a", "arguments": "x"})", R"({"name": "", "arguments": {}})"}) {
    const std::string text = "<tool_call>" + body + "</tool_call>";
    expect_any_split(ToolParserKind::hermes, text, text, {});
  }
  // An unclosed final block counts when its JSON is whole, else it is content.
  expect_any_split(ToolParserKind::hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}\n",
                   "", {{"a", R"({"k": "v"})"}});
  expect_any_split(ToolParserKind::hermes, "<tool_call>\n{\"name\": \"a\", \"argu", "<tool_call>\n{\"name\": \"a\", \"argu", {});
}

TEST(ToolCallParser, HermesParallelFalseKeepsTheFirstCall) {
  expect_any_split(ToolParserKind::hermes,
                   "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
                   "", {{"a", "{}"}}, {.max_calls = 1});
}

TEST(ToolCallParser, HermesStreamsContentBeforeTheCallEnds) {
  auto p = make_tool_call_parser(ToolParserKind::hermes, INT_MAX);
  EXPECT_EQ(p->feed("Hello wor").content, "Hello wor");
  EXPECT_EQ(p->feed("ld <tool").content, "ld") << "a possible tag start and trailing whitespace are held";
  ToolParse mid = p->feed("_call>{\"name\": \"f\", \"arguments\": {\"q\": \"ü\\n\\\"\"}}");
  EXPECT_EQ(mid.content, "");
  EXPECT_TRUE(mid.calls.empty()) << "the call is complete only at its closing tag";
  ToolParse done = p->feed("</tool_call>");
  ASSERT_EQ(done.calls.size(), 1u);
  EXPECT_EQ(done.calls[0].name, "f");
  EXPECT_EQ(done.calls[0].arguments, R"({"q": "ü\n\""})");
  EXPECT_EQ(p->n_calls(), 1);
}

TEST(ToolCallParser, Llama3Json) {
  expect_any_split(ToolParserKind::llama3_json, R"({"name": "get_weather", "parameters": {"city": "東京"}})", "",
                   {{"get_weather", R"({"city": "東京"})"}});
  expect_any_split(ToolParserKind::llama3_json,
                   "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"n\": 1}}",
                   "", {{"a", "{}"}, {"b", R"({"n": 1})"}});
  expect_any_split(ToolParserKind::llama3_json, "  \n{\"name\": \"a\", \"parameters\": {\"s\": \"}{\"}}\n", "",
                   {{"a", R"({"s": "}{"})"}});
  // Text, or any malformed object: all content.
  expect_any_split(ToolParserKind::llama3_json, "The answer is {42}.", "The answer is {42}.", {});
  expect_any_split(ToolParserKind::llama3_json, R"({"name": "a", "parameters": {}} and more)",
                   R"({"name": "a", "parameters": {}} and more)", {});
  expect_any_split(ToolParserKind::llama3_json, R"({"name": "a", "parameters": {)", R"({"name": "a", "parameters": {)", {});
  expect_any_split(ToolParserKind::llama3_json, R"({"city": "Paris"})", R"({"city": "Paris"})", {});
  expect_any_split(ToolParserKind::llama3_json, "<|python", "<|python", {});
}

TEST(ToolCallParser, Llama3TextStreamsAtOnce) {
  auto p = make_tool_call_parser(ToolParserKind::llama3_json, INT_MAX);
  EXPECT_EQ(p->feed("  ").content, "");
  EXPECT_EQ(p->feed("Sure").content, "  Sure");
  EXPECT_EQ(p->feed(" {x}").content, " {x}");
  EXPECT_EQ(p->finish().content, "");
}

TEST(ToolCallParser, ForcedNamedStreamsArguments) {
  auto p = make_tool_call_parser(ToolParserKind::forced_named, INT_MAX, "get_weather");
  ToolParse first = p->feed("{\"city\"");
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].name, "get_weather");
  EXPECT_EQ(first.calls[0].arguments, "{\"city\"");
  ToolParse next = p->feed(": \"Oslo\"}");
  ASSERT_EQ(next.calls.size(), 1u);
  EXPECT_EQ(next.calls[0].name, "");
  EXPECT_EQ(next.calls[0].arguments, ": \"Oslo\"}");
  EXPECT_TRUE(p->finish().calls.empty());
  Result empty = run(ToolParserKind::forced_named, "", 0, INT_MAX, "f");
  EXPECT_EQ(empty.calls, (std::vector<Call>{{"f", ""}})) << "a forced call exists even with no output";
}

TEST(ToolCallParser, ForcedArray) {
  const std::string text = R"([{"name":"a","arguments":{"x":1}}, {"name":"b","arguments":{"s":"]}"}}])";
  for (size_t step : {size_t{0}, size_t{1}, size_t{5}}) {
    Result r = run(ToolParserKind::forced_array, text, step);
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls, (std::vector<Call>{{"a", R"({"x": 1})"}, {"b", R"({"s": "]}"})"}}));
  }
  auto p = make_tool_call_parser(ToolParserKind::forced_array, INT_MAX, "", "parameters");
  EXPECT_TRUE(p->feed(R"([{"name":"a","parameters":{)").calls.empty());
  EXPECT_EQ(p->feed(R"(}},)").calls.size(), 1u) << "a call goes out when its object closes";
  // Truncated before any call closed: the text is content.
  Result cut = run(ToolParserKind::forced_array, R"([{"name":"a","argu)");
  EXPECT_EQ(cut.content, R"([{"name":"a","argu)");
  EXPECT_TRUE(cut.calls.empty());
}

// Random texts of tags, JSON pieces and text: every parser gives the same content and calls
// however the text is split (and never crashes).
TEST(ToolCallParser, FuzzSplitsAgree) {
  const char* kPieces[] = {"<tool_call>", "</tool_call>", R"({"name": "f", "arguments": {"a": [1, "}"]}})",
                           R"({"name": "g", "parameters": {}})", "<|python_tag|>", "[", "]", ",", ";", "{", "}", "\"",
                           "\\", " ", "\n", "x", "ü", "<", "<tool", "_call>", "</tool"};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += kPieces[rng() % std::size(kPieces)];
    for (ToolParserKind kind : {ToolParserKind::hermes, ToolParserKind::llama3_json, ToolParserKind::forced_named,
                                ToolParserKind::forced_array}) {
      const Result whole = run(kind, text, 0, INT_MAX, "f");
      for (size_t step : {size_t{1}, size_t{4}}) {
        const Result split = run(kind, text, step, INT_MAX, "f");
        ASSERT_EQ(split.content, whole.content) << "kind " << static_cast<int>(kind) << " text " << text;
        ASSERT_EQ(split.calls, whole.calls) << "kind " << static_cast<int>(kind) << " text " << text;
      }
    }
  }
}

TEST(ToolCallParser, JsonValueEnd) {
  EXPECT_EQ(json_value_end(R"({"a": "}"} x)", 0), 10u);
  EXPECT_EQ(json_value_end(R"(x [1, [2]], 3)", 2), 10u);
  EXPECT_EQ(json_value_end(R"("a\"b" )", 0), 6u);
  EXPECT_EQ(json_value_end(R"({"a": {)", 0), std::string::npos);
}

}  // namespace
}  // namespace brigade::server
