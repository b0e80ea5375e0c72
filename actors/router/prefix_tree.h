// PrefixTree: what the router remembers of the prompts it sent to one instance, to guess which
// instance's prefix cache holds most of a new prompt (SGLang's router keeps the same kind of
// approximate tree per worker). A radix tree over token ids whose edges hold runs of tokens;
// bounded: past max_tokens the least recently used branches are trimmed.
//
// It is an approximation of the instance's real radix cache (kvstore/radix_tree.h): it never sees
// that cache's evictions, and it records a prompt when the request is routed, before its pages
// exist. Not thread-safe; owned by one RouterPolicy.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace brigade {

class PrefixTree {
 public:
  // max_tokens >= 1: token ids held at most (edge lengths summed).
  explicit PrefixTree(int64_t max_tokens);

  // Leading tokens of `tokens` that some recorded sequence shares. Does not refresh recency.
  int match(std::span<const int32_t> tokens) const;
  // Records `tokens` (at most its first max_tokens), refreshing the recency of its whole path,
  // then trims the least recently used leaves while the tree holds more than max_tokens: down to
  // 7/8 of it, so that a full tree trims once per many inserts rather than on each.
  void insert(std::span<const int32_t> tokens);

  int64_t n_tokens() const { return n_tokens_; }
  int64_t max_tokens() const { return max_tokens_; }

 private:
  struct Node {
    std::vector<int32_t> edge;  // tokens from the parent to this node (empty only at the root)
    std::unordered_map<int32_t, std::unique_ptr<Node>> children;  // keyed by their edge's first token
    Node* parent = nullptr;
    uint64_t last_used = 0;  // insert clock; never older than any descendant's
  };

  void trim(int64_t target);

  Node root_;
  int64_t max_tokens_;
  int64_t n_tokens_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace brigade
