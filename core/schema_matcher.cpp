#include "core/schema_matcher.h"

#include <algorithm>
#include <cstring>

namespace brigade {

namespace {

using Frame = SchemaMatcher::Frame;
using Thread = SchemaMatcher::Thread;
using Kind = SchemaNode::Kind;

enum FrameKind : uint8_t { kValue, kObject, kKey, kArray, kString, kNumber, kLiteral };
enum ObjectMode : uint8_t { kObjOpen, kObjKey, kObjColon, kObjAfter };   // a: next position, b: property
enum ArrayMode : uint8_t { kArrOpen, kArrValue, kArrAfter };             // n: items started
enum StringMode : uint8_t { kStrChars, kStrEscape, kStrHex1, kStrHex2, kStrHex3, kStrHex4 };
enum Num : uint8_t { kMinus, kZero, kIntDigits, kDot, kFracDigits, kExp, kExpSign, kExpDigits };
constexpr uint16_t kAdditional = 0xFFFF;  // Object frame b: the key was not a declared property
constexpr uint8_t kKeyGeneric = 1;        // Key frame mode bit: the key may still be an additional one

bool is_blank(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// UTF-8 inside strings (RFC 3629, as JsonMatcher): state = continuation bytes left (bits 0-1) and
// the next byte's range (bits 2-4: 80-BF, A0-BF after E0, 80-9F after ED, 90-BF after F0, 80-8F
// after F4). Content bytes other than '"' and '\\'.
enum class Content { bad, starts_char, continues_char };
Content utf8_content(uint16_t& state, uint8_t byte) {
  static constexpr uint8_t kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80}, kHi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
  const unsigned left = state & 3u, range = (state >> 2) & 7u;
  if (left > 0) {
    if (byte < kLo[range] || byte > kHi[range]) return Content::bad;
    state = static_cast<uint16_t>(left - 1);
    return Content::continues_char;
  }
  if (byte < 0x20) return Content::bad;  // control characters must be escaped
  if (byte < 0x80) return Content::starts_char;
  if (byte >= 0xC2 && byte <= 0xDF) {
    state = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    state = static_cast<uint16_t>(2 | (byte == 0xE0 ? 1 << 2 : byte == 0xED ? 2 << 2 : 0));
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    state = static_cast<uint16_t>(3 | (byte == 0xF0 ? 3 << 2 : byte == 0xF4 ? 4 << 2 : 0));
  } else {
    return Content::bad;
  }
  return Content::starts_char;
}

__extension__ typedef __int128 i128;

// Whether an integer that starts with the digits read so far (magnitude v, k digits, after a '-'
// when negative) can still land in [lo, hi]: v itself, or v followed by j more digits.
bool integer_feasible(const SchemaNode& n, bool negative, int64_t v, uint32_t k) {
  const i128 lo = n.has_min ? n.min : INT64_MIN, hi = n.has_max ? n.max : INT64_MAX;
  auto meets = [&](i128 a, i128 b) {  // magnitudes [a, b] → signed values, against [lo, hi]
    const i128 s_lo = negative ? -b : a, s_hi = negative ? -a : b;
    return s_lo <= hi && s_hi >= lo;
  };
  if (k == 0) return meets(1, i128{1} << 64);  // only '-': any negative integer
  if (meets(v, v)) return true;
  if (v == 0) return false;  // no digit follows a leading zero
  i128 scale = 1;
  for (uint32_t j = k; j < 19; ++j) {
    scale *= 10;
    if (meets(i128{v} * scale, i128{v} * scale + scale - 1)) return true;
  }
  return false;
}

bool same_thread(const Thread& x, const Thread& y) {
  return x.depth == y.depth && x.blank == y.blank && x.negative == y.negative && x.value == y.value &&
         std::memcmp(x.frames.data(), y.frames.data(), sizeof(Frame) * x.depth) == 0;
}

void copy_thread(Thread& dst, const Thread& src) {
  dst.depth = src.depth;
  dst.blank = src.blank;
  dst.negative = src.negative;
  dst.value = src.value;
  std::copy_n(src.frames.begin(), src.depth, dst.frames.begin());
}

Frame value_frame(int32_t node) { return Frame{static_cast<uint16_t>(node), kValue, 0, 0, 0, 0}; }

}  // namespace

// One byte over one thread: the threads it becomes (none, one, or one per anyOf alternative
// alive) go to out. A frame that ends a value pops itself; the parent set its own next mode when
// it pushed the child.
class SchemaStepper {
 public:
  SchemaStepper(const CompiledSchema& s, std::array<Thread, SchemaMatcher::kMaxThreads>& out)
      : s_(s), out_(out) {}
  int n_out() const { return n_out_; }

