// GrammarMatcher: a byte-level recognizer of the text a CompiledGrammar derives from `root`, the
// grammar counterpart of RegexMatcher: feed(byte) says whether what it has read can still be
// extended to a whole derivation, complete() whether it is one. TokenTrie::allowed walks it over
// the vocabulary and MaskCache keys masks by its state.
//
// The state is llama.cpp's: the set of pushdown stacks of the parses still alive (each a list of
// grammar positions, a terminal on top; an empty stack is a finished parse), plus the UTF-8
// sequence read so far of a character not yet complete. Stacks are kept sorted and deduplicated
// in one flat array, so equal states compare and hash equal. A whole character advances every
// stack whose top matches it and expands rule references until terminals are on top; a byte that
// only starts (or continues) a character keeps the stacks whose top could still match it
// (CompiledGrammar::may_match_partial) and advances nothing.
//
// Bounds, so that an ambiguous or hostile grammar costs bounded time and memory per byte: at most
// kMaxStacks stacks, kMaxDepth positions in one, kMaxExpansions stacks visited while expanding;
// a parse past them is dropped and overflowed() says so (the text stays within the grammar, but
// some continuations it allows are cut off). The engine refuses a grammar whose start overflows.
//
// As in llama.cpp: code points are read as llama.cpp's UTF-8 decoder reads them (leads F8-FF count
// as four-byte leads, continuation bytes are not checked for overlong or surrogate forms), a
// NUL byte or a stray continuation byte is refused, and `.` matches any code point. Unlike
// llama.cpp, complete() is false while a character is unfinished (llama.cpp allows EOS there if
// any parse has ended).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/grammar.h"

namespace brigade {

class GrammarMatcher {
 public:
  static constexpr size_t kMaxStacks = 512;
  static constexpr size_t kMaxDepth = 512;
  static constexpr size_t kMaxExpansions = 8192;

  // The state before any output. grammar must outlive the matcher and its copies.
  explicit GrammarMatcher(const CompiledGrammar& grammar);

  // True when the bytes read so far are still a prefix of a derivation (the state moves on);
  // false when not, and then for good. Steps are cached in the grammar (GrammarStepCache).
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes) {
    for (char c : bytes)
      if (!feed(static_cast<uint8_t>(c))) return false;
    return true;
  }
  // The bytes read are a whole derivation of root (the output may end here).
  bool complete() const { return n_remain_ == 0 && !stacks_.empty() && stacks_[0] == 0; }
  // Nothing can follow: every parse has finished (or the matcher failed).
  bool finished() const { return stacks_.empty() || (complete() && stacks_.size() == 1); }
  bool failed() const { return stacks_.empty(); }
  // Some parse was dropped at a bound (kMaxStacks, kMaxDepth, kMaxExpansions) since the start.
  bool overflowed() const { return overflowed_; }
  size_t n_stacks() const;

  bool operator==(const GrammarMatcher& o) const {
    return grammar_ == o.grammar_ && partial_ == o.partial_ && n_remain_ == o.n_remain_ && stacks_ == o.stacks_;
  }
  uint64_t hash() const;

 private:
  using Stack = std::vector<int32_t>;  // bottom first; top is a terminal position
  bool step(uint8_t byte);             // feed without the cache
  bool advance(uint32_t cp);           // a whole character
  bool keep_partial();                 // an unfinished one
  bool fail();
  // Expands `stack` (its top a reference or a terminal, or empty) into terminal-topped stacks.
  void expand(Stack stack, std::vector<Stack>& out);
  void store(std::vector<Stack>& stacks);

  const CompiledGrammar* grammar_;
  // Each stack as its length then its positions bottom to top, stacks in ascending order
  // (so an empty stack, a finished parse, comes first).
  std::vector<int32_t> stacks_;
  uint32_t partial_ = 0;  // the unfinished character's bits so far
  int n_remain_ = 0;      // its continuation bytes still to come
  bool overflowed_ = false;
};

}  // namespace brigade
