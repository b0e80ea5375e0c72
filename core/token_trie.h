// TokenTrie: a vocabulary's token bytes as a trie, for masking the tokens a byte-level matcher
// (core/json_matcher.h, core/schema_matcher.h) would refuse. One walk visits each trie node at most once with the
// matcher state of its prefix, so tokens sharing a prefix share its work, and a refused prefix
// prunes its whole subtree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json_matcher.h"

namespace brigade {

class TokenTrie {
 public:
  // pieces[id]: the bytes of token id; an empty piece (special tokens, ids without text) is never
  // allowed by allowed().
  explicit TokenTrie(const std::vector<std::string>& pieces);

  int vocab_size() const { return vocab_size_; }
  // The bytes of token id (empty outside the vocabulary).
  const std::string& piece(int32_t id) const {
    static const std::string none;
    return id >= 0 && id < vocab_size_ ? pieces_[static_cast<size_t>(id)] : none;
  }
  int n_nodes() const { return static_cast<int>(nodes_.size()); }
  // Whether some sequence of tokens spells exactly `text` (its bytes are the tokens' bytes joined);
  // true for empty text. A guided choice that no sequence spells cannot be produced.
  bool spells(std::string_view text) const;

  // allowed[id] = 1 for every token whose bytes `matcher` accepts from its current state, else 0
  // (resized to vocab_size()). Matcher needs bool feed(uint8_t) and value semantics.
  template <class Matcher>
  void allowed(const Matcher& matcher, std::vector<uint8_t>& allowed) const {
    allowed.assign(static_cast<size_t>(vocab_size_), 0);
    struct Frame {
      int32_t node;
      Matcher state;
    };
    std::vector<Frame> stack;
    stack.push_back({0, matcher});
    while (!stack.empty()) {
      Frame f = stack.back();
      stack.pop_back();
      const Node& n = nodes_[static_cast<size_t>(f.node)];
      for (int32_t t = n.first_token; t < n.end_token; ++t) allowed[static_cast<size_t>(token_ids_[static_cast<size_t>(t)])] = 1;
      for (int32_t c = n.first_child; c < n.end_child; ++c) {
        Matcher next = f.state;
        if (next.feed(edge_bytes_[static_cast<size_t>(c)])) stack.push_back({edge_nodes_[static_cast<size_t>(c)], next});
      }
    }
  }

 private:
  struct Node {
    int32_t first_child = 0, end_child = 0;  // edges [first, end) in edge_bytes_/edge_nodes_
    int32_t first_token = 0, end_token = 0;  // tokens ending here: token_ids_[first, end)
  };
  int vocab_size_ = 0;
  std::vector<std::string> pieces_;
  std::vector<Node> nodes_;  // node 0 is the root (the empty prefix)
  std::vector<uint8_t> edge_bytes_;
  std::vector<int32_t> edge_nodes_;
  std::vector<int32_t> token_ids_;
};

// The masks of recent matcher states (JsonMatcher for json_object, SchemaMatcher for a schema):
// while a sequence is inside a string, or between values at the same depth, its state repeats
// from token to token, and so does the mask (measured in bench/kernels/bench_json_mask). At most
// kMaxEntries masks are kept; a full cache starts over. Matcher needs operator== and hash().
template <class Matcher>
class MaskCache {
 public:
  static constexpr size_t kMaxEntries = 32;

  explicit MaskCache(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}

  const TokenTrie& trie() const { return *trie_; }
  // allowed[id] = 1 for the tokens m accepts (TokenTrie::allowed), valid until the next call.
  const std::vector<uint8_t>& allowed(const Matcher& m) {
    if (auto it = masks_.find(m); it != masks_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
    if (masks_.size() >= kMaxEntries) masks_.clear();
    std::vector<uint8_t>& mask = masks_[m];
    trie_->allowed(m, mask);
    return mask;
  }
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

 private:
  struct Hash {
    size_t operator()(const Matcher& m) const { return static_cast<size_t>(m.hash()); }
  };
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<Matcher, std::vector<uint8_t>, Hash> masks_;
  size_t hits_ = 0, misses_ = 0;
};

using JsonMaskCache = MaskCache<JsonMatcher>;

}  // namespace brigade
