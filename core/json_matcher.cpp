#include "core/json_matcher.h"

namespace brigade {

namespace {

bool is_blank(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

}  // namespace

uint64_t JsonMatcher::hash() const {
  const uint8_t small[] = {static_cast<uint8_t>(mode_), static_cast<uint8_t>(num_), object_only_, failed_, key_,
                           array_open_, count_, lit_, utf8_left_, utf8_lo_, utf8_hi_, blank_run_, depth_};
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields, then the object bits
  for (uint8_t b : small) h = (h ^ b) * 1099511628211ull;
  return (h ^ objects_) * 0x9E3779B97F4A7C15ull;
}

bool JsonMatcher::blank(uint8_t) {
  if (mode_ == Mode::done) return true;  // trailing whitespace ends nothing: no cap
  return ++blank_run_ <= kMaxBlank;
}

bool JsonMatcher::end_value() {
  mode_ = depth_ == 0 ? Mode::done : Mode::after_value;
  return true;
}

bool JsonMatcher::close(uint8_t byte) {
  if (depth_ == 0) return false;
  const bool object = (objects_ >> (depth_ - 1)) & 1u;
  if (byte != (object ? '}' : ']')) return false;
  --depth_;
  return end_value();
}

bool JsonMatcher::start_value(uint8_t byte) {
  if (depth_ == 0 && object_only_ && byte != '{') return false;
  array_open_ = false;
  switch (byte) {
    case '{':
    case '[':
      if (depth_ >= kMaxDepth) return false;
      if (byte == '{') {
        objects_ |= uint64_t{1} << depth_;
      } else {
        objects_ &= ~(uint64_t{1} << depth_);
      }
      ++depth_;
      mode_ = byte == '{' ? Mode::key_or_close : Mode::value;
      array_open_ = byte == '[';
      return true;
    case '"':
      mode_ = Mode::string;
      key_ = false;
      return true;
    case '-':
      mode_ = Mode::number;
      num_ = Num::minus;
      return true;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::literal;
      lit_ = byte == 't' ? 0 : byte == 'f' ? 1 : 2;
      count_ = 1;
      return true;
    default:
      if (!is_digit(byte)) return false;
      mode_ = Mode::number;
      num_ = byte == '0' ? Num::zero : Num::int_digits;
      return true;
  }
}

bool JsonMatcher::string_byte(uint8_t byte) {
  if (utf8_left_ > 0) {
    if (byte < utf8_lo_ || byte > utf8_hi_) return false;
    --utf8_left_;
    utf8_lo_ = 0x80;
    utf8_hi_ = 0xBF;
    return true;
  }
  if (byte == '"') {
    if (key_) {
      mode_ = Mode::colon;
      return true;
    }
    return end_value();
  }
  if (byte == '\\') {
    mode_ = Mode::escape;
    return true;
  }
  if (byte < 0x20) return false;  // control characters must be escaped
  if (byte < 0x80) return true;
  // UTF-8 lead bytes (RFC 3629): no overlong forms (C0, C1, E0 80-9F, F0 80-8F), no surrogates
  // (ED A0-BF), nothing above U+10FFFF (F4 90-, F5-).
  if (byte >= 0xC2 && byte <= 0xDF) {
    utf8_left_ = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    utf8_left_ = 2;
    if (byte == 0xE0) utf8_lo_ = 0xA0;
    if (byte == 0xED) utf8_hi_ = 0x9F;
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    utf8_left_ = 3;
    if (byte == 0xF0) utf8_lo_ = 0x90;
    if (byte == 0xF4) utf8_hi_ = 0x8F;
  } else {
    return false;
  }
  return true;
}

bool JsonMatcher::step(uint8_t byte) {
  const bool in_text = mode_ == Mode::string || mode_ == Mode::escape || mode_ == Mode::unicode;
  if (!in_text && !is_blank(byte)) blank_run_ = 0;
  switch (mode_) {
    case Mode::done:
      return is_blank(byte);
    case Mode::value:
      if (is_blank(byte)) return blank(byte);
      if (array_open_ && byte == ']') {
        array_open_ = false;
        return close(byte);
      }
      return start_value(byte);
    case Mode::key_or_close:
    case Mode::key:
      if (is_blank(byte)) return blank(byte);
      if (byte == '"') {
        mode_ = Mode::string;
        key_ = true;
        return true;
      }
      return mode_ == Mode::key_or_close && byte == '}' && close(byte);
    case Mode::colon:
      if (is_blank(byte)) return blank(byte);
      if (byte != ':') return false;
      mode_ = Mode::value;
      array_open_ = false;
      return true;
    case Mode::after_value:
      if (is_blank(byte)) return blank(byte);
      if (byte == ',') {
        const bool object = (objects_ >> (depth_ - 1)) & 1u;
        mode_ = object ? Mode::key : Mode::value;
        array_open_ = false;
        return true;
      }
      return close(byte);
    case Mode::string:
      return string_byte(byte);
    case Mode::escape:
      if (byte == 'u') {
        mode_ = Mode::unicode;
        count_ = 0;
        return true;
      }
      mode_ = Mode::string;
      return byte == '"' || byte == '\\' || byte == '/' || byte == 'b' || byte == 'f' || byte == 'n' ||
             byte == 'r' || byte == 't';
    case Mode::unicode:
      if (!is_hex(byte)) return false;
      if (++count_ == 4) mode_ = Mode::string;
      return true;
    case Mode::literal: {
      const std::string_view word = kLiterals[lit_];
      if (byte != static_cast<uint8_t>(word[count_])) return false;
      if (++count_ == word.size()) return end_value();
      return true;
    }
    case Mode::number:
      switch (num_) {
        case Num::minus:
          if (!is_digit(byte)) return false;
          num_ = byte == '0' ? Num::zero : Num::int_digits;
          return true;
        case Num::dot:
          if (!is_digit(byte)) return false;
          num_ = Num::frac_digits;
          return true;
        case Num::exp:
          if (byte == '+' || byte == '-') {
            num_ = Num::exp_sign;
            return true;
          }
          [[fallthrough]];
        case Num::exp_sign:
          if (!is_digit(byte)) return false;
          num_ = Num::exp_digits;
          return true;
        case Num::zero:
        case Num::int_digits:
        case Num::frac_digits:
        case Num::exp_digits:
          if (is_digit(byte) && num_ != Num::zero) return true;
          if (byte == '.' && (num_ == Num::zero || num_ == Num::int_digits)) {
            num_ = Num::dot;
            return true;
          }
          if ((byte == 'e' || byte == 'E') && num_ != Num::exp_digits) {
            num_ = Num::exp;
            return true;
          }
          if (is_digit(byte)) return false;  // a leading zero
          end_value();  // the number ended before this byte, which the container reads
          return step(byte);
      }
  }
  return false;
}

}  // namespace brigade
