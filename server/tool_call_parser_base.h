// What the tool-call parsers (server/tool_call_parser.h) share: the numbering and content rules
// (Base), JSON helpers, and the factories of the parsers that live in their own files. Not an
// interface for the rest of the server.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace brigade::server::tool_parse {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s);

// {"name": string, <key>: object} → the call (arguments in Python's json.dumps form).
std::optional<ToolCallDelta> call_of(std::string_view text, std::initializer_list<const char*> keys);
// A JSON array of {<name_key>: a valid function name, <an arguments key>: object} → its calls (in
// order; the first of arguments_keys an item has is its arguments); nullopt when the text is not
// such an array, or is empty.
std::optional<std::vector<ToolCallDelta>> json_array_calls(std::string_view text, const char* name_key = "name",
                                                           std::initializer_list<const char*> arguments_keys = {"arguments"});
// A JSON object's text → its json.dumps form; nullopt when the text is not one object.
std::optional<std::string> object_arguments(std::string_view text);
// OpenAI's rule for function names (the only names a request's tools can have): 1 to 64 of
// a-z, A-Z, 0-9, '_' and '-'.
bool valid_function_name(std::string_view name);

// The earliest occurrence in s of any marker: its position and the marker's length; npos when none.
std::pair<size_t, size_t> find_first(std::string_view s, const std::vector<std::string_view>& markers);
// The length of the longest end of s that is a proper beginning of one of the markers (it may be
// completed by the next piece of text).
size_t partial_marker(std::string_view s, const std::vector<std::string_view>& markers);

// Numbering, the call limit, and content whose whitespace-only pieces are held until more
// content comes (dropped at the end when calls were made).
class Base : public ToolCallParser {
 public:
  explicit Base(int max_calls) : max_calls_(max_calls) {}
  int n_calls() const override { return n_calls_; }

 protected:
  // Trailing whitespace is held, so that the content is the same however the text is split.
  void content(std::string_view text, ToolParse& out);
  void call(ToolCallDelta d, ToolParse& out);
  void end(ToolParse& out);

 private:
  int max_calls_;
  int n_calls_ = 0;
  std::string space_;
};

// A parser that buffers the text and moves over it step by step (tagged syntaxes, mistral).
class Stepper : public Base {
 public:
  using Base::Base;
  ToolParse feed(std::string_view text) final;
  ToolParse finish() final;

 protected:
  // One move over buf_; false when it needs more text (last: the output ended; false once all
  // of buf_ is consumed).
  virtual bool step(ToolParse& out, bool last) = 0;
  std::string buf_;
};

// A syntax whose calls are marked blocks, optionally inside a marked section:
//   [section_open] ws* (call_open BODY call_close ws*)* [section_close]
// Without section markers the blocks stand anywhere in the text (hermes, glm45). `body` turns a
// block's BODY into a call; nullopt: malformed (the block stays content, its markers and all).
// Text in a section that is not a block is content; a block cut off by the end of the output
// is a call when its BODY so far is one. A syntax whose block holds a list of calls (lfm2, jamba)
// sets `calls` instead of `body`: nullopt, or no call, and the block stays content. `dropped`:
// markers removed from the text outside blocks (ERNIE 4.5's <response> and </response>).
// closed_only: a block cut off by the end of the output stays content, whatever its BODY (gemma4,
// whose vLLM parser reads only blocks with their end marker).
struct TaggedSyntax {
  std::vector<std::string_view> section_open, section_close;  // each: any of these
  std::string_view call_open, call_close;
  std::function<std::optional<ToolCallDelta>(std::string_view body)> body;
  std::function<std::optional<std::vector<ToolCallDelta>>(std::string_view body)> calls = {};
  std::vector<std::string_view> dropped = {};
  bool closed_only = false;
};
std::unique_ptr<ToolCallParser> make_tagged_parser(int max_calls, TaggedSyntax syntax);

// The syntaxes' TaggedSyntax (hermes, deepseek_v3, kimi_k2, glm45, qwen3_coder, seed_oss, minimax_m2, lfm2,
// jamba, nemotron_nano_v2, apertus, ernie45, gemma4); functions: the request's tools.
TaggedSyntax tagged_syntax(ToolParserKind kind, std::vector<ToolFunction> functions);

// Gemma 4's call body, call:NAME{ARGS} (server/tool_call_gemma4.cpp); nullopt when it is not one.
std::optional<ToolCallDelta> gemma4_call(std::string_view body);

std::unique_ptr<ToolCallParser> make_mistral_parser(int max_calls);
// Cohere Command's <|START_ACTION|> blocks (server/tool_call_cohere.cpp).
std::unique_ptr<ToolCallParser> make_cohere_parser(int max_calls);
// gpt-oss's harmony calls (server/harmony_parser.h), from an output that starts in the header
// the prompt opened.
std::unique_ptr<ToolCallParser> make_harmony_parser(int max_calls);

// The calls of an output that is all calls (llama3_json, pythonic), or nullopt: it is content.
using WholeResolver = std::function<std::optional<std::vector<ToolCallDelta>>(std::string_view text)>;
// Pythonic calls: [f(a=1, b="x"), g()] (optionally inside <|python_start|> .. <|python_end|>).
std::optional<std::vector<ToolCallDelta>> pythonic_calls(std::string_view text);
// A pythonic list of calls and nothing else (whitespace aside); json_names: values may also be
// JSON's true, false and null (LFM2 writes them).
std::optional<std::vector<ToolCallDelta>> python_call_list(std::string_view text, bool json_names);
// OLMo 3's calls: f(a=1)\ng(b=null) (one a line, or comma-separated; JSON's true / false / null
// read too), optionally inside <function_calls> .. </function_calls>.
std::optional<std::vector<ToolCallDelta>> olmo3_calls(std::string_view text);
// One Python literal (what ast.literal_eval reads: strings, numbers, True/False/None, lists,
// tuples, dicts with string keys) as JSON, or nullopt.
std::optional<nlohmann::ordered_json> python_literal(std::string_view text);

}  // namespace brigade::server::tool_parse
