#include "models/byte_unicode.h"

#include <array>

#include "models/utf8.h"

namespace brigade {
namespace {

struct Tables {
  std::array<uint32_t, 256> cp{};        // byte -> code point
  std::array<std::string, 256> utf8{};   // byte -> UTF-8 of that code point
  std::array<int16_t, 324> byte_of{};    // code point (< 324) -> byte, -1 when unmapped
};

const Tables& tables() {
  static const Tables t = [] {
    Tables r;
    r.byte_of.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      r.cp[b] = printable ? b : next++;
      append_utf8(r.utf8[b], r.cp[b]);
      r.byte_of[r.cp[b]] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return tables().utf8[b]; }

std::optional<uint8_t> unicode_to_byte(uint32_t cp) {
  if (cp >= tables().byte_of.size() || tables().byte_of[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().byte_of[cp]);
}

std::string bytes_to_unicode_string(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_to_unicode(static_cast<uint8_t>(c));
  return out;
}

std::optional<std::string> unicode_string_to_bytes(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return std::nullopt;
    auto b = unicode_to_byte(decode_utf8(s, i, n));
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
    i += n;
  }
  return out;
}

}  // namespace brigade
