// The tool-call syntaxes beyond Hermes and Llama 3 JSON (mistral, deepseek_v3/v31, kimi_k2, glm45,
// qwen3_coder, seed_oss, minimax_m2):
// whole and cut at every byte, several calls, text before and after, malformed calls left as
// content. Expected calls follow vLLM's parsers of the same names (arguments as Python's
// json.dumps writes them); the texts are what the models' own chat templates write for an
// assistant's calls (the ones transformers rendered in tests/fixtures/chat_templates/models.json
// are parsed back at the end).
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

constexpr ToolParserKind kMistral = ToolParserKind::mistral, kDeepSeek = ToolParserKind::deepseek_v3,
                         kKimi = ToolParserKind::kimi_k2, kGlm = ToolParserKind::glm45,
                         kQwen = ToolParserKind::qwen3_coder, kSeed = ToolParserKind::seed_oss,
                         kMiniMax = ToolParserKind::minimax_m2;

TEST(ToolCallSyntaxes, MistralJsonArray) {
  // Mistral 7B v0.3's form (its template writes the call's id too).
  expect_every_split(kMistral,
                     R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}, "id": "abcDEF123"}])",
                     "", {{"get_weather", R"({"city": "Zürich", "days": 2})"}});
  expect_every_split(kMistral,
                     "Checking.[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{}},{\"name\":\"b\",\"arguments\":{\"x\":[1,2.50]}}]",
                     "Checking.", {{"a", "{}"}, {"b", R"({"x": [1, 2.5]})"}});
  // One object without the array, and arguments given as a JSON string.
  expect_every_split(kMistral, R"([TOOL_CALLS] {"name": "a", "arguments": "{\"k\": \"v\"}"})", "", {{"a", R"({"k": "v"})"}});
}

TEST(ToolCallSyntaxes, MistralV11NameArgs) {
  // Mistral Small 3.2 / Devstral (tokenizer v11+): one [TOOL_CALLS] per call.
  expect_every_split(kMistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"東京\"}[TOOL_CALLS]get_time[ARGS]{}",
                     "", {{"get_weather", R"({"city": "東京"})"}, {"get_time", "{}"}});
  expect_every_split(kMistral, "Sure.\n[TOOL_CALLS]f[CALL_ID]a1B2c3D4e[ARGS]{\"n\":1}\nDone", "Sure.\n\nDone",
                     {{"f", R"({"n": 1})", "a1B2c3D4e"}});
}

TEST(ToolCallSyntaxes, MistralMalformedStaysContent) {
  for (const std::string text : {"[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": }}]",
                                 "[TOOL_CALLS] [{\"name\": \"a\"}]", "[TOOL_CALLS] [{\"name\": \"a b\", \"arguments\": {}}]",
                                 "[TOOL_CALLS] []", "[TOOL_CALLS]not a call", "[TOOL_CALLS]f[ARGS]oops",
                                 "[TOOL_CALLS]f[ARGS]{\"cut\": ", "[TOOL_CALLS]", "[TOOL_CALL", "a [TOOL_CALLS]f[AR"}) {
    SCOPED_TRACE(text);
    expect_every_split(kMistral, text, text, {});
  }
  // A malformed call next to a good one: the good one is a call.
  expect_every_split(kMistral, "[TOOL_CALLS]f[ARGS]{bad}[TOOL_CALLS]g[ARGS]{}", "[TOOL_CALLS]f[ARGS]{bad}", {{"g", "{}"}});
  expect_every_split(kMistral, "no calls at all [TOOLS] [x]\n", "no calls at all [TOOLS] [x]\n", {});
}

constexpr const char* kDsV3Call =
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Zürich\", \"days\": 2}\n```<｜tool▁call▁end｜>";

