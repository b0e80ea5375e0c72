#include "models/truncation.h"

#include <algorithm>
#include <string>

namespace brigade {
namespace {

Status no_room(int max_length, size_t n_special) {
  return invalid_argument("truncate_prompt_tokens " + std::to_string(max_length) +
                          " leaves no room for the input beside its " + std::to_string(n_special) + " special tokens");
}

Status not_around() {
  return internal_error("the special tokens of this tokenizer do not surround its text; the input cannot be "
                        "truncated keeping them");
}

// Where `part` lies in `full` at or after `from`; full.size() when it does not.
size_t find_in(const std::vector<int32_t>& full, const std::vector<int32_t>& part, size_t from) {
  if (part.size() > full.size() || from > full.size() - part.size()) return full.size();
  const auto at = std::search(full.begin() + static_cast<std::ptrdiff_t>(from), full.end(), part.begin(), part.end());
  return at == full.end() && !part.empty() ? full.size() : static_cast<size_t>(at - full.begin());
}

template <typename T>
void append(std::vector<T>& out, const std::vector<T>& from, size_t begin, size_t end) {
  out.insert(out.end(), from.begin() + static_cast<std::ptrdiff_t>(begin), from.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace

std::pair<size_t, size_t> longest_first(size_t n1, size_t n2, size_t budget) {
  if (n1 + n2 <= budget) return {n1, n2};
  const bool swapped = n1 > n2;
  if (swapped) std::swap(n1, n2);  // n1 the shorter
  n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
  if (n1 + n2 > budget) {
    n1 = budget / 2;
    n2 = n1 + budget % 2;
  }
  if (swapped) std::swap(n1, n2);
  return {n1, n2};
}

Expected<std::vector<int32_t>> truncate_text_right(const Tokenizer& tokenizer, std::string_view text,
                                                   std::vector<int32_t> full, bool with_specials, int max_length) {
  if (max_length <= 0 || full.size() <= static_cast<size_t>(max_length)) return full;
  std::vector<int32_t> plain = full;
  if (with_specials) {
    BRIGADE_ASSIGN_OR_RETURN(plain, tokenizer.encode(text, false));
  }
  const size_t at = find_in(full, plain, 0);
  if (at == full.size() && !plain.empty()) return not_around();
  const size_t n_special = full.size() - plain.size();
  if (static_cast<size_t>(max_length) <= n_special) return no_room(max_length, n_special);
  std::vector<int32_t> out(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(at));
  append(out, plain, 0, static_cast<size_t>(max_length) - n_special);
  append(out, full, at + plain.size(), full.size());
  return out;
}

Expected<std::vector<int32_t>> encode_pair_truncated(const Tokenizer& tokenizer, std::string_view a, std::string_view b,
                                                     int max_length, std::vector<int32_t>* type_ids) {
  std::vector<int32_t> types;
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> full, tokenizer.encode_pair(a, b, &types));
  if (max_length <= 0 || full.size() <= static_cast<size_t>(max_length)) {
    if (type_ids != nullptr) *type_ids = std::move(types);
    return full;
  }
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<int32_t> pa, tokenizer.encode(a, false));
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<int32_t> pb, tokenizer.encode(b, false));
  const size_t at_a = find_in(full, pa, 0);
  const size_t at_b = at_a == full.size() ? full.size() : find_in(full, pb, at_a + pa.size());
  if (at_a + pa.size() > full.size() || at_b + pb.size() > full.size() || types.size() != full.size())
    return not_around();
  const size_t n_special = full.size() - pa.size() - pb.size();
  if (static_cast<size_t>(max_length) <= n_special) return no_room(max_length, n_special);
  const auto [n1, n2] = longest_first(pa.size(), pb.size(), static_cast<size_t>(max_length) - n_special);
  std::vector<int32_t> out, out_types;
  // Specials before a, a's first n1, specials between, b's first n2, specials after; each token
  // keeps the type the post-processor gave it.
  const size_t cuts[][2] = {{0, at_a}, {at_a, at_a + n1}, {at_a + pa.size(), at_b}, {at_b, at_b + n2},
                            {at_b + pb.size(), full.size()}};
  for (const auto& c : cuts) {
    append(out, full, c[0], c[1]);
    append(out_types, types, c[0], c[1]);
  }
  if (type_ids != nullptr) *type_ids = std::move(out_types);
  return out;
}

}  // namespace brigade
