// AddedTokenMatcher: finds a tokenizer's added/special tokens in a text, as every tokenizer kind
// splits its input at them before its model runs (tokenizer.json's added_tokens, tiktoken and
// tekken special tokens through them, SentencePiece control pieces, GGUF control/user-defined
// tokens). The match is the leftmost one, and the longest of those starting there (Hugging Face
// AddedVocabulary's Aho-Corasick MatchKind::LeftmostLongest); a string given twice keeps its first
// index.
//
// A byte trie: a 256-entry table of the root's children rejects a byte no token starts with in one
// lookup, so the text is scanned about as fast as a table-driven byte loop; from a byte some token
// starts with, the trie is walked until it has no edge for the next byte (at most the longest
// token's length). It replaces a scan over every token at every position (1,000 compares per
// byte for a tekken vocabulary; docs/perf.md "Added tokens").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // strings[i] gets index i; empty strings are never matched.
  explicit AddedTokenMatcher(const std::vector<std::string_view>& strings);

  struct Match {
    size_t begin = 0;   // offset in the text; the text's size when there is no match
    size_t length = 0;  // bytes
    int32_t index = -1;  // into the constructor's strings; -1 when there is no match
  };
  // The leftmost match at or after `from`, the longest there.
  Match find(std::string_view text, size_t from) const;
  bool empty() const { return nodes_.empty(); }

 private:
  struct Node {
    int32_t index = -1;  // the string ending here, or -1
    uint32_t edges_begin = 0, edges_end = 0;  // into labels_/targets_, sorted by label
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::array<int32_t, 256> root_{};  // the node after the first byte, or -1 (filled by the constructor)
  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;
  std::vector<int32_t> targets_;
};

}  // namespace brigade
