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

// Qwen2/3's pattern (Llama 3's with single digits), as their tokenizer.json writes it; also the
// PAT_STR of the tiktoken vocabularies of Hunyuan and Qwen (v1) (tokenizer_tiktoken.h).
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Llama 3's pattern as its tokenizer.json writes it (OpenAI's cl100k_base); Qwen2/3 differ only in
// single digits. Also the pat_str of GLM-4's tiktoken vocabulary (tokenizer_tiktoken.h).
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Splits by a PCRE2 pattern (UTF + Unicode properties): every match is a piece, and so is every
// stretch between matches ("Isolated" behaviour). invalid_argument when the pattern does not compile.
Expected<std::unique_ptr<PreTokenizer>> make_regex_pretokenizer(const std::string& pattern);

// Hugging Face's Digits pre-tokenizer (Cohere's, before ByteLevel): with individual_digits every
// numeric character (Rust's char::is_numeric, which tokenizers uses: general category N* of its
// Unicode version, newer than PCRE2's \p{N}, so a table rather than a regex) is a piece of its
// own, else each run of them is one; every stretch between is a piece too.
std::unique_ptr<PreTokenizer> make_digits_pretokenizer(bool individual_digits);

}  // namespace brigade