TEST(ToolCallSyntaxes, DeepSeekV3) {
  // DeepSeek V3 / R1's template form (several calls joined by a newline).
  const std::string two = std::string("<｜tool▁calls▁begin｜>") + kDsV3Call +
                          "\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜>"
                          "<｜tool▁calls▁end｜>";
  expect_every_split(kDeepSeek, two, "", {{"get_weather", R"({"city": "Zürich", "days": 2})"}, {"get_time", "{}"}});
  expect_every_split(kDeepSeek, "Let me look that up." + two, "Let me look that up.",
                     {{"get_weather", R"({"city": "Zürich", "days": 2})"}, {"get_time", "{}"}});
  // The end of the output before the section's end (or the call's) still has the calls.
  expect_every_split(kDeepSeek, std::string("<｜tool▁calls▁begin｜>") + kDsV3Call, "",
                     {{"get_weather", R"({"city": "Zürich", "days": 2})"}});
  expect_every_split(kDeepSeek,
                     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```",
                     "", {{"f", R"({"a": 1})"}});
}

TEST(ToolCallSyntaxes, DeepSeekV31) {
  // V3.1's template: NAME<｜tool▁sep｜>ARGUMENTS, calls back to back.
  expect_every_split(kDeepSeek,
                     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜>"
                     "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\":\"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                     "", {{"get_weather", R"({"city": "Oslo"})"}, {"get_time", R"({"tz": "UTC"})"}});
}

TEST(ToolCallSyntaxes, DeepSeekMalformedStaysContent) {
  const std::string bad_json = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": }\n```<｜tool▁call▁end｜>";
  const std::string no_sep = "<｜tool▁call▁begin｜>f {}<｜tool▁call▁end｜>";
  expect_every_split(kDeepSeek, "<｜tool▁calls▁begin｜>" + bad_json + kDsV3Call + "<｜tool▁calls▁end｜>", bad_json,
                     {{"get_weather", R"({"city": "Zürich", "days": 2})"}});
  expect_every_split(kDeepSeek, "<｜tool▁calls▁begin｜>" + no_sep + "<｜tool▁calls▁end｜>", no_sep, {});
  // Text inside the section that is no call is content; text after the section too.
  expect_every_split(kDeepSeek, std::string("<｜tool▁calls▁begin｜>oops") + kDsV3Call + "<｜tool▁calls▁end｜> bye", "oops bye",
                     {{"get_weather", R"({"city": "Zürich", "days": 2})"}});
  expect_every_split(kDeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\"",
                     "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\"", {});
  expect_every_split(kDeepSeek, "plain <｜tool▁calls", "plain <｜tool▁calls", {});
}

TEST(ToolCallSyntaxes, KimiK2) {
  const std::string calls =
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
      "{\"city\": \"Zürich\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}"
      "<|tool_call_end|><|tool_calls_section_end|>";
  expect_every_split(kKimi, "I'll check." + calls, "I'll check.",
                     {{"get_weather", R"({"city": "Zürich"})", "functions.get_weather:0"},
                      {"get_time", "{}", "functions.get_time:1"}});
  // The singular section marker some Kimi outputs use.
  expect_every_split(kKimi,
                     "<|tool_call_section_begin|><|tool_call_begin|>functions.f:3<|tool_call_argument_begin|>{\"a\":true}"
                     "<|tool_call_end|><|tool_call_section_end|>",
                     "", {{"f", R"({"a": true})", "functions.f:3"}});
  const std::string bad = "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|>";
  expect_every_split(kKimi, "<|tool_calls_section_begin|>" + bad + "<|tool_calls_section_end|>", bad, {});
}

const std::vector<ToolFunction> kGlmTools = {
    {"get_weather", R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                       "note": {"type": "string"}, "opts": {"type": "object"}}})"},
    {"search", ""}};

