#include "models/utf8.h"

namespace brigade {
namespace {

// Expected total length from a lead byte, or 0 for a byte that cannot lead.
size_t lead_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Allowed range of the second byte, which rules out overlongs, surrogates and > U+10FFFF.
bool second_ok(uint8_t lead, uint8_t b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto lead = static_cast<uint8_t>(s[i]);
  const size_t n = lead_length(lead);
  if (n <= 1 || i + n > s.size()) return n == 1 ? 1 : 0;
  if (!second_ok(lead, static_cast<uint8_t>(s[i + 1]))) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

size_t utf8_first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

bool utf8_incomplete_tail(std::string_view s, size_t i) {
  const auto lead = static_cast<uint8_t>(s[i]);
  const size_t n = lead_length(lead);
  const size_t have = s.size() - i;
  if (n <= 1 || have >= n) return false;
  if (have >= 2 && !second_ok(lead, static_cast<uint8_t>(s[i + 1]))) return false;
  for (size_t k = 2; k < have; ++k)
    if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

std::u32string utf8_to_u32(std::string_view valid) {
  std::u32string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size();) {
    const size_t n = utf8_sequence_length(valid, i);
    out += n == 0 ? U'\uFFFD' : static_cast<char32_t>(decode_utf8(valid, i, n));
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string u32_to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, static_cast<uint32_t>(cp));
  return out;
}

}  // namespace brigade
