// CompiledRegex: a pattern (core/regex_syntax.h) as a deterministic automaton over bytes, for
// constrained decoding: RegexMatcher (core/regex_matcher.h) steps it one output byte at a time,
// TokenTrie::allowed walks it over the vocabulary and MaskCache keys masks by its state.
//
// Built eagerly: syntax tree → byte NFA (core/regex_nfa.h, at most kMaxNfaStates states) →
// subset construction over byte classes (bytes no edge tells apart share a column) → only the
// states from which an accepting state can still be reached are kept. So every state the
// matcher can be in has a way to finish, and a byte that leads nowhere is refused at once: the
// output never reaches a dead end. At most kMaxStates states; a pattern that needs more is
// refused with that reason (the compile never takes more than about kMaxStates x 256 steps
// of kMaxNfaStates each).
//
// Mode::json_string compiles a JSON Schema `pattern`/`format`: the automaton reads the decoded
// content of a JSON string, and control characters other than \b \t \n \f \r (which JSON can
// only write as \u escapes, refused there: SchemaMatcher) are left out of its alphabet.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

class CompiledRegex {
 public:
  static constexpr size_t kMaxNfaStates = 50000;
  static constexpr size_t kMaxStates = 20000;
  static constexpr int32_t kDead = -1;
  enum class Mode { text, json_string };

  // The automaton of `pattern` (the whole output must match it), or invalid_argument saying
  // what was refused (an unsupported construct, a malformed pattern, one too large, one that
  // matches nothing).
  static Expected<std::shared_ptr<const CompiledRegex>> compile(std::string_view pattern, Mode mode = Mode::text);
  // The strings both a and b accept (JSON Schema pattern + format, or + min/maxLength).
  static Expected<std::shared_ptr<const CompiledRegex>> intersect(const CompiledRegex& a, const CompiledRegex& b);

  int32_t start() const { return 0; }
  // The state after `byte` from `state` (a live state), or kDead when the byte cannot continue
  // to any match.
  int32_t next(int32_t state, uint8_t byte) const {
    return table_[static_cast<size_t>(state) * n_classes_ + classes_[byte]];
  }
  // The bytes read from start() to `state` are a whole match.
  bool accepting(int32_t state) const { return accepting_[static_cast<size_t>(state)] != 0; }
  size_t n_states() const { return accepting_.size(); }
  size_t n_classes() const { return n_classes_; }

 private:
  friend class DfaBuilder;
  std::array<uint16_t, 256> classes_{};  // byte → column
  size_t n_classes_ = 0;
  std::vector<int32_t> table_;      // [state][class] → state or kDead
  std::vector<uint8_t> accepting_;  // [state]
};

}  // namespace brigade
