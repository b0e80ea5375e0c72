// JsonMatcher: a byte-level recognizer of JSON text (RFC 8259) that says, byte by byte, whether
// what it has read is still the beginning of a valid document. Constrained decoding
// (`response_format: json_object`, docs/architecture.md "Logit rules") walks it over each
// candidate token's bytes to mask the tokens that would break the document.
//
// The state is a small trivially copyable value (a bit stack for nesting up to kMaxDepth), so a
// search may copy it at every step. Strings are checked as UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF) and for escapes; control characters are refused inside
// them, as the RFC says. Numbers follow the RFC grammar (no leading zeros, no '+', no bare '.').
// Outside strings at most kMaxBlank consecutive whitespace bytes are accepted until the document
// is complete: JSON allows any amount, but a model that only emits spaces never finishes.
#pragma once

#include <cstdint>
#include <string_view>

namespace brigade {

class JsonMatcher {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxBlank = 16;

  // object_only: the top-level value must be an object (OpenAI's json_object mode).
  explicit JsonMatcher(bool object_only = true) : object_only_(object_only) {}

  // Feeds one byte: true when the text read so far is still a prefix of some valid document
  // (the state moves on); false when it is not, and then for good (every later feed is false).
  bool feed(uint8_t byte) {
    if (!failed_ && !step(byte)) failed_ = true;
    return !failed_;
  }
  // Feeds bytes in order; false at the first one that breaks the document.
  bool feed(std::string_view bytes) {
    for (char c : bytes)
      if (!feed(static_cast<uint8_t>(c))) return false;
    return true;
  }
  // A whole top-level value has been read (what follows may only be whitespace).
  bool complete() const { return mode_ == Mode::done; }

  // Equal states accept the same continuations (JsonMaskCache keys masks by the state).
  bool operator==(const JsonMatcher&) const = default;
  uint64_t hash() const;

 private:
  enum class Mode : uint8_t {
    value,         // a value (or, in an array just opened, ']')
    key_or_close,  // after '{': a key or '}'
    key,           // after ',' in an object: a key
    colon,         // after a key
    after_value,   // after a value inside a container: ',' or the closer
    string,        // inside a string (key_ says whether it is a key)
    escape,        // after '\' in a string
    unicode,       // inside \uXXXX (count_ hex digits read)
    number,        // inside a number (num_ says where)
    literal,       // inside true/false/null (lit_ and count_)
    done,          // the top-level value is complete
  };
  enum class Num : uint8_t { minus, zero, int_digits, dot, frac_digits, exp, exp_sign, exp_digits };

  bool step(uint8_t byte);
  bool start_value(uint8_t byte);
  bool end_value();  // a value just ended: done at the top, else after_value
  bool close(uint8_t byte);
  bool string_byte(uint8_t byte);
  bool blank(uint8_t byte);

  Mode mode_ = Mode::value;
  Num num_ = Num::minus;
  bool object_only_ = true;
  bool failed_ = false;
  bool key_ = false;          // the string being read is an object key
  bool array_open_ = false;   // in Mode::value: the array was just opened (']' may close it)
  uint8_t count_ = 0;         // hex digits of \u, or bytes of a literal matched
  uint8_t lit_ = 0;           // 0 true, 1 false, 2 null
  uint8_t utf8_left_ = 0;     // continuation bytes still expected in a string
  uint8_t utf8_lo_ = 0x80;    // the next continuation byte's range (narrowed after E0/ED/F0/F4)
  uint8_t utf8_hi_ = 0xBF;
  uint8_t blank_run_ = 0;     // consecutive whitespace bytes outside strings
  uint8_t depth_ = 0;
  uint64_t objects_ = 0;      // bit d set: the container at depth d + 1 is an object
};

}  // namespace brigade