TEST(ToolCallSyntaxes, Glm45) {
  testing::RunOptions o{.functions = kGlmTools};
  // GLM-4.6's template form. Values of string-typed parameters are taken as written (a "2" stays
  // a string, spaces kept); the others are JSON when they parse, else the trimmed text.
  expect_every_split(kGlm,
                     "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>\n"
                     "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n<arg_key>note</arg_key>\n<arg_value> 2 </arg_value>\n"
                     "<arg_key>opts</arg_key>\n<arg_value>{\"metric\": true, \"x\": [1.50, null]}</arg_value>\n</tool_call>",
                     "Checking.",
                     {{"get_weather", R"({"city": "Zürich", "days": 2, "note": " 2 ", "opts": {"metric": true, "x": [1.5, null]}})"}},
                     o);
  // Untyped keys: JSON when it parses, else text; a call without arguments; two calls (GLM-4.7
  // writes no newline after the name).
  expect_every_split(kGlm,
                     "<tool_call>search<arg_key>q</arg_key><arg_value> föhn wind </arg_value><arg_key>n</arg_key>"
                     "<arg_value>3</arg_value></tool_call>\n<tool_call>get_time\n</tool_call>",
                     "", {{"search", R"({"q": "föhn wind", "n": 3})"}, {"get_time", "{}"}}, o);
}

const std::vector<ToolFunction> kQwenTools = {
    kGlmTools[0],
    {"calc", R"({"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "flag": {"type": "boolean"},
                "n": {"type": "integer"}, "m": {"type": "int"}, "items": {"type": "array"}, "any": {}}})"}};

TEST(ToolCallSyntaxes, Qwen3Coder) {
  testing::RunOptions o{.functions = kQwenTools};
  // Qwen3.5's (and Qwen3-Coder's) template form: one newline dropped at each end of a value;
  // string-typed values as written, the others typed by the schema.
  expect_every_split(kQwen,
                     "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n"
                     "<parameter=days>\n2\n</parameter>\n<parameter=note>\n 2 \n\n</parameter>\n<parameter=opts>\n"
                     "{\"metric\": true, \"x\": [1.50, null]}\n</parameter>\n</function>\n</tool_call>",
                     "Let me check.",
                     {{"get_weather", R"({"city": "Zürich", "days": 2, "note": " 2 \n", "opts": {"metric": true, "x": [1.5, null]}})"}},
                     o);
  // vLLM's typing: a whole number is an integer, booleans by "true", a non-integer stays text, an
  // array read as a Python literal when it is not JSON, an untyped key's value as text, a key
  // the schema does not list as text, "null" as null; a parameter ends at the next one, the
  // function at the block's end.
  expect_every_split(kQwen,
                     "<tool_call>\n<function=calc>\n<parameter=x>\n2.0\n</parameter>\n<parameter=y>\n+2.5e-1\n"
                     "<parameter=flag>\nTrue\n</parameter>\n<parameter=n>\nthree\n</parameter>\n<parameter=m>\n 7 \n"
                     "</parameter>\n<parameter=items>\n['a', 1]\n</parameter>\n<parameter=any>\n{'k': None}\n</parameter>\n"
                     "<parameter=extra>\nhi\n</parameter>\n<parameter=x2>\nNULL\n</parameter>\n</tool_call>"
                     "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
                     "",
                     {{"calc", R"({"x": 2, "y": 0.25, "flag": true, "n": "three", "m": 7, "items": ["a", 1], "any": "{'k': None}", "extra": "hi", "x2": null})"},
                      {"get_time", "{}"}},
                     o);
  // Cut off by the end of the output, the block so far is a call.
  expect_every_split(kQwen, "<tool_call>\n<function=search>\n<parameter=q>\nföhn", "", {{"search", R"({"q": "föhn"})"}}, o);
}

TEST(ToolCallSyntaxes, Qwen3CoderMalformedStaysContent) {
  testing::RunOptions o{.functions = kQwenTools};
  for (const std::string text : {"<tool_call>\n<function=get weather>\n</function>\n</tool_call>",
                                 "<tool_call>\nget_weather\n</tool_call>",
                                 "<tool_call>\n<function=f>\nstray<parameter=a>1</parameter></function></tool_call>",
                                 "<tool_call><function=f></function>junk</tool_call>",
                                 "<tool_call><function=f><parameter=a"}) {
    SCOPED_TRACE(text);
    expect_every_split(kQwen, text, text, {}, o);
  }
}