  void step(Thread& t, uint8_t b) {
    if (t.depth == 0) return;  // complete: nothing follows
    Frame& f = top(t);
    // JSON's blanks may come before a value or between members; a raw value (guided_choice text)
    // has none, so its blanks are the literal's own bytes (a choice may begin with " " or "\n").
    const bool json_blank = f.kind == kObject || f.kind == kArray || (f.kind == kValue && !s_.node(f.node).raw);
    if (json_blank) {
      if (is_blank(b)) {
        if (++t.blank <= SchemaMatcher::kMaxBlank) emit(t);
        return;
      }
      t.blank = 0;
    }
    switch (f.kind) {
      case kValue: return value(t, b);
      case kObject: return object(t, b);
      case kKey: return key(t, b);
      case kArray: return array(t, b);
      case kString: return string(t, b);
      case kNumber: return number(t, b);
      case kLiteral: return literal(t, b);
      default: return;
    }
  }

 private:
  static Frame& top(Thread& t) { return t.frames[t.depth - 1u]; }
  const SchemaNode& node_of(const Frame& f) const { return s_.node(f.node); }

  void emit(const Thread& t) {
    for (int i = 0; i < n_out_; ++i)
      if (same_thread(out_[static_cast<size_t>(i)], t)) return;
    if (n_out_ < SchemaMatcher::kMaxThreads) copy_thread(out_[static_cast<size_t>(n_out_++)], t);
  }
  void push(Thread& t, int32_t node) { t.frames[t.depth++] = value_frame(node); }
  // The value on top ended: pop it (the parent already expects what follows).
  void end(Thread& t) {
    --t.depth;
    emit(t);
  }

  void value(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const SchemaNode& n = node_of(f);
    switch (n.kind) {
      case Kind::any_of:
        for (size_t i = 0; i < n.alts.size(); ++i) {
          if (!s_.fits(n.alts[i], t.depth - 1)) continue;
          if (n.alts.size() == 1) {  // a $ref: no fork
            f = value_frame(n.alts[i]);
            return step(t, b);
          }
          Thread c;
          copy_thread(c, t);
          top(c) = value_frame(n.alts[i]);
          step(c, b);
        }
        return;
      case Kind::object:
        return open(t, b == '{', kObject);
      case Kind::array:
        return open(t, b == '[', kArray);
      case Kind::string:
        return open(t, b == '"', kString);
      case Kind::number:
      case Kind::integer:
        return number_start(t, b);
      case Kind::literals:
        f = Frame{f.node, kLiteral, 0, 0, 0, static_cast<uint16_t>(n.literals.size())};
        return literal(t, b);
    }
  }

  // The value on top starts a container or string (its first mode is 0) when `starts`.
  void open(Thread& t, bool starts, FrameKind kind) {
    if (!starts) return;
    Frame& f = top(t);
    f = Frame{f.node, kind, 0, 0, 0, 0};
    emit(t);
  }

