// RegexMatcher: a byte-level recognizer of the outputs a CompiledRegex matches whole, the regex
// counterpart of JsonMatcher and SchemaMatcher: feed(byte) says whether what it has read can
// still be extended to a match, complete() whether it is one. Its state is one automaton state,
// so copies (TokenTrie::allowed copies at every trie edge) and MaskCache keys are cheap.
//
// Since the automaton keeps only states that can still reach a match, a matcher that has not
// failed can always finish; in a complete state with no byte to follow, the mask allows nothing
// but the end ids, so generation stops there.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/regex_dfa.h"

namespace brigade {

class RegexMatcher {
 public:
  // regex must outlive the matcher and its copies.
  explicit RegexMatcher(const CompiledRegex& regex) : regex_(&regex), state_(regex.start()) {}

  // True when the bytes read so far are still a prefix of a match (the state moves on); false
  // when not, and then for good.
  bool feed(uint8_t byte) {
    if (state_ != CompiledRegex::kDead) state_ = regex_->next(state_, byte);
    return state_ != CompiledRegex::kDead;
  }
  bool feed(std::string_view bytes) {
    for (char c : bytes)
      if (!feed(static_cast<uint8_t>(c))) return false;
    return true;
  }
  // The bytes read are a whole match (the output may end here).
  bool complete() const { return state_ != CompiledRegex::kDead && regex_->accepting(state_); }

  // Equal states accept the same continuations (MaskCache keys masks by the state).
  bool operator==(const RegexMatcher&) const = default;
  uint64_t hash() const { return (reinterpret_cast<uintptr_t>(regex_) * 0x9E3779B97F4A7C15ull) ^ static_cast<uint32_t>(state_); }

 private:
  const CompiledRegex* regex_;
  int32_t state_;
};

}  // namespace brigade
