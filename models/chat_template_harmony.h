// gpt-oss's prompt, OpenAI's harmony format (the `harmony` built-in family, models/chat_template.h),
// as OpenAI's harmony guide and renderer (openai/harmony docs/format.md, src/encoding.rs) write it:
//
//   <|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
//   Knowledge cutoff: 2024-06
//   Current date: {date}
//
//   Reasoning: {effort}
//
//   # Valid channels: analysis, commentary, final. Channel must be included for every message.
//   [Calls to these tools must go to the commentary channel: 'functions'.]<|end|>
//   [<|start|>developer<|message|># Instructions\n\n{system or developer message}\n\n# Tools\n\n## functions\n\n
//    namespace functions {\n\n// {description}\ntype {name} = (_: {..}) => any;\n\n} // namespace functions<|end|>]
//   <|start|>user<|message|>{content}<|end|>
//   <|start|>assistant<|channel|>final<|message|>{content}<|end|>            an earlier answer
//   <|start|>assistant<|channel|>analysis<|message|>{content}<|end|>         an answer's text beside its calls
//   <|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}<|call|>
//   <|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{result}<|end|>
//   <|start|>assistant                                                       the generation prompt
//
// (no newlines between messages). A tool's parameters JSON schema becomes the TypeScript-like
// type the harmony renderer writes (comments for descriptions, `?` for optional keys, enums as
// unions, `// default: ..`); a tool without parameters (or with no properties) is `() => any`.
// An assistant's text beside its calls is its chain of thought, as gpt-oss's own template
// renders it, kept until a final answer follows (the guide drops chains of thought then);
// earlier answers carry no analysis. A call turn's reasoning (ChatMessage::reasoning) is that
// chain of thought too, as the template renders `thinking` (refused beside text, as it does);
// an answer's reasoning is dropped, as the template drops it at inference.
// A result names its function by its tool_call_id (else by its place after the calls).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <span>
#include <string>

#include "core/status.h"
#include "models/chat_template.h"

namespace brigade {

// Roles and UTF-8 are checked by apply_chat_template; invalid_argument for a reasoning effort
// other than low/medium/high, a tool that is not JSON, a call's arguments that are not a JSON
// object, or a tool result with no call before it.
Expected<std::string> render_harmony(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                                     bool add_generation_prompt, const ChatRenderOptions& options);

// A parameters JSON schema as harmony's TypeScript-like type (`indent` before nested lines).
std::string harmony_typescript(const nlohmann::ordered_json& schema, const std::string& indent);

}  // namespace brigade
