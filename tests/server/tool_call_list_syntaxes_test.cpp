// The tool-call syntaxes whose calls come as a list (granite, lfm2, jamba / hunyuan_a13b,
// phi4_mini_json, olmo3, nemotron_nano_v2, apertus; and ernie45's hermes blocks):
// whole and cut at every byte, several calls, text around them, malformed calls left as content.
// Expected calls follow vLLM's parsers of the same names (arguments as Python's json.dumps writes
// them). The real templates (tests/fixtures/chat_templates/templates/, llama.cpp's copies) pick
// the syntax, and what they write for an assistant's calls parses back.
#include <gtest/gtest.h>

#include <random>

#include "models/chat_template_jinja.h"
#include "server/openai_tools.h"
#include "tests/models/chat_test_util.h"
#include "tests/server/tool_parse_test_util.h"

namespace brigade::server {
namespace {

using testing::Call;
using testing::expect_every_split;
using testing::Result;

constexpr ToolParserKind kGranite = ToolParserKind::granite, kLfm2 = ToolParserKind::lfm2,
                         kJamba = ToolParserKind::jamba, kPhi4 = ToolParserKind::phi4_mini_json,
                         kOlmo3 = ToolParserKind::olmo3, kNemotron = ToolParserKind::nemotron_nano_v2,
                         kApertus = ToolParserKind::apertus, kErnie = ToolParserKind::ernie45;

const std::vector<Call> kWeatherAndTime = {{"get_weather", R"({"city": "Zürich", "days": 2})"}, {"get_time", "{}"}};

TEST(ToolCallListSyntaxes, Granite) {
  // Granite 3.x: the marker, then the list (whitespace around it is no one's).
  expect_every_split(kGranite,
                     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}, "
                     "{\"name\": \"get_time\", \"arguments\": {}}]",
                     "", kWeatherAndTime);
  expect_every_split(kGranite, " \n<|tool_call|> [{\"name\":\"a\",\"arguments\":{\"x\":[1,2.50]}}]\n", "",
                     {{"a", R"({"x": [1, 2.5]})"}});
  // The marker is a special token the output may have dropped; Granite 3.1 writes <tool_call>.
  expect_every_split(kGranite, R"([{"name": "a", "arguments": {}}])", "", {{"a", "{}"}});
  expect_every_split(kGranite, R"(<tool_call>[{"name": "a", "arguments": {"k": "v"}}])", "", {{"a", R"({"k": "v"})"}});
}

TEST(ToolCallListSyntaxes, GraniteMalformedStaysContent) {
  for (const std::string text : {"<|tool_call|>[{\"name\": \"a\"}]", "<|tool_call|>{\"name\": \"a\", \"arguments\": {}}",
                                 "<|tool_call|>[{\"name\": \"a b\", \"arguments\": {}}]", "<|tool_call|>[]", "[1, 2]",
                                 "<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}] and then some",
                                 "<|tool_call|>[{\"name\": \"a\", \"arguments\": {", "<|tool_call|>", "<|tool_ca",
                                 "Sure: [{\"name\": \"a\", \"arguments\": {}}]", "The answer is [x].", "<tool>"}) {
    SCOPED_TRACE(text);
    expect_every_split(kGranite, text, text, {});
  }
}

TEST(ToolCallListSyntaxes, Lfm2) {
  // LFM2.5's template form (strings in single quotes), text before and after the block.
  expect_every_split(kLfm2, "<|tool_call_start|>[get_weather(city='Zürich', days=2), get_time()]<|tool_call_end|>", "",
                     kWeatherAndTime);
  expect_every_split(kLfm2, "Let me check. <|tool_call_start|>[get_time()]<|tool_call_end|>Checking now.",
                     "Let me check. Checking now.", {{"get_time", "{}"}});
  // Python literals, and JSON's true / false / null as llama.cpp reads them.
  expect_every_split(kLfm2, "<|tool_call_start|>[f(a=true, b=null, c=False, d={'k': [1, \"x\"]}, e=None)]<|tool_call_end|>", "",
                     {{"f", R"({"a": true, "b": null, "c": false, "d": {"k": [1, "x"]}, "e": null})"}});
  // Two blocks; a block the output cut off is a call when its list is whole.
  expect_every_split(kLfm2, "<|tool_call_start|>[a()]<|tool_call_end|>\n<|tool_call_start|>[b(x=1)]", "",
                     {{"a", "{}"}, {"b", R"({"x": 1})"}});
}

TEST(ToolCallListSyntaxes, Lfm2MalformedStaysContent) {
  for (const std::string text :
       {"<|tool_call_start|>[get_weather(city=)]<|tool_call_end|>", "<|tool_call_start|>get_time()<|tool_call_end|>",
        "<|tool_call_start|>[]<|tool_call_end|>", "<|tool_call_start|>[f(1)]<|tool_call_end|>",
        "<|tool_call_start|>[f(a=x)]<|tool_call_end|>", "<|tool_call_start|>[f(a=1)", "<|tool_call_st", "[f(a=1)]"}) {
    SCOPED_TRACE(text);
    expect_every_split(kLfm2, text, text, {});
  }
  // A malformed block next to a good one: the good one is a call.
  expect_every_split(kLfm2, "<|tool_call_start|>[f(]<|tool_call_end|><|tool_call_start|>[g()]<|tool_call_end|>",
                     "<|tool_call_start|>[f(]<|tool_call_end|>", {{"g", "{}"}});
}

TEST(ToolCallListSyntaxes, JambaAndHunyuan) {
  expect_every_split(kJamba,
                     "<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}, "
                     "{\"name\": \"get_time\", \"arguments\": {}}]</tool_calls>",
                     "", kWeatherAndTime);
  // Hunyuan-A13B writes the block after its answer's text, on a new line.
  expect_every_split(kJamba, "Sure.\n<tool_calls>\n[{\"name\":\"get_time\",\"arguments\":{}}]\n</tool_calls>", "Sure.",
                     {{"get_time", "{}"}});
  for (const std::string text : {"<tool_calls>[{\"name\": \"a\", \"arguments\": \"x\"}]</tool_calls>",
                                 "<tool_calls>[]</tool_calls>",
                                 "<tool_calls>[{\"name\": \"a\", \"arguments\": {}}", "<tool_calls", "<tool_call>x</tool_call>"}) {
    SCOPED_TRACE(text);
    expect_every_split(kJamba, text, text, {});
  }
  // MiniMax-M1 (vLLM's minimax): one call a line in the same block (so a lone object is a call).
  expect_every_split(kJamba, "<tool_calls>{\"name\": \"a\", \"arguments\": {}}</tool_calls>", "", {{"a", "{}"}});
  expect_every_split(kJamba,
                     "Sure.\n<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}\n"
                     "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_calls>",
                     "Sure.", kWeatherAndTime);
  for (const std::string text : {"<tool_calls>\n{\"name\": \"a\", \"arguments\": {}}\nnot a call\n</tool_calls>",
                                 "<tool_calls>\n{\"name\": \"a\", \"arguments\": {}} {\"name\": \"b\", \"arguments\": {}}\n</tool_calls>",
                                 "<tool_calls>\n{\"name\": \"a\"}\n</tool_calls>"}) {
    SCOPED_TRACE(text);
    expect_every_split(kJamba, text, text, {});
  }
  EXPECT_EQ(tool_parser_kind(ToolFormat::minimax), kJamba);
  EXPECT_EQ(tool_parser_kind(ToolFormat::hunyuan_a13b), kJamba);
  EXPECT_EQ(tool_parser_kind(ToolFormat::jamba), kJamba);
}

TEST(ToolCallListSyntaxes, Phi4MiniJson) {
  // "arguments" or "parameters"; nested arrays (vLLM's regex would stop at the first ']').
  expect_every_split(kPhi4,
                     "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}, "
                     "{\"name\": \"get_time\", \"parameters\": {}}]",
                     "", kWeatherAndTime);
  expect_every_split(kPhi4, " functools [{\"name\": \"f\", \"arguments\": {\"x\": [[1], [2]]}}]\n", "",
                     {{"f", R"({"x": [[1], [2]]})"}});
  for (const std::string text : {"functools[{\"name\": \"f\"}]", "functools[]", "functools{\"name\": \"f\", \"arguments\": {}}",
                                 "Sure. functools[{\"name\": \"f\", \"arguments\": {}}]", "functional code", "functools",
                                 "[{\"name\": \"f\", \"arguments\": {}}]"}) {
    SCOPED_TRACE(text);
    expect_every_split(kPhi4, text, text, {});
  }
}

// llama.cpp's Phi-4-mini template: <|tool_call|>{..}<|/tool_call|> blocks (vLLM's phi4_mini_json
// has no such form; llama.cpp's test-chat reads them from this template).
TEST(ToolCallListSyntaxes, Phi4MiniToolCallBlocks) {
  expect_every_split(kPhi4,
                     "<|tool_call|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}<|/tool_call|>\n"
                     "<|tool_call|>{\"name\": \"get_time\", \"arguments\": {}}<|/tool_call|>",
                     "", kWeatherAndTime);
  expect_every_split(kPhi4, " <|tool_call|>{\"name\": \"f\", \"parameters\": {\"x\": 1}}<|/tool_call|> ", "", {{"f", R"({"x": 1})"}});
  for (const std::string text :
       {"<|tool_call|>{\"name\": \"f\"}<|/tool_call|>", "<|tool_call|>{\"name\": \"f\", \"arguments\": {}}",
        "<|tool_call|>[{\"name\": \"f\", \"arguments\": {}}]<|/tool_call|>",
        "<|tool_call|>{\"name\": \"f\", \"arguments\": {}}<|/tool_call|> then text",
        "Sure. <|tool_call|>{\"name\": \"f\", \"arguments\": {}}<|/tool_call|>", "<|tool_call|><|/tool_call|>", "<|tool"}) {
    SCOPED_TRACE(text);
    expect_every_split(kPhi4, text, text, {});
  }
}

// Nemotron-Nano-v2 (vLLM's nemotron_nano_v2; llama.cpp's test-chat cases with its template): a
// JSON list in <TOOLCALL>, anywhere in the text; a lone object, and arguments as a string holding
// an object, as vLLM reads them.
TEST(ToolCallListSyntaxes, NemotronNanoV2) {
  expect_every_split(kNemotron,
                     "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}, "
                     "{\"name\": \"get_time\", \"arguments\": {}}]</TOOLCALL>",
                     "", kWeatherAndTime);
  expect_every_split(kNemotron, "Let me look.\n<TOOLCALL>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]</TOOLCALL>\n",
                     "Let me look.", {{"special_function", R"({"arg1": 1})"}});
  expect_every_split(kNemotron, "<TOOLCALL>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}</TOOLCALL>", "",
                     {{"f", R"({"a": 1})"}});
  // Cut off by the end of the output: a call when the list is whole.
  expect_every_split(kNemotron, "<TOOLCALL>[{\"name\": \"f\", \"arguments\": {}}]", "", {{"f", "{}"}});
  for (const std::string text : {"<TOOLCALL>[{\"name\": \"f\"}]</TOOLCALL>", "<TOOLCALL>[]</TOOLCALL>",
                                 "<TOOLCALL>[{\"name\": \"f\", \"arguments\": \"x\"}]</TOOLCALL>",
                                 "<TOOLCALL>[{\"name\": \"a b\", \"arguments\": {}}]</TOOLCALL>",
                                 "<TOOLCALL>[{\"name\": \"f\", \"arguments\": {", "<TOOLCA", "<toolcall>[]</toolcall>"}) {
    SCOPED_TRACE(text);
    expect_every_split(kNemotron, text, text, {});
  }
}

// Apertus (vLLM's apertus; llama.cpp's test-chat case): [{NAME: {..}}, ..] in
// <|tools_prefix|> .. <|tools_suffix|>, text around it content.
TEST(ToolCallListSyntaxes, Apertus) {
  expect_every_split(kApertus,
                     "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Zürich\", \"days\": 2}}, {\"get_time\": {}}]<|tools_suffix|>",
                     "", kWeatherAndTime);
  expect_every_split(kApertus, "I will check. <|tools_prefix|>[{\"get_time\": {}}]<|tools_suffix|> Done.",
                     "I will check.  Done.", {{"get_time", "{}"}});
  for (const std::string text : {"<|tools_prefix|>[{\"f\": \"x\"}]<|tools_suffix|>", "<|tools_prefix|>[]<|tools_suffix|>",
                                 "<|tools_prefix|>[{\"f\": {}, \"g\": {}}]<|tools_suffix|>",
                                 "<|tools_prefix|>[{\"name\": \"f\", \"arguments\": {}}]<|tools_suffix|>",
                                 "<|tools_prefix|>{\"f\": {}}<|tools_suffix|>", "<|tools_prefix|>[{\"f\": {", "<|tools_"}) {
    SCOPED_TRACE(text);
    expect_every_split(kApertus, text, text, {});
  }
}

// ERNIE 4.5 (vLLM's ernie45): hermes's blocks; <response> and </response> dropped outside them;
// arguments absent are {}.
TEST(ToolCallListSyntaxes, Ernie45) {
  expect_every_split(kErnie,
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}\n</tool_call>\n"
                     "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>\n",
                     "", kWeatherAndTime);
  expect_every_split(kErnie, "<response>\nIt is sunny.\n</response>\n", "\nIt is sunny.\n\n", {});
  expect_every_split(kErnie, "<response>Checking.</response><tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
                     "Checking.", {{"get_time", "{}"}});
  for (const std::string text : {"<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}</tool_call>",
                                 "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>not json</tool_call>", "<respo"}) {
    SCOPED_TRACE(text);
    expect_every_split(kErnie, text, text, {});
  }
  EXPECT_EQ(tool_parser_kind(ToolFormat::ernie45), kErnie);
}

