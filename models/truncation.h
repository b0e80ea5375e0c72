// Truncating encoded inputs as Hugging Face `tokenizers` does with truncation=True and
// max_length=k on the right side (TruncationStrategy::LongestFirst for pairs), which is how vLLM
// truncates the inputs of its pooling tasks (embed, classify, score: truncate_prompt_tokens) and
// the pairs a cross-encoder scores. The special tokens the post-processor adds are kept and
// counted in k; they are found as where an encoding with them differs from the same text(s)
// encoded without (so any Tokenizer works, its post-processor unchanged).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "models/tokenizer.h"

namespace brigade {

// How many tokens of two sequences of n1 and n2 tokens longest_first keeps within `budget` (their
// total): none cut when they fit; else the longer one cut to what the shorter leaves; else both
// to half the budget each (the second taking the odd token).
std::pair<size_t, size_t> longest_first(size_t n1, size_t n2, size_t budget);

// `full` (text encoded with its special tokens when with_specials, else as is) cut to max_length
// tokens from the right: the text's first tokens and every special token around them.
// invalid_argument when max_length leaves no room beside the special tokens; full as is when it
// fits or max_length <= 0.
Expected<std::vector<int32_t>> truncate_text_right(const Tokenizer& tokenizer, std::string_view text,
                                                   std::vector<int32_t> full, bool with_specials, int max_length);

// tokenizer.encode_pair(a, b, type_ids) cut to max_length tokens by longest_first (max_length <= 0:
// not cut). Errors as encode_pair's, and invalid_argument as truncate_text_right's.
Expected<std::vector<int32_t>> encode_pair_truncated(const Tokenizer& tokenizer, std::string_view a, std::string_view b,
                                                     int max_length, std::vector<int32_t>* type_ids);

}  // namespace brigade
