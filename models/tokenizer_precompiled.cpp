#include "models/tokenizer_precompiled.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstring>

#include "models/utf8.h"

namespace brigade {
namespace {

// darts-clone's unit layout.
bool has_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t value(uint32_t unit) { return unit & 0x7FFFFFFFu; }
uint32_t label(uint32_t unit) { return unit & (0x80000000u | 0xFFu); }
uint32_t offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

// Extended grapheme clusters by PCRE2's \X (UAX #29 of PCRE2's Unicode version; Hugging Face uses
// Rust's unicode-segmentation). Only clusters shorter than 6 bytes matter to normalize().
class GraphemeCutter {
 public:
  GraphemeCutter() {
    int err = 0;
    PCRE2_SIZE at = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>("\\X"), 2, PCRE2_UTF, &err, &at, nullptr);
    BRIGADE_CHECK(code_ != nullptr, "\\X compiles");
  }
  ~GraphemeCutter() { pcre2_code_free(code_); }
  GraphemeCutter(const GraphemeCutter&) = delete;
  GraphemeCutter& operator=(const GraphemeCutter&) = delete;

  // Byte length of the cluster at text[pos] (pos < text.size(), a character boundary).
  size_t length(std::string_view text, size_t pos, pcre2_match_data* md) const {
    const auto c = static_cast<uint8_t>(text[pos]);
    // Two ASCII characters always have a boundary between them, but CR LF.
    if (c < 0x80 && (pos + 1 == text.size() || (static_cast<uint8_t>(text[pos + 1]) < 0x80 && !(c == '\r' && text[pos + 1] == '\n'))))
      return 1;
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                               PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, nullptr);
    BRIGADE_CHECK(rc > 0, "\\X matches at every character");
    return pcre2_get_ovector_pointer(md)[1] - pos;
  }
  pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

const GraphemeCutter& grapheme_cutter() {
  static const GraphemeCutter cutter;
  return cutter;
}

int base64_sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

}  // namespace

std::optional<std::string> decode_base64_text(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int n_bits = 0;
  for (char c : text) {
    const int v = base64_sextet(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6 | static_cast<uint32_t>(v)) & 0xFFFFFF;
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(static_cast<char>((acc >> n_bits) & 0xFF));
    }
  }
  return out;
}

Expected<PrecompiledCharsmap> PrecompiledCharsmap::parse(std::string_view base64, const std::string& origin) {
  const std::string what = origin + ": normalizer Precompiled's precompiled_charsmap ";
  const std::optional<std::string> blob = decode_base64_text(base64);
  if (!blob) return corrupt(what + "is not base64");
  uint32_t trie_bytes = 0;
  if (blob->size() < 4) return corrupt(what + "is shorter than its 4-byte header");
  for (int i = 3; i >= 0; --i) trie_bytes = trie_bytes << 8 | static_cast<uint8_t>((*blob)[static_cast<size_t>(i)]);
  if (trie_bytes == 0 || trie_bytes % 4 != 0 || trie_bytes > blob->size() - 4)
    return corrupt(what + "is truncated: its trie of " + std::to_string(trie_bytes) + " bytes does not fit in " +
                   std::to_string(blob->size() - 4) + " bytes (or is not a whole number of 4-byte units)");
  PrecompiledCharsmap m;
  m.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < m.units_.size(); ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(blob->data() + 4 + 4 * i);
    m.units_[i] = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
  m.pool_ = blob->substr(4 + trie_bytes);
  if (!is_valid_utf8(m.pool_)) return corrupt(what + "has replacement strings that are not UTF-8");
  BRIGADE_RETURN_IF_ERROR(m.check_trie(what));
  return m;
}

// Walks every node reachable from the root, so that lookups never read a replacement outside the
// pool (a corrupt trie fails here, at load, and not in the middle of encoding).
Status PrecompiledCharsmap::check_trie(const std::string& what) const {
  const size_t n = units_.size();
  std::vector<uint8_t> seen(n, 0);
  std::vector<size_t> stack{offset(units_[0])};  // bases of nodes to visit
  while (!stack.empty()) {
    const size_t base = stack.back();
    stack.pop_back();
    for (uint32_t c = 1; c < 256; ++c) {
      const size_t child = base ^ c;
      if (child >= n || label(units_[child]) != c || seen[child]) continue;
      seen[child] = 1;
      const size_t next = child ^ offset(units_[child]);
      if (next >= n) return corrupt(what + "is truncated: a trie node points past its end");
      if (has_leaf(units_[child])) {
        const uint32_t at = value(units_[next]);
        if (at > pool_.size() || (at < pool_.size() && (static_cast<uint8_t>(pool_[at]) & 0xC0) == 0x80))
          return corrupt(what + "has a replacement offset " + std::to_string(at) + " outside its pool of " +
                         std::to_string(pool_.size()) + " bytes (or inside a character)");
      }
      stack.push_back(next);
    }
  }
  return Status::ok();
}

std::optional<std::string_view> PrecompiledCharsmap::shortest_prefix(std::string_view key) const {
  size_t node = offset(units_[0]);
  for (char ch : key) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size() || label(units_[node]) != c) break;
    const uint32_t unit = units_[node];
    node ^= offset(unit);
    if (node >= units_.size()) break;
    if (has_leaf(unit)) {
      const uint32_t at = value(units_[node]);
      const size_t end = pool_.find('\0', at);
      return std::string_view(pool_).substr(at, end == std::string::npos ? std::string::npos : end - at);
    }
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  const GraphemeCutter& cutter = grapheme_cutter();
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(cutter.code(), nullptr);
  BRIGADE_CHECK(md != nullptr, "pcre2 match data allocation");
  for (size_t pos = 0; pos < text.size();) {
    const std::string_view cluster = text.substr(pos, cutter.length(text, pos, md));
    pos += cluster.size();
    if (cluster.size() < 6) {
      if (auto whole = shortest_prefix(cluster)) {
        out += *whole;
        continue;
      }
    }
    for (size_t i = 0; i < cluster.size();) {
      const size_t n = std::max<size_t>(1, utf8_sequence_length(cluster, i));
      const std::string_view ch = cluster.substr(i, n);
      const auto replaced = shortest_prefix(ch);
      out += replaced ? *replaced : ch;
      i += n;
    }
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace brigade
