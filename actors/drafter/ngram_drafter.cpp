#include "actors/drafter/ngram_drafter.h"

#include <algorithm>
#include <string>

namespace brigade {

Status NgramDrafterOptions::validate() const {
  if (ngram_min < 1) return invalid_argument("ngram_min must be >= 1 (got " + std::to_string(ngram_min) + ")");
  if (ngram_max < ngram_min)
    return invalid_argument("ngram_max (" + std::to_string(ngram_max) + ") must be >= ngram_min (" +
                            std::to_string(ngram_min) + ")");
  return Status::ok();
}

NgramDrafter::NgramDrafter(NgramDrafterOptions options) : options_(options) {
  BRIGADE_CHECK(options_.validate().is_ok(), "drafter options are validated by the caller");
}

DraftProposal NgramDrafter::propose(const DraftQuery& query) {
  DraftProposal out;
  const std::span<const int32_t> t = query.tokens;
  const int len = static_cast<int>(t.size());
  if (query.max_tokens <= 0) return out;
  for (int n = std::min(options_.ngram_max, len - 1); n >= options_.ngram_min; --n) {
    const std::span<const int32_t> suffix = t.last(static_cast<size_t>(n));
    // Earlier occurrences start at [0, len - n); the most recent one wins (closest context).
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), t.begin() + start)) continue;
      const int from = start + n;  // < len: the match is earlier than the suffix itself
      const int n_out = std::min(query.max_tokens, len - from);
      out.tokens.assign(t.begin() + from, t.begin() + from + n_out);
      return out;
    }
  }
  return out;
}

}  // namespace brigade
