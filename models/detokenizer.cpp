#include "models/detokenizer.h"

#include <algorithm>

#include "models/utf8.h"

namespace brigade {

size_t append_valid_utf8(std::string& out, std::string_view bytes, bool hold_tail) {
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t n = utf8_sequence_length(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else if (hold_tail && utf8_incomplete_tail(bytes, i)) {
      return bytes.size() - i;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for one ill-formed byte
      ++i;
    }
  }
  return 0;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (id < 0 || id >= tokenizer_.vocab_size()) return {};
  if (tokenizer_.is_special(id)) {
    const auto& eos = tokenizer_.eos_ids();
    if (skip_special_ || std::find(eos.begin(), eos.end(), id) != eos.end()) return {};
  }
  pending_ += tokenizer_.token_to_piece(id);
  std::string out;
  const size_t held = append_valid_utf8(out, pending_, /*hold_tail=*/true);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  append_valid_utf8(out, pending_, /*hold_tail=*/false);
  pending_.clear();
  return out;
}

}  // namespace brigade
