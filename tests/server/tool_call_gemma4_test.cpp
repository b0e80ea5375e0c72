// Gemma 4's tool calls (ToolParserKind::gemma4): the call texts Gemma 4's own chat template writes
// (rendered by jinja2 in tests/fixtures/chat_gemma4/cases.json, scripts/make_chat_gemma4_fixtures.py)
// parse back to the arguments the template was given, however the text is cut into streamed
// pieces; values are read as vLLM's gemma4 parser reads them (_parse_gemma4_args /
// _parse_gemma4_value: booleans, null / none / nil, int() without a '.', float() with one, else the
// text); a malformed or cut-off block stays content; text around calls is content.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <iterator>
#include <random>

#include "models/chat_template.h"
#include "server/openai_tools.h"
#include "tests/models/chat_test_util.h"
#include "tests/server/tool_parse_test_util.h"

namespace brigade::server {
namespace {

using testing::Call;
using testing::expect_every_split;
constexpr ToolParserKind kGemma = ToolParserKind::gemma4;

std::string call(const std::string& name, const std::string& args) {
  return "<|tool_call>call:" + name + "{" + args + "}<tool_call|>";
}
std::string quoted(const std::string& s) { return "<|\"|>" + s + "<|\"|>"; }

TEST(Gemma4ToolCalls, TheTemplatesCallTextsParseBack) {
  const auto data = brigade::testing::load_fixture_json("chat_gemma4/cases.json");
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_gemma4/cases.json: run scripts/make_chat_gemma4_fixtures.py";
  ASSERT_GE(data["calls"].size(), 4u);
  for (const auto& c : data["calls"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<Call> want;
    for (const auto& w : c["calls"]) want.push_back({w["name"].get<std::string>(), w["arguments"].get<std::string>()});
    expect_every_split(kGemma, c["output"].get<std::string>(), "", want);
  }
}

TEST(Gemma4ToolCalls, ValuesAsVllmReadsThem) {
  struct Case {
    std::string args, json;
  };
  const Case cases[] = {
      {"city:" + quoted("London"), R"({"city": "London"})"},
      {"arg1:42", R"({"arg1": 42})"},
      {"arg1:-7", R"({"arg1": -7})"},
      {"orig:3.14", R"({"orig": 3.14})"},
      {"enabled:true,off:false", R"({"enabled": true, "off": false})"},
      {"a:null,b:None,c:NIL", R"({"a": null, "b": null, "c": null})"},
      {"todos:[" + quoted("buy milk") + "," + quoted("walk dog") + "]", R"({"todos": ["buy milk", "walk dog"]})"},
      {"config:{theme:" + quoted("dark") + ",count:3}", R"({"config": {"theme": "dark", "count": 3}})"},
      {"todos:[],config:{}", R"({"todos": [], "config": {}})"},
      // float() of a text with a '.', int() without one: 1e5 stays text, 007 is 7.
      {"x:1.5e10,y:1e5,z:007,w:+3", R"({"x": 15000000000.0, "y": "1e5", "z": 7, "w": 3})"},
      {"big:18446744073709551615,neg:-9223372036854775808",
       R"({"big": 18446744073709551615, "neg": -9223372036854775808})"},
      // Keys in <|"|> delimiters, blanks around members, a bare word, nested arrays of objects.
      {quoted("q") + ":" + quoted("x") + ", n : 2,\n word:maybe", R"({"q": "x", "n": 2, "word": "maybe"})"},
      {"m:[[1,2],[{k:" + quoted("v") + "}],true]", R"({"m": [[1, 2], [{"k": "v"}], true]})"},
      // Strings are taken as written: delimiters of JSON, quotes, braces, unicode.
      {"s:" + quoted("a \"b\" {c}, [d]: é 東京\n"), R"({"s": "a \"b\" {c}, [d]: é 東京\n"})"},
      {"", "{}"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    expect_every_split(kGemma, call("f", c.args), "", {{"f", c.json}});
  }
  // vLLM's name pattern takes dots and dashes.
  expect_every_split(kGemma, call("module.get-weather", "a:1"), "", {{"module.get-weather", R"({"a": 1})"}});
}

TEST(Gemma4ToolCalls, TextAroundCallsIsContent) {
  expect_every_split(kGemma, "Hello, world!\nWhat's up?" + call("get_time", "city:" + quoted("Paris")),
                     "Hello, world!\nWhat's up?", {{"get_time", R"({"city": "Paris"})"}});
  expect_every_split(kGemma, call("a", "") + call("b", "n:1") + " done", " done", {{"a", "{}"}, {"b", R"({"n": 1})"}});
  // The model's stop after its calls is no content should its text come through.
  expect_every_split(kGemma, call("a", "") + "<|tool_response>", "", {{"a", "{}"}});
  // A plain answer, markers of other syntaxes included, is all content.
  expect_every_split(kGemma, "No <tool_call> here, nor <|tool_call|>.", "No <tool_call> here, nor <|tool_call|>.", {});
}

TEST(Gemma4ToolCalls, MalformedOrCutOffCallsStayContent) {
  // Cut off by max_tokens: no <tool_call|>, so no call (vLLM's whole-output regex needs it), even
  // when the body so far would read as one.
  for (const std::string& cut : {"<|tool_call>call:get_weather{city:" + quoted("Os"), std::string("<|tool_call>call:f{a:1}"),
                                std::string("<|tool_call>call:f")}) {
    SCOPED_TRACE(cut);
    expect_every_split(kGemma, cut, cut, {});
    expect_every_split(kGemma, call("ok", "") + cut, cut, {{"ok", "{}"}});
  }
  // Not call:NAME{..}: a name with a blank, no "call:", no braces; the block stays, markers and all.
  for (const std::string& bad : {std::string("<|tool_call>call:bad name{}<tool_call|>"),
                                std::string("<|tool_call>get_weather{}<tool_call|>"),
                                std::string("<|tool_call>call:f<tool_call|>"), std::string("<|tool_call>call:{a:1}<tool_call|>")}) {
    SCOPED_TRACE(bad);
    expect_every_split(kGemma, bad + call("g", ""), bad, {{"g", "{}"}});
  }
  // An unterminated string inside a closed block runs to the end, as vLLM reads it.
  expect_every_split(kGemma, call("f", "a:" + std::string("<|\"|>x}y")), "", {{"f", R"({"a": "x}y"})"}});
  // An unclosed nested object is read as vLLM's partial parse: its last bare value is dropped.
  expect_every_split(kGemma, call("f", "a:{b:1,c:2"), "", {{"f", R"({"a": {"b": 1}})"}});
}

// Random texts of the syntax's markers and pieces: the same content and calls however the text is
// split, and no crash.
TEST(Gemma4ToolCalls, FuzzSplitsAgree) {
  const char* kPieces[] = {"<|tool_call>", "<tool_call|>", "call:", "f", "{", "}", "[", "]", ":", ",", "<|\"|>", "a",
                           "1", "1.", "true", "nil", " ", "\n", "ü", "<", "<|", "<|tool_response>", "<tool_call>"};
  std::mt19937_64 rng(41);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 14);
    for (int k = 0; k < n; ++k) text += kPieces[rng() % std::size(kPieces)];
    const testing::Result whole = testing::run(kGemma, text);
    for (size_t step : {size_t{1}, size_t{4}}) {
      const testing::Result split = testing::run(kGemma, text, step);
      ASSERT_EQ(split.content, whole.content) << text;
      ASSERT_EQ(split.calls, whole.calls) << text;
    }
    for (const Call& c : whole.calls) ASSERT_TRUE(nlohmann::json::parse(c.arguments, nullptr, false).is_object()) << text;
  }
}

TEST(Gemma4ToolCalls, OneCallWhenParallelCallsAreOff) {
  testing::RunOptions one;
  one.max_calls = 1;
  expect_every_split(kGemma, call("a", "x:1") + call("b", ""), "", {{"a", R"({"x": 1})"}}, one);
}

TEST(Gemma4ToolCalls, ByNameAndByTemplate) {
  EXPECT_EQ(*parse_tool_syntax("gemma4"), ChatToolSyntax::gemma4);
  EXPECT_STREQ(tool_syntax_name(ChatToolSyntax::gemma4), "gemma4");
  EXPECT_EQ(tool_parser_kind(ChatToolSyntax::gemma4), ToolParserKind::gemma4);
  EXPECT_EQ(forced_arguments_key(ChatToolSyntax::gemma4), std::string("arguments"));
}

}  // namespace
}  // namespace brigade::server