  // Declared property p may come next in an object whose next position is pos (its value in a
  // frame at value_depth): in schema order, not past the next required one, and it fits.
  bool declared_ok(const SchemaNode& n, uint16_t pos, size_t p, int value_depth) const {
    const size_t limit = n.next_required[pos];
    return p >= pos && (p <= limit || limit == n.props.size()) && p < n.props.size() && s_.fits(n.props[p].node, value_depth);
  }
  bool additional_ok(const SchemaNode& n, uint16_t pos, int value_depth) const {
    return n.additional != SchemaNode::kNone && n.next_required[pos] == n.props.size() && s_.fits(n.additional, value_depth);
  }
  bool key_possible(const SchemaNode& n, uint16_t pos, int value_depth) const {
    if (additional_ok(n, pos, value_depth)) return true;
    for (size_t p = pos; p < n.props.size(); ++p)
      if (declared_ok(n, pos, p, value_depth)) return true;
    return false;
  }

  void object(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const SchemaNode& n = node_of(f);
    const bool closable = n.next_required[f.a] == n.props.size();
    switch (f.mode) {
      case kObjOpen:
      case kObjKey:
        if (b == '"' && n.props.empty() && additional_ok(n, f.a, t.depth)) {
          // Any key: a plain string (escapes too); the object's node has no length bounds.
          f.mode = kObjColon;
          f.b = kAdditional;
          t.frames[t.depth++] = Frame{f.node, kString, kStrChars, 0, 0, 0};
          return emit(t);
        }
        if (b == '"' && key_possible(n, f.a, t.depth)) {
          t.frames[t.depth++] = Frame{f.node, kKey, 0, 0, 0, static_cast<uint16_t>(n.props.size())};
          return key(t, b);
        }
        if (b == '}' && f.mode == kObjOpen && closable) end(t);
        return;
      case kObjColon: {
        if (b != ':') return;
        const bool extra = f.b == kAdditional;
        f.mode = kObjAfter;
        f.a = static_cast<uint16_t>(extra ? n.props.size() : f.b + 1u);
        push(t, extra ? n.additional : n.props[f.b].node);
        return emit(t);
      }
      case kObjAfter:
        if (b == ',' && key_possible(n, f.a, t.depth)) {
          f.mode = kObjKey;
          emit(t);
        } else if (b == '}' && closable) {
          end(t);
        }
        return;
      default:
        return;
    }
  }

  // A key beside declared properties: a declared name matched byte by byte against the sorted
  // names (a = lo, b = hi of the run sharing the n bytes read), and, while kKeyGeneric is set, an
  // additional key (a string without escapes, so it equals a declared name only when its bytes
  // do; additionalProperties applies to the other names only).
  void key(Thread& t, uint8_t b) {
    Frame& f = top(t);
    Frame& obj = t.frames[t.depth - 2u];
    const SchemaNode& n = node_of(obj);
    const int value_depth = t.depth - 1;
    const uint16_t pos = obj.a;
    uint16_t lo = f.a, hi = f.a;
    for (uint16_t k = f.a; k < f.b; ++k) {
      const std::string& name = n.props[n.key_order[k]].key;
      if (name.size() > f.n && static_cast<uint8_t>(name[f.n]) == b) {
        if (lo == hi) lo = k;
        hi = static_cast<uint16_t>(k + 1);
      }
    }
    if (lo < hi && n.props[n.key_order[lo]].key.size() == f.n + 1u) {  // a declared name ends here
      const uint16_t p = n.key_order[lo];
      if (!declared_ok(n, pos, p, value_depth)) return;  // out of order, or named but not next
      return key_done(t, p);
    }
    bool generic = (f.mode & kKeyGeneric) != 0;
    uint16_t utf8 = static_cast<uint16_t>(f.mode >> 1);
    if (f.n == 0) {
      generic = additional_ok(n, pos, value_depth);
    } else if (generic) {
      if (b == '"' && utf8 == 0) return key_done(t, kAdditional);
      generic = b != '"' && b != '\\' && utf8_content(utf8, b) != Content::bad;
    }
    bool declared = false;
    for (uint16_t k = lo; k < hi && !declared; ++k) declared = declared_ok(n, pos, n.key_order[k], value_depth);
    if (!declared && !generic) return;
    f.a = lo;
    f.b = hi;
    ++f.n;
    f.mode = static_cast<uint8_t>((generic ? kKeyGeneric : 0) | (generic ? utf8 << 1 : 0));
    emit(t);
  }
  void key_done(Thread& t, uint16_t property) {
    --t.depth;
    Frame& obj = top(t);
    obj.mode = kObjColon;
    obj.b = property;
    emit(t);
  }

