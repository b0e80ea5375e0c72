#include "core/regex_syntax.h"

#include <algorithm>
#include <string>

namespace brigade {

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  ranges_.emplace_back(lo, hi);
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<Range> merged;
  for (const Range& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

void CodepointSet::add(const CodepointSet& o) {
  for (const Range& r : o.ranges_) add(r.first, r.second);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const Range& r : ranges_) {
    if (r.first > next) out.ranges_.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMax) out.ranges_.emplace_back(next, kMax);
  return out;
}

namespace {

using Node = RegexNode;
using NodePtr = std::unique_ptr<RegexNode>;
constexpr uint32_t kMaxCount = 100000;  // a repeat bound above this is refused outright

NodePtr make(Node::Kind kind) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  return n;
}

NodePtr make_set(CodepointSet set) {
  NodePtr n = make(Node::Kind::set);
  n->set = std::move(set);
  return n;
}

CodepointSet single(uint32_t cp) {
  CodepointSet s;
  s.add(cp, cp);
  return s;
}

// \d \w \s and their negations (ASCII meaning, as Python's re.ASCII and outlines).
bool class_escape(char c, CodepointSet& out) {
  CodepointSet s;
  switch (c) {
    case 'd': case 'D': s.add('0', '9'); break;
    case 'w': case 'W': s.add('0', '9'); s.add('A', 'Z'); s.add('a', 'z'); s.add('_', '_'); break;
    case 's': case 'S': s.add('\t', '\r'); s.add(' ', ' '); break;  // \t \n \v \f \r and space
    default: return false;
  }
  out = (c >= 'A' && c <= 'Z') ? s.complement() : s;
  return true;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_octal(char c) { return c >= '0' && c <= '7'; }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Expected<NodePtr> run() {
    BRIGADE_ASSIGN_OR_RETURN(NodePtr root, alternation());
    if (pos_ < p_.size()) return error("unbalanced ')'");  // alternation stops only at ')' or the end
    BRIGADE_RETURN_IF_ERROR(check_anchors(*root, true, true));
    return root;
  }

 private:
  Status error(const std::string& what) const { return error_at(pos_, what); }
  Status error_at(size_t at, const std::string& what) const {
    return invalid_argument("regex: " + what + " at offset " + std::to_string(at) + " (" + quoted() + ")");
  }
  std::string quoted() const {
    return "pattern '" + std::string(p_.substr(0, 80)) + (p_.size() > 80 ? "...'" : "'");
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  bool match(std::string_view s) {
    if (p_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  // One UTF-8 encoded code point of the pattern.
  Expected<uint32_t> code_point() {
    const auto b0 = static_cast<uint8_t>(p_[pos_]);
    int n = b0 < 0x80 ? 0 : (b0 & 0xE0) == 0xC0 ? 1 : (b0 & 0xF0) == 0xE0 ? 2 : (b0 & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || pos_ + static_cast<size_t>(n) >= p_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 0 ? b0 : b0 & (0x3Fu >> n);
    for (int i = 1; i <= n; ++i) {
      const auto b = static_cast<uint8_t>(p_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) return error("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3Fu);
    }
    pos_ += static_cast<size_t>(n) + 1;
    if (cp > CodepointSet::kMax) return error("invalid UTF-8");
    return cp;
  }

  Expected<NodePtr> alternation() {
    NodePtr alt = make(Node::Kind::alt);
    while (true) {
      BRIGADE_ASSIGN_OR_RETURN(NodePtr branch, concatenation());
      alt->children.push_back(std::move(branch));
      if (!match("|")) break;
    }
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  Expected<NodePtr> concatenation() {
    NodePtr cat = make(Node::Kind::concat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      BRIGADE_ASSIGN_OR_RETURN(NodePtr atom_node, atom());
      if (!atom_node) continue;  // a comment
      BRIGADE_ASSIGN_OR_RETURN(NodePtr item, quantified(std::move(atom_node)));
      cat->children.push_back(std::move(item));
    }
    if (cat->children.size() == 1) return std::move(cat->children[0]);
    return cat;
  }

  // {n}, {n,}, {,m}, {n,m} at pos_ (on '{'): true with the bounds, or false (pos_ unchanged)
  // when it is no quantifier and the '{' is a literal, as Python reads it.
  Expected<bool> braces(uint32_t& lo, uint32_t& hi) {
    const size_t start = pos_;
    ++pos_;
    std::string a, b;
    while (is_digit(peek())) a += p_[pos_++];
    const bool comma = match(",");
    if (comma) {
      while (is_digit(peek())) b += p_[pos_++];
    } else {
      b = a;
    }
    if ((a.empty() && !comma) || !match("}")) {
      pos_ = start;
      return false;
    }
    for (const std::string* s : {&a, &b})
      if (s->size() > 6 || (!s->empty() && std::stoul(*s) > kMaxCount))
        return error("a repeat count above " + std::to_string(kMaxCount));
    lo = a.empty() ? 0 : static_cast<uint32_t>(std::stoul(a));
    hi = b.empty() ? Node::kInfinite : static_cast<uint32_t>(std::stoul(b));
    if (lo > hi) return error("min repeat greater than max repeat");
    return true;
  }

  Expected<NodePtr> quantified(NodePtr atom_node) {
    uint32_t lo = 0, hi = 0;
    const char c = peek();
    if (c == '*') {
      hi = Node::kInfinite;
    } else if (c == '+') {
      lo = 1, hi = Node::kInfinite;
    } else if (c == '?') {
      hi = 1;
    } else if (c == '{') {
      BRIGADE_ASSIGN_OR_RETURN(bool is_repeat, braces(lo, hi));
      if (!is_repeat) return atom_node;
      --pos_;  // braces() consumed through '}'; the common step below moves past it
    } else {
      return atom_node;
    }
    ++pos_;
    if (atom_node->kind == Node::Kind::anchor_begin || atom_node->kind == Node::Kind::anchor_end)
      return error("nothing to repeat (an anchor)");
    if (peek() == '+') return error("possessive quantifiers are not supported");
    match("?");  // lazy: the model chooses the match, so it reads as greedy
    if (peek() == '*' || peek() == '+' || peek() == '?') return error("multiple repeat");
    if (peek() == '{') {
      uint32_t l2 = 0, h2 = 0;
      BRIGADE_ASSIGN_OR_RETURN(bool again, braces(l2, h2));
      if (again) return error("multiple repeat");
    }
    NodePtr r = make(Node::Kind::repeat);
    r->min = lo;
    r->max = hi;
    r->children.push_back(std::move(atom_node));
    return r;
  }

  // One atom; null for a comment (?#...).
  Expected<NodePtr> atom() {
    const char c = peek();
    switch (c) {
      case '(': return group();
      case '[': return char_class();
      case '*': case '+': case '?': return error("nothing to repeat");
      case '.': {
        ++pos_;
        return make_set(single('\n').complement());
      }
      case '^': ++pos_; return make(Node::Kind::anchor_begin);
      case '$': ++pos_; return make(Node::Kind::anchor_end);
      case '\\': return escape_atom();
      default: {
        if (c == '{') {  // a '{' that is no quantifier here is literal; one that is has nothing to repeat
          uint32_t lo = 0, hi = 0;
          BRIGADE_ASSIGN_OR_RETURN(bool is_repeat, braces(lo, hi));
          if (is_repeat) return error("nothing to repeat");
        }
        BRIGADE_ASSIGN_OR_RETURN(uint32_t cp, code_point());
        return make_set(single(cp));
      }
    }
  }

  Expected<NodePtr> group() {
    if (++depth_ > kMaxNesting) return error("groups nest more than " + std::to_string(kMaxNesting) + " deep");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    const size_t start = pos_;  // refusals point at the group's '('
    ++pos_;
    if (match("?")) {
      if (match("#")) {
        while (!at_end() && peek() != ')') ++pos_;
        if (!match(")")) return error("missing ')' after comment");
        return NodePtr();
      }
      if (match("=") || match("!") || match("<=") || match("<!"))
        return error_at(start, "lookaround ((?=, (?!, (?<=, (?<!) is not supported: it cannot be a finite automaton here");
      if (match("P=")) return error_at(start, "backreferences ((?P=name)) are not supported: they are not regular");
      if (match(">")) return error_at(start, "atomic groups (?>...) are not supported");
      if (match("(")) return error_at(start, "conditional groups (?(...)...) are not supported");
      if (match("P<") || match("<")) {
        while (!at_end() && peek() != '>') ++pos_;
        if (!match(">")) return error("missing '>' after a group name");
      } else if (!match(":")) {
        return error_at(start, "inline flags and other (?...) groups are not supported (use (?:...) for a plain group)");
      }
    }
    BRIGADE_ASSIGN_OR_RETURN(NodePtr inner, alternation());
    if (!match(")")) return error("missing ')'");
    return inner;
  }

  Expected<NodePtr> escape_atom() {
    const char c = peek(1);
    if (c == 'b' || c == 'B') return error("word boundaries (\\b, \\B) are not supported");
    if (c == 'A') {
      pos_ += 2;
      return make(Node::Kind::anchor_begin);
    }
    if (c == 'Z') {
      pos_ += 2;
      return make(Node::Kind::anchor_end);
    }
    if (is_digit(c) && c != '0' && !(is_octal(c) && is_octal(peek(2)) && is_octal(peek(3))))
      return error("backreferences (\\" + std::string(1, c) + ") are not supported: they are not regular");
    BRIGADE_ASSIGN_OR_RETURN(CodepointSet s, escape(false));
    return make_set(std::move(s));
  }

  // An escape at pos_ ('\\') inside or outside a class → its set; pos_ moves past it.
  Expected<CodepointSet> escape(bool in_class) {
    ++pos_;
    if (at_end()) return error("a pattern may not end with '\\'");
    const char c = p_[pos_];
    CodepointSet s;
    if (class_escape(c, s)) {
      ++pos_;
      return s;
    }
    auto simple = [&](uint32_t cp) {
      ++pos_;
      return single(cp);
    };
    switch (c) {
      case 'n': return simple('\n');
      case 't': return simple('\t');
      case 'r': return simple('\r');
      case 'f': return simple('\f');
      case 'v': return simple('\v');
      case 'a': return simple('\a');
      case 'x': return hex_escape(2);
      case 'u': return hex_escape(4);
      case 'U': return hex_escape(8);
      case 'N': return error("named characters (\\N{...}) are not supported");
      default: break;
    }
    if (in_class && c == 'b') return simple('\b');
    if (is_octal(c) && (c == '0' || (is_octal(peek(1)) && is_octal(peek(2))))) {
      uint32_t v = 0;
      for (int i = 0; i < 3 && is_octal(peek()); ++i) v = v * 8 + static_cast<uint32_t>(p_[pos_++] - '0');
      return single(v);
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c))
      return error("bad escape \\" + std::string(1, c));
    BRIGADE_ASSIGN_OR_RETURN(uint32_t cp, code_point());  // escaped punctuation or any other character
    return single(cp);
  }

  Expected<CodepointSet> hex_escape(int n_digits) {
    const char letter = p_[pos_];
    ++pos_;
    uint32_t v = 0;
    for (int i = 0; i < n_digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) return error("incomplete escape \\" + std::string(1, letter) + " (" + std::to_string(n_digits) + " hex digits)");
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > CodepointSet::kMax) return error("escape above U+10FFFF");
    return single(v);
  }

  Expected<NodePtr> char_class() {
    const size_t start = pos_;
    ++pos_;  // '['
    const bool negated = match("^");
    CodepointSet set;
    bool first = true;
    while (true) {
      if (at_end()) {
        pos_ = start;
        return error("unterminated character set");
      }
      if (peek() == ']' && !first) break;
      first = false;
      BRIGADE_ASSIGN_OR_RETURN(CodepointSet lo_set, class_item());
      const bool single_lo = lo_set.ranges().size() == 1 && lo_set.ranges()[0].first == lo_set.ranges()[0].second;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        BRIGADE_ASSIGN_OR_RETURN(CodepointSet hi_set, class_item());
        const bool single_hi = hi_set.ranges().size() == 1 && hi_set.ranges()[0].first == hi_set.ranges()[0].second;
        if (!single_lo || !single_hi) return error("bad character range (a class escape as an endpoint)");
        const uint32_t lo = lo_set.ranges()[0].first, hi = hi_set.ranges()[0].first;
        if (lo > hi) return error("bad character range (the end is below the start)");
        set.add(lo, hi);
        continue;
      }
      set.add(lo_set);
    }
    ++pos_;  // ']'
    return make_set(negated ? set.complement() : set);
  }

  Expected<CodepointSet> class_item() {
    if (peek() == '\\') return escape(true);
    BRIGADE_ASSIGN_OR_RETURN(uint32_t cp, code_point());
    return single(cp);
  }

  // True when node matches only the empty string.
  static bool only_empty(const Node& n) {
    switch (n.kind) {
      case Node::Kind::empty: case Node::Kind::anchor_begin: case Node::Kind::anchor_end: return true;
      case Node::Kind::set: return false;
      case Node::Kind::repeat: return n.max == 0 || only_empty(*n.children[0]);
      default:
        return std::all_of(n.children.begin(), n.children.end(), [](const NodePtr& c) { return only_empty(*c); });
    }
  }

  // Anchors stand where nothing can come before (^) or after ($) them; they become empty nodes.
  Status check_anchors(Node& n, bool at_start, bool at_end) {
    switch (n.kind) {
      case Node::Kind::anchor_begin:
      case Node::Kind::anchor_end: {
        const bool begin = n.kind == Node::Kind::anchor_begin;
        if (begin ? !at_start : !at_end)
          return invalid_argument(std::string("regex: the anchor ") + (begin ? "'^' (or \\A)" : "'$' (or \\Z)") +
                                  " may only stand at the " + (begin ? "start" : "end") +
                                  " of the pattern: the whole output is matched (" + quoted() + ")");
        n.kind = Node::Kind::empty;
        return Status::ok();
      }
      case Node::Kind::concat:
        for (size_t i = 0; i < n.children.size(); ++i) {
          bool start = at_start, end = at_end;
          for (size_t j = 0; j < i && start; ++j) start = only_empty(*n.children[j]);
          for (size_t j = i + 1; j < n.children.size() && end; ++j) end = only_empty(*n.children[j]);
          BRIGADE_RETURN_IF_ERROR(check_anchors(*n.children[i], start, end));
        }
        return Status::ok();
      case Node::Kind::alt:
        for (NodePtr& c : n.children) BRIGADE_RETURN_IF_ERROR(check_anchors(*c, at_start, at_end));
        return Status::ok();
      case Node::Kind::repeat: {
        const bool once = n.max <= 1;  // a second iteration has text before and after it
        return check_anchors(*n.children[0], at_start && once, at_end && once);
      }
      default:
        return Status::ok();
    }
  }

  static constexpr int kMaxNesting = 200;  // the parser recurses per group
  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Expected<std::unique_ptr<RegexNode>> parse_regex(std::string_view pattern) { return Parser(pattern).run(); }

}  // namespace brigade
