// OpenAI tool calling on the request side: `tools`, `tool_choice` and `parallel_tool_calls` of a
// chat completion body → ToolRequest, and the guided-decoding constraint that forces a call.
//
// Forcing (tool_choice "required" or a named function) reuses brigade's JSON-schema guided
// decoding, as vLLM does: the constrained output is plain JSON, not the family's tagged text.
//   named:    the output is the function's arguments object (its `parameters` schema);
//   required: the output is an array of calls [{"name": .., "<key>": {..}}, ...] (anyOf over the
//             tools, each name a const with its parameters schema), at most one with
//             parallel_tool_calls false. <key> is "parameters" for llama3_json (Llama 3.1's
//             own) and "arguments" for every other syntax. The forced output is this JSON
//             whatever syntax the model writes unforced (mistral, deepseek, glm45, kimi_k2
//             included), as vLLM forces it. With more tools than the schema matcher follows
//             alternatives at once (SchemaMatcher::kMaxThreads, 4), the name is one of the
//             tools' and the arguments any object: every tool stays callable, but its
//             arguments' schema is not enforced.
// The server turns that output into tool_calls (server/tool_call_parser.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "models/chat_template.h"
#include "server/tool_call_parser.h"

namespace brigade::server {

enum class ToolChoice { none, automatic, required, named };

struct ToolRequest {
  std::vector<std::string> tools;       // each tool object's JSON text as sent (the template prints it)
  std::vector<ToolFunction> functions;  // tools[i]'s function
  ToolChoice choice = ToolChoice::none;  // OpenAI's default: auto with tools, none without
  std::string named;                     // ToolChoice::named: the function forced
  bool parallel = true;                  // parallel_tool_calls: more than one call per turn
};

// How the model writes calls: its chat template's syntax (models/chat_template.h), or the one
// --tool-call-parser names.
using ToolFormat = ChatToolSyntax;

// The arguments member of a forced "required" call array: Llama 3.1's "parameters" for
// llama3_json, else "arguments".
const char* forced_arguments_key(ToolFormat format);
// The parser of a syntax's calls (both deepseek syntaxes share one, and so do jamba,
// hunyuan_a13b and minimax); hermes for none.
ToolParserKind tool_parser_kind(ToolFormat format);

// Reads the three fields. invalid_argument naming the field for: a malformed tool (not
// {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}), a name
// outside [a-zA-Z0-9_-]{1,64} or given twice, a tool_choice that is not "none", "auto",
// "required" or {"type": "function", "function": {"name": ..}}, a tool_choice other than "none"
// without tools, a named function not in `tools`, and a forced choice together with another
// output constraint (response_format json, guided_*), which `gen` already holds.
Status read_tools(const nlohmann::json& body, const GenerateOptions& gen, ToolRequest& out);
Status read_tools(const nlohmann::ordered_json& body, const GenerateOptions& gen, ToolRequest& out);

// For ToolChoice::required and ::named: sets gen.response_format = json_schema and the schema
// described above; nothing for the others.
void force_tool_choice(const ToolRequest& tools, ToolFormat format, GenerateOptions& gen);

}  // namespace brigade::server