  void array(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const SchemaNode& n = node_of(f);
    const int32_t item = n.item_at(f.n);
    const bool can_add = f.n < n.max_items && item != SchemaNode::kNone && s_.fits(item, t.depth);
    if (b == ']' && f.mode != kArrValue) {
      if (f.n >= n.min_items) end(t);
      return;
    }
    if (f.mode == kArrAfter) {
      if (b == ',' && can_add) {
        f.mode = kArrValue;
        emit(t);
      }
      return;
    }
    if (!can_add) return;
    ++f.n;
    f.mode = kArrAfter;
    push(t, item);
    step(t, b);
  }

  void string(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const SchemaNode& n = node_of(f);
    if (n.regex) return pattern_string(t, b, *n.regex);
    auto take_char = [&] {
      if (!n.counted()) return true;  // uncounted: the state repeats inside the string
      if (f.n >= n.max_length) return false;
      ++f.n;
      return true;
    };
    switch (f.mode) {
      case kStrChars:
        if ((f.a & 3u) == 0 && b == '"') {
          if (f.n >= n.min_length) end(t);
          return;
        }
        if ((f.a & 3u) == 0 && b == '\\') {
          if (!take_char()) return;
          f.mode = kStrEscape;
          return emit(t);
        }
        switch (utf8_content(f.a, b)) {
          case Content::bad: return;
          case Content::starts_char:
            if (take_char()) emit(t);
            return;
          case Content::continues_char: return emit(t);
        }
        return;
      case kStrEscape:
        if (b == 'u') {
          f.mode = kStrHex1;
          return emit(t);
        }
        if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') {
          f.mode = kStrChars;
          emit(t);
        }
        return;
      default:  // \uXXXX; surrogates (D800-DFFF) are refused: emit them as UTF-8
        if (!is_hex(b)) return;
        if (f.mode == kStrHex1) f.b = (b == 'd' || b == 'D');
        if (f.mode == kStrHex2 && f.b && (!is_digit(b) || b >= '8')) return;
        f.mode = f.mode == kStrHex4 ? static_cast<uint8_t>(kStrChars) : static_cast<uint8_t>(f.mode + 1);
        if (f.mode == kStrChars) f.b = 0;
        emit(t);
        return;
    }
  }

  // A string with a pattern/format: n is the automaton's state over the decoded content. Raw
  // bytes and the one-letter escapes feed it their byte; \u escapes are refused (the characters
  // are written as UTF-8), so every live state can still finish (CompiledRegex's json_string
  // alphabet holds exactly the bytes these two ways can produce).
  void pattern_string(Thread& t, uint8_t b, const CompiledRegex& re) {
    Frame& f = top(t);
    const auto state = static_cast<int32_t>(f.n);
    auto take = [&](uint8_t content) {
      const int32_t next = re.next(state, content);
      if (next == CompiledRegex::kDead) return;
      f.n = static_cast<uint32_t>(next);
      f.mode = kStrChars;
      emit(t);
    };
    if (f.mode == kStrEscape) {
      const uint8_t decoded = json_unescape(b);
      if (decoded != 0) take(decoded);
      return;
    }
    if (b == '"') {
      if (re.accepting(state)) end(t);
      return;
    }
    if (b == '\\') {
      for (char e : std::string_view("\"\\/bfnrt")) {
        if (re.next(state, json_unescape(static_cast<uint8_t>(e))) != CompiledRegex::kDead) {
          f.mode = kStrEscape;
          return emit(t);
        }
      }
      return;
    }
    if (b >= 0x20) take(b);
  }