TEST(ToolCallListSyntaxes, Olmo3) {
  // One call a line (JSON's null / true / false read too), bare or in <function_calls>.
  expect_every_split(kOlmo3, "get_weather(city=\"Zürich\", days=2)\nget_time()", "", kWeatherAndTime);
  expect_every_split(kOlmo3, "<function_calls>\nget_weather(city='Oslo', unit=null, metric=true)\n</function_calls>", "",
                     {{"get_weather", R"({"city": "Oslo", "unit": null, "metric": true})"}});
  expect_every_split(kOlmo3, "  f(a=1), g(b=[1, 'x'])\n", "", {{"f", R"({"a": 1})"}, {"g", R"({"b": [1, "x"]})"}});
}

TEST(ToolCallListSyntaxes, Olmo3ContentStaysContent) {
  for (const std::string text : {"Hello there.", "It is 5 (five).", "get_weather is a tool", "f(a=1) g()", "f(a=)", "f(1)",
                                 "<b>bold</b>", "<function_calls>\nnot a call\n</function_calls>", "3(x=1)", "f(a=1)\nand text",
                                 "<function_calls>", "f", ""}) {
    SCOPED_TRACE(text);
    expect_every_split(kOlmo3, text, text, {});
  }
}

TEST(ToolCallListSyntaxes, ParallelFalseKeepsTheFirstCall) {
  testing::RunOptions one{.max_calls = 1};
  expect_every_split(kGranite, R"(<|tool_call|>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}])", "",
                     {{"a", "{}"}}, one);
  expect_every_split(kLfm2, "<|tool_call_start|>[a(), b()]<|tool_call_end|>", "", {{"a", "{}"}}, one);
  expect_every_split(kOlmo3, "a()\nb()", "", {{"a", "{}"}}, one);
}