// Seed-OSS: qwen3_coder's calls, typed alike, in <seed:tool_call> blocks (vLLM's seed_oss);
// Qwen's own <tool_call> blocks are text to it, and a malformed block stays content.
TEST(ToolCallSyntaxes, SeedOss) {
  testing::RunOptions o{.functions = kQwenTools};
  expect_every_split(kSeed,
                     "I will look it up.\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Zürich</parameter>\n"
                     "<parameter=days>2</parameter>\n</function>\n</seed:tool_call><seed:tool_call>\n<function=calc>\n"
                     "<parameter=x>\n2.5\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n</function>\n</seed:tool_call>",
                     "I will look it up.", {{"get_weather", R"({"city": "Zürich", "days": 2})"}, {"calc", R"({"x": 2.5, "flag": true})"}},
                     o);
  for (const std::string text : {"<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
                                 "<seed:tool_call>\nget_time\n</seed:tool_call>", "<seed:tool_call><function=f><parameter=a"}) {
    SCOPED_TRACE(text);
    expect_every_split(kSeed, text, text, {}, o);
  }
}

// MiniMax-M2: <invoke> blocks in a <minimax:tool_call> section (vLLM's minimax_m2): names quoted
// or not, values trimmed and typed by every type the schema allows (a list of types, enum values,
// anyOf), integer before number before boolean before object / array before string; "null" /
// "None" / "nil" are null; an untyped or unlisted key is a string; nothing fitting: JSON, else text.
TEST(ToolCallSyntaxes, MiniMaxM2) {
  const std::vector<ToolFunction> tools = {
      kGlmTools[0],
      {"calc", R"({"type": "object", "properties": {"x": {"type": "number"}, "n": {"type": ["integer", "string"]},
                  "flag": {"type": "boolean"}, "mode": {"enum": [1, 2, "auto"]}, "opt": {"anyOf": [{"type": "object"},
                  {"type": "null"}]}, "items": {"type": "array"}, "b2": {"type": "boolean"}, "u": {"type": "integer"}}})"}};
  testing::RunOptions o{.functions = tools};
  // MiniMax-M2's template form, two calls in one section, text before it.
  expect_every_split(kMiniMax,
                     "Let me check both.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Zürich"
                     "</parameter>\n<parameter name=\"days\">2</parameter>\n</invoke>\n<invoke name=\"get_time\">\n</invoke>\n"
                     "</minimax:tool_call>",
                     "Let me check both.", {{"get_weather", R"({"city": "Zürich", "days": 2})"}, {"get_time", "{}"}}, o);
  expect_every_split(kMiniMax,
                     R"(<minimax:tool_call><invoke name=calc><parameter name=x> 2.0 </parameter><parameter name='n'>07)"
                     R"(</parameter><parameter name="flag">yes</parameter><parameter name="mode">auto</parameter>)"
                     R"(<parameter name="opt">{"k": [1]}</parameter><parameter name="items">[1, "a"]</parameter>)"
                     R"(<parameter name="b2">maybe</parameter><parameter name="u">None</parameter>)"
                     R"(<parameter name="extra">42</parameter></invoke></minimax:tool_call>)",
                     "",
                     {{"calc", R"({"x": 2, "n": 7, "flag": true, "mode": "auto", "opt": {"k": [1]}, "items": [1, "a"], "b2": "maybe", "u": null, "extra": "42"})"}},
                     o);
  // Cut off by the end of the output, the invoke so far is a call (its unfinished parameter left out).
  expect_every_split(kMiniMax,
                     "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Bern</parameter>\n"
                     "<parameter name=\"days\">3",
                     "", {{"get_weather", R"({"city": "Bern"})"}}, o);
  // Not calls: Hermes's blocks, an invoke without a name or with an invalid one.
  for (const std::string text : {R"(<tool_call>{"name": "get_time", "arguments": {}}</tool_call>)",
                                 "<minimax:tool_call><invoke name=>\n</invoke></minimax:tool_call>",
                                 R"(<minimax:tool_call><invoke name="get weather"></invoke></minimax:tool_call>)"}) {
    SCOPED_TRACE(text);
    const Result r = testing::run(kMiniMax, text, 0, o);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(ToolCallSyntaxes, Glm45MalformedStaysContent) {
  testing::RunOptions o{.functions = kGlmTools};
  for (const std::string text : {"<tool_call>get weather\n</tool_call>", "<tool_call>\n<arg_key>a</arg_key></tool_call>",
                                 "<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>",
                                 "<tool_call>f\nstray<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
                                 "<tool_call>f\n<arg_key>a</arg_key><arg_value>1"}) {
    SCOPED_TRACE(text);
    expect_every_split(kGlm, text, text, {}, o);
  }
}

TEST(ToolCallSyntaxes, Pythonic) {
  constexpr ToolParserKind kPy = ToolParserKind::pythonic;
  // Values as Python's ast.literal_eval reads them, written as json.dumps writes them.
  expect_every_split(kPy,
                     "[get_weather(city='San Francisco', metric=True, days=2, ratio=0.50, tags=['a', \"b\"], "
                     "extra=None, opts={'k': (1, 2)}, q=\"it's \\u00e9\\n\"), get_time()]",
                     "",
                     {{"get_weather", R"({"city": "San Francisco", "metric": true, "days": 2, "ratio": 0.5, "tags": ["a", "b"], )"
                                      R"("extra": null, "opts": {"k": [1, 2]}, "q": "it's é\n"})"},
                      {"get_time", "{}"}});
  // Llama 4's wrapper, whitespace around.
  expect_every_split(kPy, " <|python_start|>[f(x=-1.5e3)]<|python_end|>\n", "", {{"f", R"({"x": -1500.0})"}});
  // Anything else is content, whole: text, positional arguments, expressions, an unclosed list.
  for (const std::string text : {"Sure, [1, 2] is a list.", "[f(1)]", "[f(x=1+2)]", "[f(x=1)", "[f(x=1)] and more",
                                 "[]", "[f(x=open('/etc'))]", "[f(x='a\nb')]", "<|python_st"}) {
    SCOPED_TRACE(text);
    expect_every_split(kPy, text, text, {});
  }
}

// gpt-oss's harmony calls (--tool-call-parser openai alone): the guide's call, the recipient in
// the role, several calls; final-channel text is content and the analysis channel is dropped.
TEST(ToolCallSyntaxes, OpenAIHarmony) {
  constexpr ToolParserKind kOpenAI = ToolParserKind::openai;
  expect_every_split(kOpenAI,
                     "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant"
                     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                     "{\"location\":\"San Francisco\"}<|call|>",
                     "", {{"get_weather", R"({"location":"San Francisco"})"}});
  expect_every_split(kOpenAI,
                     "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.a<|channel|>commentary json"
                     "<|message|>{\"k\": [1, 2]}<|end|><|start|>assistant<|channel|>commentary to=functions.b "
                     "<|constrain|>json<|message|>{}<|call|>",
                     "", {{"a", R"({"k": [1, 2]})"}, {"b", "{}"}});
  expect_every_split(kOpenAI, "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>4.",
                     "4.", {});
  expect_every_split(kOpenAI, "<|channel|>commentary to=functions.a<|message|>{}<|call|>", "", {},
                     testing::RunOptions{.max_calls = 0});
}

TEST(ToolCallSyntaxes, ParallelFalseKeepsTheFirstCall) {
  testing::RunOptions one{.max_calls = 1};
  expect_every_split(kMistral, "[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{}", "", {{"a", "{}"}}, one);
  expect_every_split(kKimi,
                     "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
                     "<|tool_call_begin|>functions.b:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
                     "", {{"a", "{}", "functions.a:0"}}, one);
}

// Random texts of markers, JSON pieces and text: the parsers give the same content and calls
// however the text is split, and never crash.
TEST(ToolCallSyntaxes, FuzzSplitsAgree) {
  const char* kPieces[] = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "f", R"({"a": [1, "}"]})", R"([{"name": "g", "arguments": {}}])",
                           "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
                           "<｜tool▁calls▁end｜>", "\n```json\n", "\n```", "function", "<|tool_calls_section_begin|>",
                           "<|tool_call_begin|>", "functions.f:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                           "<|tool_calls_section_end|>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
                           "<arg_value>", "</arg_value>", "<function=f>", "<function=", "</function>", "<parameter=a>",
                           "<parameter=", "</parameter>", "{", "}", "[", "]", "\"", " ", "\n", "x", "ü", "<", "<｜",
                           "f(", "a=1", ")", "'s'", ",", "<|python_start|>", "<|start|>", "<|channel|>", "<|message|>",
                           "<|end|>", "<|call|>", "<|return|>", "<|constrain|>", "analysis", "final", " to=functions.f",
                           "commentary", "json", "<seed:tool_call>", "</seed:tool_call>", "<minimax:tool_call>",
                           "</minimax:tool_call>", "<invoke name=", "\"f\">", "</invoke>", "<parameter name=", "a>"};
  std::mt19937_64 rng(11);
  testing::RunOptions o{.functions = kGlmTools};
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 14);
    for (int k = 0; k < n; ++k) text += kPieces[rng() % std::size(kPieces)];
    for (ToolParserKind kind :
         {kMistral, kDeepSeek, kKimi, kGlm, kQwen, kSeed, kMiniMax, ToolParserKind::pythonic, ToolParserKind::openai}) {
      const Result whole = testing::run(kind, text, 0, o);
      for (size_t step : {size_t{1}, size_t{5}}) {
        const Result split = testing::run(kind, text, step, o);
        ASSERT_EQ(split.content, whole.content) << "kind " << static_cast<int>(kind) << " text " << text;
        ASSERT_EQ(split.calls, whole.calls) << "kind " << static_cast<int>(kind) << " text " << text;
      }
    }
  }
}

