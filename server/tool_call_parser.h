// Model output → OpenAI tool calls, incrementally: the same parser serves streaming (each piece
// of generated text as it comes) and whole responses (all text, then finish()).
//
//   hermes       (chatml / Qwen): <tool_call>{"name": .., "arguments": {..}}</tool_call>, any
//                number, anywhere in the text. A block whose JSON is malformed (or lacks a string
//                "name" and an object "arguments") stays in the content, tags and all; a final
//                block without its closing tag still counts when its JSON is whole. Whitespace
//                at the end of content is held until more content comes, and is dropped when
//                calls were made (so the content is the same however the text is split).
//   llama3_json  (llama-3): the whole output is one or more {"name": .., "parameters": {..}}
//                objects ("arguments" accepted too), separated by ';' or whitespace, optionally
//                after <|python_tag|>; anything else (or any malformed object) and the whole
//                output is content. Held until the end once it starts with '{' or the tag.
//   forced_named (tool_choice naming a function): all the output is that call's arguments,
//                streamed as it comes.
//   forced_array (tool_choice "required"): the output is a JSON array of {"name", <key>} calls;
//                each call goes out when its object is complete.
// Arguments of a parsed call are rewritten as Python's json.dumps writes them (vLLM's form);
// forced_named passes the model's text through.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::server {

// One piece of a call: the first for an index carries its name (and maybe all its arguments);
// later ones append to the arguments.
struct ToolCallDelta {
  int index = 0;
  std::string name;       // non-empty on the call's first delta only
  std::string arguments;  // JSON text (a piece of it for forced_named)
};

struct ToolParse {
  std::string content;  // text released as the message's content
  std::vector<ToolCallDelta> calls;
};

enum class ToolParserKind { hermes, llama3_json, forced_named, forced_array };

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // The next piece of generated text; returns what may be released now (text that could still
  // turn out to be a call is held back).
  virtual ToolParse feed(std::string_view text) = 0;
  // The output ended: releases or resolves what is held. Call once, after the last feed.
  virtual ToolParse finish() = 0;
  // Calls started so far.
  virtual int n_calls() const = 0;
};

// named: the function (forced_named); key: the arguments member of forced_array's objects
// ("arguments" or "parameters"). max_calls: calls after that many are dropped
// (parallel_tool_calls false: 1).
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolParserKind kind, int max_calls, std::string named = "",
                                                      std::string key = "arguments");

// The end of the JSON value starting at s[from] (an object, array or string; brackets counted
// outside strings), exclusive; npos when s ends first. Syntax is not checked.
size_t json_value_end(std::string_view s, size_t from);

}  // namespace brigade::server
