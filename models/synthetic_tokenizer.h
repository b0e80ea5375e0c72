// A deterministic byte-level BPE vocabulary for synthetic checkpoints (brigade make-model).
//
// Ids: 0 "<unk>", 1 "<s>" (bos), 2 "</s>" (eos) as special added tokens; 3..258 the 256 byte
// tokens in GPT-2's byte-to-unicode mapping (byte b is id 3 + b); then one token per merge:
// common English words (with and without a leading space) built left to right, digit pairs and
// whitespace runs, then tokens extended letter by letter until exactly vocab_size ids exist.
// Every merge joins two existing tokens into a new, distinct one.
#pragma once

#include <string>

#include "core/status.h"

namespace brigade {

inline constexpr int kSyntheticUnkId = 0;
inline constexpr int kSyntheticBosId = 1;
inline constexpr int kSyntheticEosId = 2;
inline constexpr int kSyntheticMinVocab = 259;  // specials + 256 bytes

// tokenizer.json text in Hugging Face's exact layout; invalid_argument when vocab_size < 259.
Expected<std::string> synthetic_tokenizer_json(int vocab_size);
// The real chat template make-model writes for an architecture (models/chat_templates/*.jinja,
// compiled in): Llama 2's for llama, Qwen2.5's for qwen2, Qwen3's for qwen3 and qwen3_moe,
// DeepSeek-V3.1's for deepseek_v2 and deepseek_v3; Llama 2's for any other. The synthetic
// vocabulary keeps its <s>/</s> specials: other families' markers (<|im_start|>, <｜User｜>)
// tokenize as plain text, the prompt text is the real one.
struct SyntheticChatTemplate {
  const char* name;  // "llama-2", "qwen2.5", "qwen3", "deepseek-v3.1"
  const char* text;  // the Jinja source, as the model's tokenizer_config.json has it
};
SyntheticChatTemplate synthetic_chat_template(const std::string& arch);

// tokenizer_config.json text naming the special tokens (bos added by default, as Llama does)
// and `arch`'s chat template.
std::string synthetic_tokenizer_config_json(int max_position, const std::string& arch);

}  // namespace brigade
