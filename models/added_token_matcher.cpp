#include "models/added_token_matcher.h"

#include <algorithm>
#include <utility>

namespace brigade {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::string_view>& strings) {
  root_.fill(-1);
  std::vector<std::vector<std::pair<uint8_t, int32_t>>> children;  // per node, while building
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string_view s = strings[i];
    if (s.empty()) continue;
    int32_t node = -1;
    for (size_t k = 0; k < s.size(); ++k) {
      const auto byte = static_cast<uint8_t>(s[k]);
      int32_t next = -1;
      if (node < 0) {
        next = root_[byte];
      } else {
        for (const auto& [label, target] : children[static_cast<size_t>(node)])
          if (label == byte) next = target;
      }
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        children.emplace_back();
        if (node < 0) root_[byte] = next;
        else children[static_cast<size_t>(node)].emplace_back(byte, next);
      }
      node = next;
    }
    Node& end = nodes_[static_cast<size_t>(node)];
    if (end.index < 0) end.index = static_cast<int32_t>(i);  // a repeated string keeps its first index
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    auto& edges = children[n];
    std::sort(edges.begin(), edges.end());
    nodes_[n].edges_begin = static_cast<uint32_t>(labels_.size());
    for (const auto& [label, target] : edges) {
      labels_.push_back(label);
      targets_.push_back(target);
    }
    nodes_[n].edges_end = static_cast<uint32_t>(labels_.size());
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  const Node& n = nodes_[static_cast<size_t>(node)];
  for (uint32_t e = n.edges_begin; e < n.edges_end; ++e) {
    if (labels_[e] == byte) return targets_[e];
    if (labels_[e] > byte) break;
  }
  return -1;
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from) const {
  if (nodes_.empty()) return {text.size(), 0, -1};
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    int32_t node = root_[s[i]];
    if (node < 0) continue;
    Match best{i, 0, -1};
    for (size_t j = i + 1;; ++j) {
      if (const int32_t index = nodes_[static_cast<size_t>(node)].index; index >= 0) best = {i, j - i, index};
      if (j == n || (node = child(node, s[j])) < 0) break;
    }
    if (best.index >= 0) return best;
  }
  return {n, 0, -1};
}

}  // namespace brigade