  // The byte a one-letter JSON escape (\" \\ \/ \b \f \n \r \t) stands for; 0 for any other.
  static uint8_t json_unescape(uint8_t letter) {
    switch (letter) {
      case '"': case '\\': case '/': return letter;
      case 'b': return '\b';
      case 'f': return '\f';
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      default: return 0;
    }
  }

  void number_start(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const SchemaNode& n = node_of(f);
    if (b != '-' && !is_digit(b)) return;
    f = Frame{f.node, kNumber, b == '-' ? kMinus : b == '0' ? kZero : kIntDigits, 0, 0, 0};
    if (n.kind == Kind::integer && n.bounded()) {
      t.negative = b == '-';
      t.value = b == '-' ? 0 : b - '0';
      f.n = b == '-' ? 0 : 1;
      if (!integer_feasible(n, t.negative, t.value, f.n)) return;
    }
    emit(t);
  }

  // Whether the number on top may end before the next byte.
  bool number_ends(const Thread& t, const Frame& f) const {
    const SchemaNode& n = node_of(f);
    const bool whole = f.mode == kZero || f.mode == kIntDigits || f.mode == kFracDigits || f.mode == kExpDigits;
    if (!whole || n.kind == Kind::number || !n.bounded()) return whole;
    const i128 v = t.negative ? -i128{t.value} : i128{t.value};
    return (!n.has_min || v >= n.min) && (!n.has_max || v <= n.max);
  }

  void number(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const SchemaNode& n = node_of(f);
    const bool integer = n.kind == Kind::integer;
    const uint8_t mode = f.mode;
    auto next = [&](uint8_t m) {
      f.mode = m;
      emit(t);
    };
    if (is_digit(b) && mode != kZero) {
      if (integer && mode == kMinus && b == '0') return;  // no "-0" for an integer
      if (integer && n.bounded()) {
        if (f.n >= 19) return;
        t.value = t.value * 10 + (b - '0');
        ++f.n;
        if (!integer_feasible(n, t.negative, t.value, f.n)) return;
      }
      static constexpr uint8_t kAfterDigit[] = {kIntDigits, kZero, kIntDigits, kFracDigits, kFracDigits,
                                                kExpDigits, kExpDigits, kExpDigits};
      return next(mode == kMinus && b == '0' ? static_cast<uint8_t>(kZero) : kAfterDigit[mode]);
    }
    if (is_digit(b)) return;  // after a leading zero
    if (!integer && b == '.' && (mode == kZero || mode == kIntDigits)) return next(kDot);
    if (!integer && (b == 'e' || b == 'E') && (mode == kZero || mode == kIntDigits || mode == kFracDigits))
      return next(kExp);
    if (!integer && (b == '+' || b == '-') && mode == kExp) return next(kExpSign);
    if (!number_ends(t, f)) return;
    t.negative = false;
    t.value = 0;
    --t.depth;  // the number ended before this byte, which the parent reads
    step(t, b);
  }

  // enum/const/boolean/null and guided_choice: the literals sharing the n bytes read are the
  // sorted run [a, b).
  void literal(Thread& t, uint8_t b) {
    Frame& f = top(t);
    const std::vector<std::string>& lits = node_of(f).literals;
    uint16_t lo = f.a, hi = f.a;
    for (uint16_t k = f.a; k < f.b; ++k) {
      if (lits[k].size() > f.n && static_cast<uint8_t>(lits[k][f.n]) == b) {
        if (lo == hi) lo = k;
        hi = static_cast<uint16_t>(k + 1);
      }
    }
    if (lo < hi) {
      f.a = lo;
      f.b = hi;
      ++f.n;
      if (hi - lo == 1 && lits[lo].size() == f.n) return end(t);  // nothing longer shares it
      return emit(t);
    }
    if (lits[f.a].size() != f.n) return;
    --t.depth;  // a whole literal (a number) ended before this byte
    step(t, b);
  }

  friend class SchemaMatcher;
  const CompiledSchema& s_;
  std::array<Thread, SchemaMatcher::kMaxThreads>& out_;
  int n_out_ = 0;
};

