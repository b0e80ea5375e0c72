// A tokenizer.json "normalizer" of the kinds SentencePiece conversions write (XLM-RoBERTa's
// Sequence[Precompiled, Replace(" {2,}", " ")], T5's Strip + Replace, Llama's Prepend("▁") +
// Replace(" ", "▁")) and byte-level BPE files carry (Cohere's NFC), applied as Hugging Face
// tokenizers applies it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

class TextNormalizer {
 public:
  // Parses `normalizer` (null: none): Precompiled, Replace (a String or a PCRE2 Regex pattern),
  // Strip, Prepend, Lowercase, the Unicode forms NFD, NFKD, NFC and NFKC (with the library's
  // Unicode tables: tokenizer_unicode.h), and Sequence. unsupported, naming the type and listing
  // these, for any other (BertNormalizer is WordPiece's, tokenizer_bert_text.h); corrupt, naming
  // the field, for a malformed one.
  static Expected<TextNormalizer> parse(const nlohmann::json& normalizer, const std::string& origin);

  // The normalized form of valid UTF-8 `text` (valid UTF-8 too). Thread-safe.
  std::string normalize(std::string_view text) const;
  // Whether there is no step (normalize returns its text).
  bool empty() const { return steps_.empty(); }

  struct Step;  // one normalizer (defined in the .cpp)

 private:
  Status add(const nlohmann::json& normalizer, const std::string& origin);

  std::vector<std::shared_ptr<const Step>> steps_;  // applied in order
};

}  // namespace brigade