// Random texts of the syntaxes' markers and pieces: the same content and calls however the text
// is split, and no crash.
TEST(ToolCallListSyntaxes, FuzzSplitsAgree) {
  const char* kPieces[] = {"<|tool_call|>", "<tool_call>", "<|tool_call_start|>", "<|tool_call_end|>", "<tool_calls>",
                           "</tool_calls>", "<function_calls>", "</function_calls>", R"({"name": "g", "arguments": {}})",
                           R"([{"name": "g", "arguments": {"a": [1]}}])", "[", "]", "{", "}", "f(", "a=1", "b=null", ")",
                           "'s'", ",", "\n", " ", "x", "ü", "<", "<|", "get_time()", "functools", "func", "<|/tool_call|>",
                           "<TOOLCALL>", "</TOOLCALL>", "<|tools_prefix|>", "<|tools_suffix|>", R"({"g": {}})",
                           "<response>", "</response>", "</tool_call>"};
  std::mt19937_64 rng(23);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += kPieces[rng() % std::size(kPieces)];
    for (ToolParserKind kind : {kGranite, kLfm2, kJamba, kPhi4, kOlmo3, kNemotron, kApertus, kErnie}) {
      const Result whole = testing::run(kind, text);
      for (size_t step : {size_t{1}, size_t{4}}) {
        const Result split = testing::run(kind, text, step);
        ASSERT_EQ(split.content, whole.content) << "kind " << static_cast<int>(kind) << " text " << text;
        ASSERT_EQ(split.calls, whole.calls) << "kind " << static_cast<int>(kind) << " text " << text;
      }
    }
  }
}