SchemaMatcher::SchemaMatcher(const CompiledSchema& schema) : schema_(&schema), n_threads_(1), threads_() {
  threads_[0].depth = 1;
  threads_[0].frames[0] = value_frame(schema.root());
}

SchemaMatcher& SchemaMatcher::operator=(const SchemaMatcher& o) {
  if (this == &o) return *this;
  schema_ = o.schema_;
  n_threads_ = o.n_threads_;
  failed_ = o.failed_;
  for (int i = 0; i < n_threads_; ++i) copy_thread(threads_[static_cast<size_t>(i)], o.threads_[static_cast<size_t>(i)]);
  return *this;
}

bool SchemaMatcher::feed(uint8_t byte) {
  if (failed_) return false;
  // The hot case (a mask walk inside a string visits nearly every trie node): one thread reading
  // a plain character of a string, in place (for a pattern string, one automaton step).
  if (n_threads_ == 1 && threads_[0].depth > 0 && byte >= 0x20 && byte != '"' && byte != '\\') {
    Frame& f = threads_[0].frames[threads_[0].depth - 1u];
    const SchemaNode& n = schema_->node(f.node);
    if (f.kind == kString && f.mode == kStrChars && n.regex) {
      const int32_t next = n.regex->next(static_cast<int32_t>(f.n), byte);
      if (next != CompiledRegex::kDead) {
        f.n = static_cast<uint32_t>(next);
        return true;
      }
      n_threads_ = 0;
      failed_ = true;
      return false;
    }
    if (f.kind == kString && f.mode == kStrChars && f.a == 0 && byte < 0x80) {
      if (!n.counted()) return true;
      if (f.n < n.max_length) {
        ++f.n;
        return true;
      }
      n_threads_ = 0;
      failed_ = true;
      return false;
    }
  }
  std::array<Thread, kMaxThreads> out;
  SchemaStepper stepper(*schema_, out);
  for (int i = 0; i < n_threads_; ++i) stepper.step(threads_[static_cast<size_t>(i)], byte);
  n_threads_ = static_cast<uint8_t>(stepper.n_out());
  for (int i = 0; i < n_threads_; ++i) copy_thread(threads_[static_cast<size_t>(i)], out[static_cast<size_t>(i)]);
  failed_ = n_threads_ == 0;
  return !failed_;
}

bool SchemaMatcher::complete() const {
  if (failed_) return false;
  for (int i = 0; i < n_threads_; ++i) {
    const Thread& t = threads_[static_cast<size_t>(i)];
    if (t.depth == 0) return true;
    if (t.depth != 1) continue;
    const Frame& f = t.frames[0];
    const SchemaNode& n = schema_->node(f.node);
    if (f.kind == kLiteral && n.literals[f.a].size() == f.n) return true;
    if (f.kind == kNumber) {
      std::array<Thread, kMaxThreads> unused;
      if (SchemaStepper(*schema_, unused).number_ends(t, f)) return true;
    }
  }
  return false;
}

bool SchemaMatcher::operator==(const SchemaMatcher& o) const {
  if (schema_ != o.schema_ || n_threads_ != o.n_threads_ || failed_ != o.failed_) return false;
  for (int i = 0; i < n_threads_; ++i)
    if (!same_thread(threads_[static_cast<size_t>(i)], o.threads_[static_cast<size_t>(i)])) return false;
  return true;
}

uint64_t SchemaMatcher::hash() const {
  uint64_t h = 1469598103934665603ull ^ n_threads_ ^ (uint64_t{failed_} << 8);
  auto mix = [&h](const void* p, size_t n) {  // FNV-1a
    const auto* c = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  for (int i = 0; i < n_threads_; ++i) {
    const Thread& t = threads_[static_cast<size_t>(i)];
    const uint8_t head[] = {t.depth, t.blank, t.negative};
    mix(head, sizeof head);
    mix(&t.value, sizeof t.value);
    mix(t.frames.data(), sizeof(Frame) * t.depth);
  }
  return h;
}

}  // namespace brigade
