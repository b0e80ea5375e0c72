#include "actors/router/prefix_tree.h"

#include <algorithm>
#include <queue>

#include "core/status.h"

namespace brigade {

namespace {

// Length of the common prefix of an edge and the tokens from position `at`.
size_t common(const std::vector<int32_t>& edge, std::span<const int32_t> tokens, size_t at) {
  size_t n = 0;
  while (n < edge.size() && at + n < tokens.size() && edge[n] == tokens[at + n]) ++n;
  return n;
}

}  // namespace

PrefixTree::PrefixTree(int64_t max_tokens) : max_tokens_(max_tokens) {
  BRIGADE_CHECK(max_tokens >= 1, "a prefix tree must be able to hold a token");
}

int PrefixTree::match(std::span<const int32_t> tokens) const {
  const Node* node = &root_;
  size_t at = 0;
  while (at < tokens.size()) {
    auto it = node->children.find(tokens[at]);
    if (it == node->children.end()) break;
    const size_t n = common(it->second->edge, tokens, at);
    at += n;
    if (n < it->second->edge.size()) break;  // diverged (or ended) inside the edge
    node = it->second.get();
  }
  return static_cast<int>(at);
}

void PrefixTree::insert(std::span<const int32_t> tokens) {
  tokens = tokens.first(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_tokens_)));
  const uint64_t now = ++clock_;
  Node* node = &root_;
  node->last_used = now;
  size_t at = 0;
  while (at < tokens.size()) {
    auto it = node->children.find(tokens[at]);
    if (it == node->children.end()) {  // a new leaf holds the rest
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.end());
      leaf->parent = node;
      leaf->last_used = now;
      n_tokens_ += static_cast<int64_t>(leaf->edge.size());
      node->children.emplace(tokens[at], std::move(leaf));
      break;
    }
    Node* child = it->second.get();
    const size_t n = common(child->edge, tokens, at);
    if (n < child->edge.size()) {  // split the edge: a middle node takes its first n tokens
      auto middle = std::make_unique<Node>();
      middle->edge.assign(child->edge.begin(), child->edge.begin() + static_cast<std::ptrdiff_t>(n));
      middle->parent = node;
      middle->last_used = child->last_used;
      child->edge.erase(child->edge.begin(), child->edge.begin() + static_cast<std::ptrdiff_t>(n));
      child->parent = middle.get();
      middle->children.emplace(child->edge.front(), std::move(it->second));
      it->second = std::move(middle);
      child = it->second.get();
    }
    child->last_used = now;
    node = child;
    at += n;
  }
  if (n_tokens_ > max_tokens_) trim(max_tokens_ - max_tokens_ / 8);
}

void PrefixTree::trim(int64_t target) {
  auto older = [](const Node* a, const Node* b) { return a->last_used > b->last_used; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> leaves(older);
  std::vector<Node*> stack = {&root_};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n != &root_ && n->children.empty()) leaves.push(n);
    for (auto& [_, c] : n->children) stack.push_back(c.get());
  }
  while (n_tokens_ > target && !leaves.empty()) {
    Node* leaf = leaves.top();
    leaves.pop();
    Node* parent = leaf->parent;
    n_tokens_ -= static_cast<int64_t>(leaf->edge.size());
    parent->children.erase(leaf->edge.front());  // frees leaf
    if (parent != &root_ && parent->children.empty()) leaves.push(parent);
  }
}

}  // namespace brigade