// Which syntax each real template teaches (llama.cpp's copies of the models' templates; the ones
// added with nemotron_nano_v2 / apertus / minimax are llama_cpp_python 0.3.36's
// vendor/llama.cpp/models/templates/ NVIDIA-Nemotron-Nano-v2.jinja → nemotron-nano-v2,
// Apertus-8B-Instruct.jinja → apertus, MiniMax-M1.jinja → minimax-m1,
// fireworks-ai-llama-3-firefunction-v2.jinja → firefunction-v2, unchanged).
TEST(ToolCallListSyntaxes, TheRealTemplatesPickTheirSyntax) {
  const std::pair<const char*, ToolFormat> cases[] = {
      {"granite-3.3", ToolFormat::granite},  // "respond only with <|tool_call|> followed by a JSON list"
      {"granite-4.0", ToolFormat::hermes},   // <tool_call>{"name", "arguments"}</tool_call>
      {"lfm2", ToolFormat::lfm2},            // its tool list in <|tool_list_start|>
      {"lfm2.5", ToolFormat::lfm2},          // writes <|tool_call_start|>[..]<|tool_call_end|>
      {"nemotron-3-nano", ToolFormat::qwen3_coder},  // <tool_call><function=..><parameter=..>
      {"nemotron-nano-v2", ToolFormat::nemotron_nano_v2},  // <TOOLCALL>[..]</TOOLCALL>
      {"apertus", ToolFormat::apertus},                  // <|tools_prefix|>[{NAME: {..}}]<|tools_suffix|>
      {"firefunction-v2", ToolFormat::phi4_mini_json},   // " functools[{..}, ..]"
      {"minimax-m1", ToolFormat::minimax},               // <tool_calls>\n{..}\n{..}\n</tool_calls>
  };
  for (const auto& [name, syntax] : cases) {
    SCOPED_TRACE(name);
    const std::string source = brigade::testing::chat_template_file(name);
    ASSERT_FALSE(source.empty()) << "tests/fixtures/chat_templates/templates/" << name << ".jinja";
    EXPECT_EQ(detect_tool_syntax(source), syntax) << tool_syntax_name(detect_tool_syntax(source));
  }
  // Phi-4-mini's llama.cpp template writes <|tool_call|>{..}<|/tool_call|>, without Granite's roles.
  EXPECT_EQ(detect_tool_syntax(brigade::testing::real_chat_template("phi-4-mini")), ToolFormat::phi4_mini_json);
}