// What the real templates write for an assistant's call (transformers' renderings of
// get_weather({"city": "Zürich", "days": 2}) in models.json) parses back into that call.
TEST(ToolCallSyntaxes, TheTemplatesOwnCallsParseBack) {
  struct Case {
    const char* tmpl;
    const char* from;  // where the call starts in the rendering ...
    const char* to;    // ... and what ends it
  };
  for (const Case& c : {Case{"mistral-v0.3", "[TOOL_CALLS]", "</s>"}, Case{"mistral-small-3.1", "[TOOL_CALLS]", "</s>"},
                        Case{"glm-4.6", "<tool_call>", "</tool_call>"}, Case{"qwen2.5", "<tool_call>", "</tool_call>"}}) {
    SCOPED_TRACE(c.tmpl);
    const auto rendered = brigade::testing::chat_template_case(c.tmpl, "tools_call_and_result", false);
    ASSERT_TRUE(rendered.is_object()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
    const std::string text = rendered["expected"].get<std::string>();
    const size_t from = text.rfind(c.from);  // the call (the tools block may show the syntax first)
    ASSERT_NE(from, std::string::npos);
    const size_t to = text.find(c.to, from);
    ASSERT_NE(to, std::string::npos);
    const ToolFormat syntax = detect_tool_syntax(brigade::testing::real_chat_template(c.tmpl));
    std::vector<ToolFunction> functions;
    for (const auto& t : rendered["tools"]) functions.push_back({t["function"]["name"].get<std::string>(), t["function"]["parameters"].dump()});
    Result r = testing::run(tool_parser_kind(syntax), text.substr(from, to - from + std::string(c.to).size()), 0,
                            {.functions = functions});
    EXPECT_EQ(r.content, c.to == std::string("</s>") ? "</s>" : "");
    EXPECT_EQ(r.calls, (std::vector<Call>{{"get_weather", R"({"city": "Zürich", "days": 2})"}}));
  }
}

}  // namespace
}  // namespace brigade::server
