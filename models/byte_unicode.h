// GPT-2's byte-to-unicode mapping used by byte-level BPE: every byte value maps to one printable
// code point (printable ASCII and Latin-1 map to themselves; the rest to U+0100 upwards), so a
// token's bytes can be stored as a readable string in tokenizer.json ("Ġ" is the space byte).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace brigade {

// The UTF-8 string of the code point byte b maps to.
const std::string& byte_to_unicode(uint8_t b);
// The byte whose mapping is code point cp, or nullopt when cp is not in the mapping.
std::optional<uint8_t> unicode_to_byte(uint32_t cp);
// Maps every byte of `bytes` (e.g. " the" -> "Ġthe").
std::string bytes_to_unicode_string(std::string_view bytes);
// The inverse; nullopt when `s` holds a code point outside the mapping (or invalid UTF-8).
std::optional<std::string> unicode_string_to_bytes(std::string_view s);

}  // namespace brigade
