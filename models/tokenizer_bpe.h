// Byte-level BPE (GPT-2 style) from a Hugging Face tokenizer.json: model.type "BPE" with a
// ByteLevel decoder, a normalizer or none (TextNormalizer: Cohere's NFC), and a ByteLevel
// pre-tokenizer (GPT-2 regex) or a Sequence of regex Splits and Digits then ByteLevel (Llama 3,
// Qwen2/3, DeepSeek; Cohere's Digits then ByteLevel). As in Hugging Face's AddedVocabulary, added
// tokens with "normalized" false are split out of the raw text first (exact match, leftmost then
// longest, lstrip/rstrip taking the whitespace beside), the text between is normalized, added
// tokens with normalized true are split out of that by their normalized content, and the rest is
// split by the pre-tokenizer, each piece mapped byte -> unicode and merged by rank.
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
