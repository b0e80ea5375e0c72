#include "core/token_trie.h"

#include <algorithm>
#include <numeric>

namespace brigade {

// Built from the pieces sorted by bytes: a node's subtree is a contiguous run of the sorted
// order, so the nodes are laid out breadth first over runs with no per-node maps.
TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : vocab_size_(static_cast<int>(pieces.size())), pieces_(pieces) {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab_size_; ++id)
    if (!pieces[static_cast<size_t>(id)].empty()) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)] || (pieces[static_cast<size_t>(a)] == pieces[static_cast<size_t>(b)] && a < b);
  });
  struct Run {
    size_t begin, end;  // in order
    size_t depth;       // bytes of the node's prefix
  };
  std::vector<Run> runs = {{0, order.size(), 0}};
  nodes_.emplace_back();
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run r = runs[i];
    auto piece = [&](size_t k) -> const std::string& { return pieces[static_cast<size_t>(order[k])]; };
    size_t k = r.begin;
    // Tokens that end at this node come first in sorted order (a prefix sorts before its extensions).
    nodes_[i].first_token = static_cast<int32_t>(token_ids_.size());
    while (k < r.end && piece(k).size() == r.depth) token_ids_.push_back(order[k++]);
    nodes_[i].end_token = static_cast<int32_t>(token_ids_.size());
    nodes_[i].first_child = static_cast<int32_t>(edge_bytes_.size());
    while (k < r.end) {
      const uint8_t byte = static_cast<uint8_t>(piece(k)[r.depth]);
      size_t j = k;
      while (j < r.end && static_cast<uint8_t>(piece(j)[r.depth]) == byte) ++j;
      edge_bytes_.push_back(byte);
      edge_nodes_.push_back(static_cast<int32_t>(runs.size()));
      runs.push_back({k, j, r.depth + 1});
      nodes_.emplace_back();
      k = j;
    }
    nodes_[i].end_child = static_cast<int32_t>(edge_bytes_.size());
  }
}

// reach[i]: tokens spell text's first i bytes; from each reached i, one walk down the trie along
// text[i..] marks every end a token reaches (edges of a node are sorted by byte).
bool TokenTrie::spells(std::string_view text) const {
  std::vector<uint8_t> reach(text.size() + 1, 0);
  reach[0] = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!reach[i]) continue;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const Node& n = nodes_[static_cast<size_t>(node)];
      const auto first = edge_bytes_.begin() + n.first_child, last = edge_bytes_.begin() + n.end_child;
      const auto e = std::lower_bound(first, last, static_cast<uint8_t>(text[j]));
      if (e == last || *e != static_cast<uint8_t>(text[j])) break;
      node = edge_nodes_[static_cast<size_t>(e - edge_bytes_.begin())];
      const Node& next = nodes_[static_cast<size_t>(node)];
      if (next.first_token < next.end_token) reach[j + 1] = 1;
    }
  }
  return reach[text.size()] != 0;
}

}  // namespace brigade
