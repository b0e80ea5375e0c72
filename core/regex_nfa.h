// A regex tree (core/regex_syntax.h) → a Thompson NFA over bytes: code point sets become their
// UTF-8 byte sequences (core/utf8_ranges.h), so the automaton reads the output's bytes and
// accepts exactly the UTF-8 encodings of the strings the pattern matches. Counted repeats are
// unrolled; the build stops with an error once the automaton would pass max_states, so a
// pattern like (a{1000}){1000} costs at most that much memory and time.
#pragma once

#include <cstdint>
#include <vector>

#include "core/regex_syntax.h"

namespace brigade {

struct ByteNfa {
  struct Edge {
    uint8_t lo, hi;  // on a byte in [lo, hi]
    int32_t to;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int32_t> eps;  // moves without a byte
  };
  std::vector<State> states;
  int32_t start = 0, accept = 0;  // a string is accepted when a path over it reaches accept
};

// invalid_argument when the automaton needs more than max_states states.
Expected<ByteNfa> build_nfa(const RegexNode& root, size_t max_states);

}  // namespace brigade
