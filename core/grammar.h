// CompiledGrammar: a GBNF grammar (core/grammar_syntax.h) checked and flattened for
// GrammarMatcher (core/grammar_matcher.h), the pushdown recognizer that constrained decoding
// walks over the vocabulary (vLLM's guided_grammar, llama.cpp's grammar, SGLang's ebnf).
//
// Flattened as llama.cpp lays a grammar out: every alternative of every rule is a run of
// positions in one array, ending in kEnd; a position holds a terminal (a character class) or a
// reference to a rule. A parse in progress is a stack of positions (what is left to match, the
// top first), so a stack is a list of small ints and a set of them is a value.
//
// Refused at compile, with the rule's line and column: everything parse_gbnf refuses, and left
// recursion — a rule that can reach itself before reading a character — which a pushdown
// recognizer cannot expand. llama.cpp refuses the cycles its check sees (through rules with an
// empty alternative); brigade also refuses the ones it misses (through rules that only derive
// "" indirectly) where the stack would grow without end, on which llama.cpp never returns.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <string_view>
#include <utility>
#include <vector>

#include "core/grammar_syntax.h"
#include "core/status.h"

namespace brigade {

// The steps GrammarMatchers of one grammar took, (state, byte) → state: a trie walk meets the
// same states again and again (inside a string every plain character leads back to the same
// one), and a step that expands references costs far more than a lookup. Bounded: past
// kMaxEntries it starts over. Thread-safe (one mutex).
struct GrammarStepCache {
  static constexpr size_t kMaxEntries = 8192;
  struct State {
    std::vector<int32_t> stacks;
    uint32_t partial = 0;
    int n_remain = 0;
    bool operator==(const State&) const = default;
  };
  struct Entry {
    State from;
    uint8_t byte = 0;
    State to;
    bool overflowed = false;
  };
  std::mutex mutex;
  std::unordered_map<uint64_t, std::vector<Entry>> entries;  // by a hash of (from, byte)
  size_t n_entries = 0;
};

class CompiledGrammar {
 public:
  static constexpr int32_t kEnd = -1;

  // text → the grammar, or invalid_argument with the line and column of what was wrong.
  static Expected<std::shared_ptr<const CompiledGrammar>> compile(std::string_view text);

  // What position `pos` holds: a terminal (is_terminal), kEnd, or a reference to rule ref_rule.
  bool is_terminal(int32_t pos) const { return code_[static_cast<size_t>(pos)] >= 0; }
  bool is_end(int32_t pos) const { return code_[static_cast<size_t>(pos)] == kEnd; }
  int32_t ref_rule(int32_t pos) const { return -code_[static_cast<size_t>(pos)] - 2; }
  // The first position of each alternative of `rule` (one at kEnd for an empty alternative).
  const std::vector<int32_t>& alternatives(int32_t rule) const { return alts_[static_cast<size_t>(rule)]; }
  int32_t root() const { return root_; }
  size_t n_rules() const { return alts_.size(); }
  size_t n_positions() const { return code_.size(); }
  const std::string& rule_name(int32_t rule) const { return names_[static_cast<size_t>(rule)]; }

  // The terminal at `pos` matches code point cp.
  bool matches(int32_t pos, uint32_t cp) const;
  // Some code point a UTF-8 sequence that starts with `value`, n_remain continuation bytes to go
  // (1-3), could complete to is matched by the terminal at pos. As llama.cpp decides it for a
  // token that ends mid-character: the completions are [value << 6n, that | (2^6n - 1)], raised
  // to U+0800 / U+10000 for E0 / F0 leads, nothing for C0 C1 (overlong); `.` takes any; a class
  // takes the sequence when it meets the range. A negated class takes it unless the range lies
  // wholly inside what it excludes (llama.cpp refuses it when the two meet at all, which would
  // also refuse, byte by byte, tokens that complete the character to an allowed one).
  bool may_match_partial(int32_t pos, uint32_t value, int n_remain) const;

  // The matchers' shared step cache (mutable state behind a const grammar; thread-safe).
  GrammarStepCache& step_cache() const { return steps_; }

 private:
  struct CharClass {
    bool any = false, negated = false;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // sorted, disjoint, non-adjacent
    std::array<uint64_t, 2> ascii{};                    // the answer for code points < 128
  };
  const CharClass& term(int32_t pos) const { return classes_[static_cast<size_t>(code_[static_cast<size_t>(pos)])]; }
  friend class GrammarBuilder;

  std::vector<int32_t> code_;               // [position]: class index, kEnd, or -(rule + 2)
  std::vector<std::vector<int32_t>> alts_;  // [rule]: first positions
  std::vector<std::string> names_;          // [rule]
  std::vector<CharClass> classes_;
  int32_t root_ = 0;
  mutable GrammarStepCache steps_;
};

}  // namespace brigade
