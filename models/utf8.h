// UTF-8 helpers shared by the tokenizers and the detokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

// Length of the well-formed UTF-8 sequence starting at s[i] (1-4), or 0 when the bytes there are
// not one (bad lead byte, bad continuation, overlong form, surrogate, > U+10FFFF, or cut short).
size_t utf8_sequence_length(std::string_view s, size_t i);
// Offset of the first byte that does not start a well-formed sequence; s.size() when all valid.
size_t utf8_first_invalid(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return utf8_first_invalid(s) == s.size(); }
// True when s[i..] is a proper prefix of some well-formed sequence (more bytes could complete it).
bool utf8_incomplete_tail(std::string_view s, size_t i);
// Appends the UTF-8 encoding of code point cp (< 0x110000, not a surrogate).
void append_utf8(std::string& out, uint32_t cp);
// Decodes the well-formed sequence of length n at s[i] (from utf8_sequence_length).
uint32_t decode_utf8(std::string_view s, size_t i, size_t n);
// The code points of valid UTF-8 text (an ill-formed byte becomes U+FFFD), and back.
std::u32string utf8_to_u32(std::string_view valid);
std::string u32_to_utf8(std::u32string_view text);

}  // namespace brigade
