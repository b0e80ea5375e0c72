// Regex syntax for constrained decoding (vLLM's guided_regex, SGLang's regex, JSON Schema
// `pattern`): a pattern's text → a small tree over Unicode code points, which regex_nfa.h turns
// into a byte automaton. The syntax is Python `re`'s (what vLLM/outlines users write) with ASCII
// classes, as outlines and Python's re.ASCII read them:
//   literals (UTF-8, any code point), escapes \n \t \r \f \v \a \0 \ooo \xhh \uhhhh \Uhhhhhhhh and
//   escaped punctuation; `.` (any code point but \n); classes [a-z], [^...] (over all code points),
//   with \d \w \s \D \W \S inside or outside them (\d = [0-9], \w = [A-Za-z0-9_],
//   \s = [ \t\n\r\f\v]); groups ( ), (?: ), (?P<name> ), (?<name> ), comments (?#...);
//   alternation; * + ? {n} {n,} {,m} {n,m} and their lazy forms (*? ...: read as greedy, since
//   the model, not the engine, picks the match); `{` that is no quantifier is a literal, as in Python.
// The whole output must match (re.fullmatch), so ^ \A may stand only where nothing can precede
// them and $ \Z only where nothing can follow; they then match the empty string.
// Refused, naming the construct: backreferences (\1, (?P=name)), lookaround ((?=, (?!, (?<=,
// (?<!), word boundaries (\b \B), atomic groups and possessive quantifiers, conditionals, inline
// flags ((?i)...), \N{...}, unknown letter escapes; anchors anywhere else.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace brigade {

// Sorted, disjoint, non-adjacent inclusive code point ranges.
class CodepointSet {
 public:
  static constexpr uint32_t kMax = 0x10FFFF;
  using Range = std::pair<uint32_t, uint32_t>;

  void add(uint32_t lo, uint32_t hi);  // lo <= hi <= kMax
  void add(const CodepointSet& o);
  CodepointSet complement() const;   // within [0, kMax]
  const std::vector<Range>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }

 private:
  std::vector<Range> ranges_;
};

struct RegexNode {
  enum class Kind : uint8_t {
    empty,   // matches the empty string (also what a valid anchor becomes)
    set,     // one code point of `set`
    concat,  // children in order
    alt,     // one of children
    repeat,  // children[0], min..max times
    anchor_begin,
    anchor_end,
  };
  static constexpr uint32_t kInfinite = UINT32_MAX;

  Kind kind = Kind::empty;
  CodepointSet set;
  std::vector<std::unique_ptr<RegexNode>> children;
  uint32_t min = 0, max = 0;  // repeat
};

// pattern (UTF-8) → its tree with anchors checked and turned into empty nodes, or
// invalid_argument naming what is unsupported or malformed and where ("at offset 3").
Expected<std::unique_ptr<RegexNode>> parse_regex(std::string_view pattern);

}  // namespace brigade
