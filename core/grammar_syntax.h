// GBNF syntax (llama.cpp's grammar format; vLLM's guided_grammar and SGLang's ebnf take the same
// text through xgrammar): a grammar's text → its rules as alternatives of terms over Unicode code
// points, which core/grammar.h checks and flattens for GrammarMatcher.
//
//   name ::= alternatives        a rule; names are letters, digits, '-' and '_'; `root` starts
//   "text"                       a literal, with escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
//                                \UHHHHHHHH (any other escape is an error, as in llama.cpp)
//   [a-z0-9_] [^"\\]             a character class (ranges, negation)
//   .                            any code point
//   ( ... )   a | b              grouping, alternation
//   x* x+ x? x{n} x{n,} x{n,m}   repetition (of the last literal, class, group or reference)
//   # comment                    to the end of the line
// A newline ends a rule, except inside parentheses and right after `|` or `::=`. As in llama.cpp,
// a repetition count above 2000 is refused and an upper bound above 2000 means "no bound".
// Refused where llama.cpp differs or is lax, each with its line and column: a rule defined twice
// (llama.cpp keeps the last), an empty or reversed class ([] [z-a]), code points past U+10FFFF,
// invalid UTF-8, and llama.cpp's token terms <[id]> <text> !<...> (token ids are a vocabulary's,
// and this engine works on text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/regex_syntax.h"
#include "core/status.h"

namespace brigade {

struct GrammarTerm {
  enum class Kind : uint8_t { chars, any, rule };
  Kind kind = Kind::chars;
  bool negated = false;    // chars: every code point but `set`
  CodepointSet set;        // chars
  int32_t rule = -1;       // rule: index into GrammarSyntax::rules
};

struct GrammarRule {
  std::string name;  // the user's name, or "name (group at 3:7)" for one the parser made
  std::vector<std::vector<GrammarTerm>> alternatives;  // an empty alternative matches ""
  int line = 0, column = 0;  // where it is defined (1-based)
  bool defined = false;
};

struct GrammarSyntax {
  std::vector<GrammarRule> rules;
  int32_t root = -1;
  size_t n_terms = 0;
};

// text → its rules, or invalid_argument "grammar line L, column C: what was wrong" (for an
// undefined rule, where it is first used; a missing root names the rules there are).
Expected<GrammarSyntax> parse_gbnf(std::string_view text);

}  // namespace brigade
