// Pre-tokenizers: split text into words before the subword model runs. Each word is encoded
// independently (and cached), so the split decides which merges can ever apply.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits valid UTF-8 `text` into consecutive pieces covering all of it, in order.
  // Thread-safe (const, no shared mutable state).
  virtual std::vector<std::string_view> split(std::string_view text) const = 0;
};

// GPT-2's pattern, as Hugging Face's ByteLevel pre-tokenizer uses it with use_regex = true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Splits by a PCRE2 pattern (UTF + Unicode properties): every match is a piece, and so is every
// stretch between matches ("Isolated" behaviour). invalid_argument when the pattern does not compile.
Expected<std::unique_ptr<PreTokenizer>> make_regex_pretokenizer(const std::string& pattern);

}  // namespace brigade
