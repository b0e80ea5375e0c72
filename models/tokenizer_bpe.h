// Byte-level BPE (GPT-2 style) from a Hugging Face tokenizer.json: model.type "BPE" with a
// ByteLevel decoder, no normalizer, and a ByteLevel pre-tokenizer (GPT-2 regex) or a Sequence
// of regex Splits then ByteLevel (Llama 3, Qwen2/3, DeepSeek). Added tokens are split out of the
// text first (exact match, leftmost then longest; lstrip/rstrip flags are not applied), the rest
// is split by the pre-tokenizer, each piece is mapped byte -> unicode and merged by rank.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/tokenizer.h"

namespace brigade {

// tokenizer_json: tokenizer.json text; config_json: tokenizer_config.json text or empty (it names
// bos_token/eos_token); origin names the file in error messages.
Expected<std::unique_ptr<Tokenizer>> load_bpe_tokenizer(const std::string& tokenizer_json,
                                                        const std::string& config_json,
                                                        const std::string& origin);
// The same from parsed JSON; config is null when there is no tokenizer_config.json.
Expected<std::unique_ptr<Tokenizer>> load_bpe_tokenizer(const nlohmann::json& tokenizer_json,
                                                        const nlohmann::json& config,
                                                        const std::string& origin);

}  // namespace brigade
