// A range of Unicode code points as the UTF-8 byte sequences that encode it: each sequence is
// 1-4 byte ranges, and a byte string encodes a code point of the range exactly when it matches
// one of the sequences (range by range). Surrogates (U+D800-DFFF) have no UTF-8 form and are
// left out. Used to build byte automata from code point classes (core/regex_nfa.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace brigade {

struct Utf8Sequence {
  int n = 0;                                   // bytes (1-4)
  std::pair<uint8_t, uint8_t> bytes[4] = {};   // inclusive byte ranges, first n used
};

// The sequences for [lo, hi] (lo <= hi <= 0x10FFFF), appended to out; disjoint.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out);

}  // namespace brigade
