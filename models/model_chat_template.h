// The chat template a model is served with, chosen in the order vLLM and SGLang use:
//   1. the configured one (EngineOptions::chat_template, `brigade serve --chat-template`): a
//      built-in family's name (llama-2, llama-3, chatml, deepseek, harmony; rendered in C++,
//      models/chat_template.h), a Jinja file's path, or an inline template (text holding "{{" or
//      "{%");
//   2. the model's own template, always run as Jinja (models/chat_template_jinja.h), so the prompt
//      is the one the model was trained on: tokenizer_config.json "chat_template" (a string, or the
//      list form [{"name": "default", "template": ...}, {"name": "tool_use", ...}]),
//      chat_template.jinja beside it, or the GGUF key tokenizer.chat_template;
//   3. none (not_found): a model that ships no template (a llama2.c .bin, a bare tokenizer) is
//      not guessed one; chat answers 400 and `--chat-template` names one.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"
#include "models/chat_template.h"

namespace brigade {

class JinjaChatTemplate;

struct ChatTemplate {
  std::optional<ChatFamily> family;                         // set (configured by name): the built-in family renders
  std::shared_ptr<const JinjaChatTemplate> jinja;           // else this renders
  std::shared_ptr<const JinjaChatTemplate> jinja_tool_use;  // the list form's "tool_use" (for requests with tools)
  std::string origin;  // where it came from: "tokenizer_config.json", "GGUF tokenizer.chat_template", a file

  // "Jinja (tokenizer_config.json)", or "built-in llama-3 (--chat-template)".
  std::string describe() const;
  // How the model writes tool calls; none: tools are refused.
  ChatToolSyntax tool_syntax() const;
  // The prompt text (models/chat_template.h and chat_template_jinja.h give the errors).
  // template_kwargs: extra template variables as a JSON object's text (JinjaChatTemplate::apply);
  // a built-in family takes only `reasoning_effort` (harmony renders it, the others ignore it).
  Expected<std::string> apply(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                              bool add_generation_prompt, const std::string& template_kwargs = "") const;
};

// transformers' apply_chat_template(continue_final_message=True) (vLLM's chat field of that
// name), applied to a render made without the generation prompt: the text is cut right after the
// final message's text (its last text part when it has parts), so the model continues that message
// instead of starting a new one. A template that trims the message is followed (the cut goes after
// the stripped text when the message's trailing whitespace is not in the render). invalid_argument,
// with transformers' reason, when the message has no text part or the render does not hold its text.
Expected<std::string> cut_after_final_message(std::string rendered, const ChatMessage& final_message);

// The special-token text a template's bos_token/eos_token stand for (tokenizer_config.json's,
// else the tokenizer's).
struct ChatSpecialTokens {
  std::string bos, eos;
};

// A Jinja template from its text; `origin` names where it came from in describe() and errors.
// invalid_argument when it does not parse.
Expected<ChatTemplate> make_chat_template(const std::string& text, const std::string& origin,
                                          const ChatSpecialTokens& tokens);

// The chat template of the model at `model_path` (a directory or a .gguf file), `configured`
// first when not empty. not_found when the model has none; `tokens` fills bos/eos where
// tokenizer_config.json does not name them.
Expected<ChatTemplate> load_chat_template(const std::string& model_path, const std::string& configured,
                                          const ChatSpecialTokens& tokens);

}  // namespace brigade
