#include "core/grammar_syntax.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace brigade {

namespace {

constexpr uint64_t kMaxRepeat = 2000;      // llama.cpp's MAX_REPETITION_THRESHOLD
constexpr size_t kMaxTerms = 100000;       // after repetitions are expanded
constexpr size_t kMaxNesting = 200;        // parentheses inside one another

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Expected<GrammarSyntax> run() {
    skip_space(true);
    if (pos_ >= src_.size()) return invalid_argument("the grammar is empty (write at least `root ::= ...`)");
    while (pos_ < src_.size()) BRIGADE_RETURN_IF_ERROR(parse_rule());
    for (size_t r = 0; r < out_.rules.size(); ++r)
      if (!out_.rules[r].defined)
        return error(first_use_[r], "rule '" + out_.rules[r].name + "' is used but never defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) {
      std::string names;
      for (const auto& rule : out_.rules)
        if (rule.name.find(' ') == std::string::npos) names += (names.empty() ? "" : ", ") + rule.name;
      return invalid_argument("the grammar has no 'root' rule, where output starts (it defines: " + names + ")");
    }
    out_.root = root->second;
    out_.n_terms = n_terms_;
    return std::move(out_);
  }

 private:
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= src_.size(); }

  std::pair<int, int> line_col(size_t at) const {
    at = std::min(at, src_.size());
    const size_t line = static_cast<size_t>(std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - line_starts_.begin());
    int col = 1;
    for (size_t i = line_starts_[line - 1]; i < at; ++i) col += (static_cast<uint8_t>(src_[i]) & 0xC0) != 0x80;  // characters
    return {static_cast<int>(line), col};
  }
  Status error(size_t at, const std::string& what) const {
    auto [line, col] = line_col(at);
    return invalid_argument("grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  std::string where(size_t at) const {
    auto [line, col] = line_col(at);
    return std::to_string(line) + ":" + std::to_string(col);
  }
  // Counts terms made (an upper bound on the grammar's size) against kMaxTerms.
  Status count(size_t n, size_t at) {
    n_terms_ += n;
    if (n_terms_ > kMaxTerms)
      return error(at, "the grammar is too large (over " + std::to_string(kMaxTerms) + " terms once repetitions are expanded)");
    return Status::ok();
  }

  // Spaces, tabs and comments; newlines too when newline_ok.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  int32_t rule_id(const std::string& name, size_t at) {
    auto [it, fresh] = ids_.emplace(name, static_cast<int32_t>(out_.rules.size()));
    if (fresh) {
      out_.rules.push_back({.name = name});
      first_use_.push_back(at);
    }
    return it->second;
  }
  int32_t new_rule(const std::string& name, size_t at) {
    out_.rules.push_back({.name = name, .defined = true});
    first_use_.push_back(at);
    set_location(out_.rules.back(), at);
    return static_cast<int32_t>(out_.rules.size() - 1);
  }
  void set_location(GrammarRule& rule, size_t at) const { std::tie(rule.line, rule.column) = line_col(at); }

  Status parse_rule() {
    const size_t start = pos_;
    while (is_name_char(peek())) ++pos_;
    if (pos_ == start) return error(pos_, "expecting a rule name (letters, digits, '-', '_')");
    const std::string name(src_.substr(start, pos_ - start));
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") return error(pos_, "expecting '::=' after rule name '" + name + "'");
    pos_ += 3;
    const int32_t id = rule_id(name, start);
    if (out_.rules[static_cast<size_t>(id)].defined) return error(start, "rule '" + name + "' is defined twice");
    out_.rules[static_cast<size_t>(id)].defined = true;
    set_location(out_.rules[static_cast<size_t>(id)], start);
    skip_space(true);
    BRIGADE_RETURN_IF_ERROR(parse_alternates(id, name, false));
    if (peek() == '\r') ++pos_;
    if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      return error(pos_, std::string("unexpected '") + peek() + "' (expecting a newline or the end of rule '" + name + "')");
    }
    skip_space(true);
    return Status::ok();
  }

  Status parse_alternates(int32_t rule, const std::string& base, bool nested) {
    std::vector<std::vector<GrammarTerm>> alts(1);
    BRIGADE_RETURN_IF_ERROR(parse_sequence(alts.back(), base, nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.emplace_back();
      BRIGADE_RETURN_IF_ERROR(parse_sequence(alts.back(), base, nested));
    }
    out_.rules[static_cast<size_t>(rule)].alternatives = std::move(alts);
    return Status::ok();
  }

  Status parse_sequence(std::vector<GrammarTerm>& seq, const std::string& base, bool nested) {
    size_t item = seq.size();  // where the last item (what a repetition applies to) starts
    while (!at_end()) {
      const size_t at = pos_;
      const char c = peek();
      if (c == '"') {
        ++pos_;
        item = seq.size();
        while (peek() != '"') {
          if (at_end()) return error(at, "unterminated literal (a '\"' is missing)");
          uint32_t cp = 0;
          BRIGADE_RETURN_IF_ERROR(parse_char(cp));
          GrammarTerm t;
          t.set.add(cp, cp);
          seq.push_back(std::move(t));
          BRIGADE_RETURN_IF_ERROR(count(1, at));
        }
        ++pos_;
      } else if (c == '[') {
        item = seq.size();
        GrammarTerm t;
        BRIGADE_RETURN_IF_ERROR(parse_class(t));
        seq.push_back(std::move(t));
      } else if (c == '.') {
        ++pos_;
        item = seq.size();
        seq.push_back({.kind = GrammarTerm::Kind::any});
      } else if (is_name_char(c)) {
        while (is_name_char(peek())) ++pos_;
        item = seq.size();
        seq.push_back({.kind = GrammarTerm::Kind::rule, .rule = rule_id(std::string(src_.substr(at, pos_ - at)), at)});
      } else if (c == '(') {
        if (++depth_ > kMaxNesting) return error(at, "parentheses nested deeper than " + std::to_string(kMaxNesting));
        ++pos_;
        skip_space(true);
        const int32_t group = new_rule(base + " (group at " + where(at) + ")", at);
        BRIGADE_RETURN_IF_ERROR(parse_alternates(group, base, true));
        if (peek() != ')') return error(pos_, "expecting ')' to close the group opened at " + where(at));
        ++pos_;
        --depth_;
        item = seq.size();
        seq.push_back({.kind = GrammarTerm::Kind::rule, .rule = group});
      } else if (c == '<' || c == '!') {
        return error(at, "token terms (<[id]>, <text>, !<...>) are not supported: match the token's text instead");
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        uint64_t min = 0, max = UINT64_MAX;
        BRIGADE_RETURN_IF_ERROR(parse_bounds(min, max));
        if (item == seq.size()) return error(at, std::string("'") + c + "' has nothing before it to repeat");
        BRIGADE_RETURN_IF_ERROR(repeat(seq, item, min, max, base, at));
        item = seq.size();  // x** repeats nothing new: as in llama.cpp, a second operator needs an item
      } else {
        break;
      }
      BRIGADE_RETURN_IF_ERROR(count(1, at));
      skip_space(nested);
    }
    return Status::ok();
  }

  Status parse_bounds(uint64_t& min, uint64_t& max) {
    const size_t at = pos_;
    const char c = peek();
    ++pos_;
    if (c == '*') return Status::ok();
    if (c == '+') {
      min = 1;
      return Status::ok();
    }
    if (c == '?') {
      max = 1;
      return Status::ok();
    }
    auto number = [&](uint64_t& v) -> Status {
      skip_space(true);
      if (!is_digit(peek())) return error(pos_, "expecting a number in the repetition opened at " + where(at));
      v = 0;
      while (is_digit(peek())) {
        v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(peek() - '0'), UINT64_MAX / 20);
        ++pos_;
      }
      skip_space(true);
      return Status::ok();
    };
    BRIGADE_RETURN_IF_ERROR(number(min));
    if (peek() == '}') {
      max = min;
    } else if (peek() == ',') {
      ++pos_;
      skip_space(true);
      if (is_digit(peek())) BRIGADE_RETURN_IF_ERROR(number(max));
      if (peek() != '}') return error(pos_, "expecting '}' to close the repetition opened at " + where(at));
    } else {
      return error(pos_, "expecting ',' or '}' in the repetition opened at " + where(at));
    }
    ++pos_;
    if (min > kMaxRepeat) return error(at, "a repetition count above " + std::to_string(kMaxRepeat) + " (as llama.cpp refuses)");
    if (max != UINT64_MAX && max > kMaxRepeat) max = UINT64_MAX;  // llama.cpp: no upper bound then
    if (max < min) return error(at, "the repetition's maximum is below its minimum");
    return Status::ok();
  }

  // seq[item..] → that item min times, then max - min nested optional copies (or one starred
  // rule when max is unbounded): the same language llama.cpp's rewrite gives.
  Status repeat(std::vector<GrammarTerm>& seq, size_t item, uint64_t min, uint64_t max, const std::string& base, size_t at) {
    const std::vector<GrammarTerm> x(seq.begin() + static_cast<std::ptrdiff_t>(item), seq.end());
    seq.resize(item);
    for (uint64_t i = 0; i < min; ++i) {
      seq.insert(seq.end(), x.begin(), x.end());
      BRIGADE_RETURN_IF_ERROR(count(x.size(), at));
    }
    const std::string name = base + " (repetition at " + where(at) + ")";
    if (max == UINT64_MAX) {  // star ::= x star |
      const int32_t star = new_rule(name, at);
      std::vector<GrammarTerm> again = x;
      again.push_back({.kind = GrammarTerm::Kind::rule, .rule = star});
      out_.rules[static_cast<size_t>(star)].alternatives = {std::move(again), {}};
      seq.push_back({.kind = GrammarTerm::Kind::rule, .rule = star});
      return Status::ok();
    }
    int32_t inner = -1;  // opt_k ::= x opt_{k-1} | ; opt_1 ::= x |
    for (uint64_t k = 0; k < max - min; ++k) {
      const int32_t opt = new_rule(name, at);
      std::vector<GrammarTerm> body = x;
      if (inner >= 0) body.push_back({.kind = GrammarTerm::Kind::rule, .rule = inner});
      out_.rules[static_cast<size_t>(opt)].alternatives = {std::move(body), {}};
      inner = opt;
      BRIGADE_RETURN_IF_ERROR(count(x.size() + 1, at));
    }
    if (inner >= 0) seq.push_back({.kind = GrammarTerm::Kind::rule, .rule = inner});
    return Status::ok();
  }

  Status parse_class(GrammarTerm& t) {
    const size_t at = pos_;
    ++pos_;
    if (peek() == '^') {
      t.negated = true;
      ++pos_;
    }
    bool any = false;
    while (peek() != ']') {
      if (at_end()) return error(at, "unterminated character class (a ']' is missing)");
      uint32_t lo = 0, hi = 0;
      BRIGADE_RETURN_IF_ERROR(parse_char(lo));
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        const size_t range_at = pos_;
        ++pos_;
        BRIGADE_RETURN_IF_ERROR(parse_char(hi));
        if (hi < lo) return error(range_at, "the range's end is below its start (a reversed range matches nothing)");
      }
      t.set.add(lo, hi);
      any = true;
    }
    ++pos_;
    if (!any) return error(at, "an empty character class (llama.cpp reads [] as matching the empty string; write \"\" or drop it)");
    return Status::ok();
  }

  // One character of a literal or class at pos_: an escape or a UTF-8 sequence.
  Status parse_char(uint32_t& cp) {
    const size_t at = pos_;
    const uint8_t b = static_cast<uint8_t>(peek());
    if (b == '\\') {
      const char e = peek(1);
      pos_ += 2;
      int hex = 0;
      switch (e) {
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        case 't': cp = '\t'; return Status::ok();
        case 'r': cp = '\r'; return Status::ok();
        case 'n': cp = '\n'; return Status::ok();
        case '\\': case '"': case '[': case ']': case '-':
          cp = static_cast<uint8_t>(e);
          return Status::ok();
        default:
          return error(at, std::string("unknown escape '\\") + (e ? std::string(1, e) : "") +
                               "' (valid: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)");
      }
      cp = 0;
      for (int i = 0; i < hex; ++i) {
        const char h = peek();
        int v = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (v < 0) return error(at, "expecting " + std::to_string(hex) + " hex digits after \\" + std::string(1, e));
        cp = cp * 16 + static_cast<uint32_t>(v);
        ++pos_;
      }
    } else {
      const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
      if (n == 0 || pos_ + static_cast<size_t>(n) > src_.size()) return error(at, "invalid UTF-8 in the grammar");
      cp = n == 1 ? b : b & (0x7Fu >> n);
      for (int i = 1; i < n; ++i) {
        const uint8_t c = static_cast<uint8_t>(src_[pos_ + static_cast<size_t>(i)]);
        if ((c & 0xC0) != 0x80) return error(at, "invalid UTF-8 in the grammar");
        cp = (cp << 6) | (c & 0x3F);
      }
      pos_ += static_cast<size_t>(n);
    }
    if (cp > CodepointSet::kMax) return error(at, "a code point past U+10FFFF");
    return Status::ok();
  }

  std::string_view src_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  size_t n_terms_ = 0;
  std::vector<size_t> line_starts_;
  GrammarSyntax out_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<size_t> first_use_;
};

}  // namespace

Expected<GrammarSyntax> parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace brigade
