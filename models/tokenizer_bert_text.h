// What a WordPiece tokenizer.json does to text before the model: Hugging Face tokenizers'
// BertNormalizer and BertPreTokenizer (with WhitespaceSplit and Punctuation, its two halves),
// with the Unicode data of tokenizer_unicode.h. Text is code points here (utf8_to_u32).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

struct BertNormalizerOptions {
  bool clean_text = true;            // drop control characters, U+0000, U+FFFD; whitespace -> ' '
  bool handle_chinese_chars = true;  // ' ' around each CJK ideograph
  bool strip_accents = true;         // NFD, then drop nonspacing marks (Mn)
  bool lowercase = true;
};

// tokenizer.json's "normalizer": a BertNormalizer (strip_accents null follows lowercase, as in
// Hugging Face), or null for none (nullopt). unsupported, naming the type, for any other.
Expected<std::optional<BertNormalizerOptions>> parse_bert_normalizer(const nlohmann::json& normalizer,
                                                                     const std::string& origin);

// The normalized text, in the order Hugging Face applies the steps: clean_text,
// handle_chinese_chars, strip_accents, lowercase.
std::u32string bert_normalize(std::u32string_view text, const BertNormalizerOptions& options);

struct BertPreTokenizerOptions {
  bool split_whitespace = false;     // whitespace ends a word and is dropped
  bool isolate_punctuation = false;  // each punctuation character is a word of its own
};

// tokenizer.json's "pre_tokenizer": BertPreTokenizer (both), WhitespaceSplit, Punctuation with
// behavior Isolated, a Sequence of these, or null (the whole text is one word). unsupported,
// naming the type and listing these, for any other.
Expected<BertPreTokenizerOptions> parse_bert_pre_tokenizer(const nlohmann::json& pre_tokenizer,
                                                           const std::string& origin);

// The words of `text` in order, none empty; views into `text`.
std::vector<std::u32string_view> bert_pre_tokenize(std::u32string_view text, const BertPreTokenizerOptions& options);

}  // namespace brigade
