// A model's own Jinja chat template (models/jinja_template.h), rendered with the variables
// transformers' apply_chat_template gives it:
//   messages               [{role, content, tool_calls?, tool_call_id?}], each assistant call as
//                          {"id", "type": "function", "function": {"name", "arguments": <object>}}
//                          (the OpenAI arguments string parsed, as vLLM does); an assistant turn
//                          with calls and no text has no content key (clients send null, and
//                          transformers drops the keys whose value is None); an assistant turn
//                          with reasoning carries it as reasoning_content and reasoning (the two
//                          keys vLLM sets) and as thinking (what gpt-oss's template reads)
//   tools                  the tool objects as the client sent them (keys in order), or none
//   add_generation_prompt  bool
//   bos_token, eos_token   the model's special-token text
//   documents              none, or the `documents` template variable given (RAG templates such as
//                          Command R's; vLLM's request field)
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "models/chat_template.h"
#include "models/jinja_template.h"

namespace brigade {

// The tool-call syntax a template's source teaches, by the markers it writes: mistral for
// [TOOL_CALLS]; deepseek_v3 for <｜tool▁calls▁begin｜> with ```json fences (V3, R1), deepseek_v31
// without them; kimi_k2 for <|tool_calls_section_begin|> or Kimi's tool_declare system turn;
// openai for <|channel|> with to= and functions. (gpt-oss's harmony); glm45 for <arg_key>; seed_oss
// for <seed:tool_call>; minimax_m2 for <minimax:tool_call>; qwen3_coder for <function= with
// <parameter=; cohere_command3 for <|START_ACTION|> (Command R7B / A); granite for <|tool_call|>
// with Granite's <|start_of_role|>; lfm2 for <|tool_call_start|>, <|tool_list_start|> or LFM2.5's
// "List of tools: ["; gemma4 for <|tool_call>call: (Gemma 4); hermes for <tool_call> (Granite 4.0 / 4.1 included);
// llama3_json for <|python_tag|> or an ipython role; else none (tools are refused).
ChatToolSyntax detect_tool_syntax(std::string_view source);

class JinjaChatTemplate {
 public:
  // invalid_argument (with the line) when the source does not parse.
  static Expected<JinjaChatTemplate> create(const std::string& source, std::string bos_token, std::string eos_token);

  // The prompt text. invalid_argument for invalid UTF-8, a call's arguments that are not JSON,
  // a tool that is not a JSON object, or what the template refuses or fails on;
  // out_of_resources when it runs past a render limit.
  // template_kwargs: empty, or a JSON object's text whose members are set as template variables
  // (vLLM's chat_template_kwargs, and `documents`, transformers' argument); invalid_argument when
  // it is not one or sets a variable the render sets itself (messages, tools,
  // add_generation_prompt, bos_token, eos_token).
  Expected<std::string> apply(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                              bool add_generation_prompt, const std::string& template_kwargs = "",
                              const jinja::RenderOptions& options = {}) const;

  // How a model with this template writes tool calls (detect_tool_syntax of its source).
  ChatToolSyntax tool_syntax() const { return tool_syntax_; }
  // The text bos_token and eos_token render as.
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  jinja::JinjaTemplate template_;
  std::string bos_token_, eos_token_;
  ChatToolSyntax tool_syntax_ = ChatToolSyntax::none;
};

}  // namespace brigade
