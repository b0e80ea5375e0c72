// Chat templates of the supported families, written out in C++ (no Jinja interpreter): the
// prompt text a family's tokenizer_config.json "chat_template" renders for a list of messages.
// The text includes the family's BOS/EOS markers as special-token text, so encode it with
// add_bos = false (the tokenizers turn special-token text into ids).
//
//   llama-2:  <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
//   llama-3:  <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
//   chatml:   <|im_start|>{role}\n{content}<|im_end|>\n...   (Qwen2/Qwen3; no default system)
//   deepseek: <｜begin▁of▁sentence｜>{system}\n\nUser: {user}\n\nAssistant: {assistant}<｜end▁of▁sentence｜>...
// Contents are trimmed of surrounding whitespace for llama-2 and llama-3, as their templates do.
#pragma once

#include <span>
#include <string>

#include "core/status.h"

namespace brigade {

enum class ChatFamily { llama2, llama3, chatml, deepseek };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// "llama-2", "llama-3", "chatml" (alias "qwen"), "deepseek"; unsupported listing them otherwise.
Expected<ChatFamily> parse_chat_family(const std::string& name);
const char* chat_family_name(ChatFamily family);

// The family whose markers a Jinja chat_template contains; unsupported (saying to set the family
// in the configuration) when none matches.
Expected<ChatFamily> detect_chat_family(const std::string& jinja_template);

// The family of a model directory: `configured` when not empty, else detected from
// tokenizer_config.json's chat_template. not_found when neither gives one.
Expected<ChatFamily> chat_family_for_model(const std::string& model_dir, const std::string& configured);

// Renders messages; add_generation_prompt appends the opening of the assistant's turn.
// invalid_argument for an unknown role, a system message that is not first, or invalid UTF-8.
Expected<std::string> apply_chat_template(ChatFamily family, std::span<const ChatMessage> messages,
                                          bool add_generation_prompt);

}  // namespace brigade