// What LFM2.5's and Granite 4.0's templates write for an assistant's calls (rendered here) parses
// back into those calls with the syntax detection picks.
TEST(ToolCallListSyntaxes, TheTemplatesOwnCallsParseBack) {
  const std::vector<ChatMessage> messages = {
      {"user", "Weather in Zürich, and the time?"},
      {"assistant", "", {{"call_1", "get_weather", R"({"city": "Zürich", "days": 2})"}, {"call_2", "get_time", "{}"}}}};
  const std::vector<std::string> tools = {
      R"({"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}})",
      R"({"type": "function", "function": {"name": "get_time", "description": "Time", "parameters": {"type": "object"}}})"};
  struct Case {
    const char* tmpl;
    const char* turn;  // the assistant's turn in the rendering ...
    const char* from;  // ... where its calls start ...
    const char* to;    // ... and what ends them (part of the calls, or not: "<|end...")
  };
  for (const Case& c : {Case{"lfm2.5", "<|im_start|>assistant", "<|tool_call_start|>", "<|tool_call_end|>"},
                        Case{"granite-4.0", "<|start_of_role|>assistant", "<tool_call>", "<|end_of_text|>"},
                        Case{"nemotron-nano-v2", "<SPECIAL_11>Assistant", "<TOOLCALL>", "</TOOLCALL>"},
                        Case{"apertus", "<|assistant_start|>", "<|tools_prefix|>", "<|tools_suffix|>"},
                        Case{"minimax-m1", "ai name=assistant", "<tool_calls>", "</tool_calls>"},
                        Case{"phi-4-mini", "<|assistant|>", "<|tool_call|>", "<|end|>"}}) {
    SCOPED_TRACE(c.tmpl);
    std::string source = brigade::testing::chat_template_file(c.tmpl);
    if (source.empty()) source = brigade::testing::real_chat_template(c.tmpl);
    auto t = JinjaChatTemplate::create(source, "", "");
    ASSERT_TRUE(t.has_value()) << t.status().to_string();
    auto text = t->apply(messages, tools, false);
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    const size_t from = text->find(c.from, text->rfind(c.turn));  // the tools block may show the syntax first
    ASSERT_NE(from, std::string::npos) << *text;
    const size_t to = text->find(c.to, from);
    ASSERT_NE(to, std::string::npos) << *text;
    const std::string calls = text->substr(from, to - from + (std::string(c.to).starts_with("<|end") ? 0 : std::string(c.to).size()));
    Result r = testing::run(tool_parser_kind(t->tool_syntax()), calls);
    EXPECT_EQ(r.content, "") << calls;
    EXPECT_EQ(r.calls, kWeatherAndTime) << calls;
  }
}

}  // namespace
}  // namespace brigade::server
