#include "kvstore/radix_tree.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <queue>
#include <tuple>

namespace brigade {

Expected<EvictionPolicy> parse_eviction_policy(const std::string& name) {
  if (name == "lru") return EvictionPolicy::lru;
  if (name == "lfu") return EvictionPolicy::lfu;
  if (name == "priority") return EvictionPolicy::priority;
  return invalid_argument("unknown eviction policy '" + name + "' (expected lru, lfu or priority)");
}

const char* eviction_policy_name(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::lru: return "lru";
    case EvictionPolicy::lfu: return "lfu";
    case EvictionPolicy::priority: return "priority";
  }
  return "?";
}

struct RadixTree::Tail {
  Node* parent = nullptr;
  std::vector<int32_t> tokens;  // 1 .. page_size - 1 ids: the page's filled rows
  int32_t page = 0;
  int holds = 0;
  uint64_t last_access = 0;
  uint64_t hits = 1;
  int priority = INT_MIN;
};

struct RadixTree::Node {
  Node* parent = nullptr;
  std::vector<int32_t> tokens;  // pages.size() * page_size ids
  std::vector<int32_t> pages;
  std::vector<PageKey> keys;
  std::vector<std::unique_ptr<Node>> children;
  std::vector<std::unique_ptr<Tail>> tails;  // partly filled pages after this node's pages
  int lock_ref = 0;
  uint64_t last_access = 0;
  uint64_t hits = 0;
  int priority = INT_MIN;
  int n_path_pages = 0;  // pages from the root to this node's end (splits keep it)

  int n_pages() const { return static_cast<int>(pages.size()); }
  bool leaf() const { return children.empty() && tails.empty(); }
};

RadixTree::RadixTree(int page_size, EvictionPolicy policy, PageKey root)
    : page_size_(page_size), policy_(policy), root_key_(root), root_(std::make_unique<Node>()) {
  BRIGADE_CHECK(page_size_ >= 1, "a page holds at least one token");
}

RadixTree::~RadixTree() = default;

bool RadixTree::page_equal(const int32_t* a, const int32_t* b) const {
  return std::memcmp(a, b, static_cast<size_t>(page_size_) * sizeof(int32_t)) == 0;
}

PageKey RadixTree::root_for(std::span<const int32_t> tokens) const {
  return root_key_of_ && !tokens.empty() ? root_key_of_(tokens[0]) : root_key_;
}

RadixTree::Node* RadixTree::find_child(Node* node, const int32_t* first_page) const {
  for (auto& c : node->children)
    if (page_equal(c->tokens.data(), first_page)) return c.get();
  return nullptr;
}

// Puts a new node holding node's first n pages between node and its parent; node keeps the rest.
// Locks and statistics are copied, so a lock taken on node (or below) still unlocks every node on
// its path, the new one included.
RadixTree::Node* RadixTree::split(Node* node, int n) {
  BRIGADE_CHECK(n > 0 && n < node->n_pages(), "a split leaves pages on both sides");
  Node* parent = node->parent;
  auto upper = std::make_unique<Node>();
  const size_t nt = static_cast<size_t>(n) * static_cast<size_t>(page_size_);
  upper->parent = parent;
  upper->tokens.assign(node->tokens.begin(), node->tokens.begin() + static_cast<std::ptrdiff_t>(nt));
  upper->pages.assign(node->pages.begin(), node->pages.begin() + n);
  upper->keys.assign(node->keys.begin(), node->keys.begin() + n);
  upper->lock_ref = node->lock_ref;
  upper->last_access = node->last_access;
  upper->hits = node->hits;
  upper->priority = node->priority;
  upper->n_path_pages = node->n_path_pages - (node->n_pages() - n);
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + static_cast<std::ptrdiff_t>(nt));
  node->pages.erase(node->pages.begin(), node->pages.begin() + n);
  node->keys.erase(node->keys.begin(), node->keys.begin() + n);
  auto it = std::find_if(parent->children.begin(), parent->children.end(),
                         [&](const std::unique_ptr<Node>& c) { return c.get() == node; });
  BRIGADE_CHECK(it != parent->children.end(), "a node is its parent's child");
  Node* raw = upper.get();
  node->parent = raw;
  raw->children.push_back(std::move(*it));
  *it = std::move(upper);
  return raw;
}

void RadixTree::touch_path(Node* node, int priority, bool count_use) {
  const uint64_t now = ++clock_;
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    n->last_access = now;
    if (count_use) ++n->hits;
    n->priority = std::max(n->priority, priority);
  }
}

RadixTree::Match RadixTree::match(std::span<const int32_t> tokens, int max_tokens, bool touch) {
  Match m;
  m.last_key = root_for(tokens);
  const int n_full = std::min(static_cast<int>(tokens.size()), max_tokens) / page_size_;
  Node* node = root_.get();
  int i = 0;  // pages matched
  while (i < n_full) {
    const int32_t* want = tokens.data() + static_cast<size_t>(i) * static_cast<size_t>(page_size_);
    Node* child = find_child(node, want);
    if (!child) break;
    int j = 1;
    while (j < child->n_pages() && i + j < n_full &&
           page_equal(child->tokens.data() + static_cast<size_t>(j) * static_cast<size_t>(page_size_),
                      want + static_cast<size_t>(j) * static_cast<size_t>(page_size_)))
      ++j;
    const bool partial = j < child->n_pages();
    if (partial) child = split(child, j);  // the match ends inside the edge
    m.pages.insert(m.pages.end(), child->pages.begin(), child->pages.end());
    m.keys.insert(m.keys.end(), child->keys.begin(), child->keys.end());
    i += j;
    node = child;
    if (partial) break;
  }
  m.n_tokens = i * page_size_;
  m.node = node == root_.get() ? nullptr : node;
  if (!m.keys.empty()) m.last_key = m.keys.back();
  if (touch && m.node) touch_path(m.node, INT_MIN, /*count_use=*/true);
  return m;
}

std::vector<RadixTree::PageFate> RadixTree::insert(std::span<const int32_t> tokens, std::span<const int32_t> pages,
                                                   int priority, NodeRef* end, std::vector<int32_t>* freed) {
  return insert_from(nullptr, tokens, pages, priority, end, freed);
}

int RadixTree::depth(NodeRef node) const { return node ? node->n_path_pages : 0; }

std::vector<RadixTree::PageFate> RadixTree::insert_from(NodeRef from, std::span<const int32_t> tokens,
                                                        std::span<const int32_t> pages, int priority, NodeRef* end,
                                                        std::vector<int32_t>* freed) {
  const int n = static_cast<int>(pages.size());
  BRIGADE_CHECK(static_cast<int64_t>(tokens.size()) >= static_cast<int64_t>(n) * page_size_,
                "every inserted page has its tokens");
  int i = depth(from);  // pages in the tree already
  BRIGADE_CHECK(i <= n, "insert_from starts within the inserted pages");
  BRIGADE_CHECK(from == nullptr || page_equal(from->tokens.data() + from->tokens.size() - static_cast<size_t>(page_size_),
                                              tokens.data() + static_cast<size_t>(i - 1) * static_cast<size_t>(page_size_)),
                "insert_from starts where an insert or match of the same tokens ended");
  std::vector<PageFate> fates;
  fates.reserve(static_cast<size_t>(n - i));
  Node* node = from ? from : root_.get();
  while (i < n) {
    const int32_t* want = tokens.data() + static_cast<size_t>(i) * static_cast<size_t>(page_size_);
    Node* child = find_child(node, want);
    if (!child) {  // the rest is new: one node takes all of it
      if (freed)
        drop_covered_tails(node, tokens.subspan(static_cast<size_t>(i) * static_cast<size_t>(page_size_),
                                                static_cast<size_t>(page_size_)), freed);
      auto fresh = std::make_unique<Node>();
      fresh->parent = node;
      fresh->hits = 1;
      PageKey k = node == root_.get() ? root_for(tokens) : node->keys.back();
      for (int p = i; p < n; ++p) {
        std::span<const int32_t> page_tokens(tokens.data() + static_cast<size_t>(p) * static_cast<size_t>(page_size_),
                                             static_cast<size_t>(page_size_));
        k = chain_key(k, page_tokens);
        fresh->keys.push_back(k);
        fresh->pages.push_back(pages[static_cast<size_t>(p)]);
        fresh->tokens.insert(fresh->tokens.end(), page_tokens.begin(), page_tokens.end());
        fates.push_back(PageFate::taken);
      }
      n_pages_ += n - i;
      fresh->n_path_pages = n;
      Node* raw = fresh.get();
      node->children.push_back(std::move(fresh));
      node = raw;
      break;
    }
    int j = 0;
    while (j < child->n_pages() && i + j < n &&
           page_equal(child->tokens.data() + static_cast<size_t>(j) * static_cast<size_t>(page_size_),
                      want + static_cast<size_t>(j) * static_cast<size_t>(page_size_))) {
      fates.push_back(child->pages[static_cast<size_t>(j)] == pages[static_cast<size_t>(i + j)] ? PageFate::same
                                                                                                : PageFate::duplicate);
      ++j;
    }
    if (j < child->n_pages()) child = split(child, j);
    i += j;
    node = child;
  }
  // Recency and priority, but not a use: a sequence inserts again at every page boundary it
  // crosses, which would make one long sequence's path look frequently used to LFU. A node's uses
  // are the sequence that computed it (hits = 1 at creation) and each match.
  if (node != root_.get()) touch_path(node, priority, /*count_use=*/false);
  if (end) *end = node == root_.get() ? nullptr : node;
  return fates;
}

std::vector<PageKey> RadixTree::continue_keys(const Match& m, std::span<const int32_t> tokens, int n_pages) const {
  std::vector<PageKey> keys;
  PageKey k = m.last_key;
  for (int p = m.n_tokens / page_size_; p < n_pages; ++p) {
    if (static_cast<int64_t>(p + 1) * page_size_ > static_cast<int64_t>(tokens.size())) break;
    k = chain_key(k, tokens.subspan(static_cast<size_t>(p) * static_cast<size_t>(page_size_),
                                    static_cast<size_t>(page_size_)));
    keys.push_back(k);
  }
  return keys;
}

std::vector<PageKey> RadixTree::path_keys(NodeRef node, NodeRef from) const {
  const Node* stop = from ? from : root_.get();
  std::vector<const Node*> path;
  for (const Node* n = node ? node : root_.get(); n != stop; n = n->parent) {
    BRIGADE_CHECK(n != root_.get(), "path_keys starts from a node on the path");
    path.push_back(n);
  }
  std::vector<PageKey> keys;
  for (auto it = path.rbegin(); it != path.rend(); ++it) keys.insert(keys.end(), (*it)->keys.begin(), (*it)->keys.end());
  return keys;
}

void RadixTree::lock(NodeRef node) {
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    if (n->lock_ref++ == 0) n_locked_pages_ += n->n_pages();
  }
}

void RadixTree::unlock(NodeRef node) {
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    BRIGADE_CHECK(n->lock_ref > 0, "unlock matches a lock");
    if (--n->lock_ref == 0) n_locked_pages_ -= n->n_pages();
  }
}

void RadixTree::move_lock(NodeRef from, NodeRef to) {
  const Node* stop = from ? from : root_.get();
  for (Node* n = to ? to : root_.get(); n != stop; n = n->parent) {
    BRIGADE_CHECK(n != root_.get(), "move_lock moves a lock down its path");
    if (n->lock_ref++ == 0) n_locked_pages_ += n->n_pages();
  }
}

std::vector<RadixTree::Evicted> RadixTree::evict(int n) {
  std::vector<Evicted> out = take_leaves(n);
  n_evicted_ += out.size();
  return out;
}

std::vector<RadixTree::Evicted> RadixTree::clear_unlocked() { return take_leaves(n_evictable()); }

std::vector<RadixTree::Evicted> RadixTree::take_leaves(int n) {
  std::vector<Evicted> out;
  if (n <= 0) return out;
  // (policy key, last access, node or null, tail or null): smallest first.
  using Rank = std::tuple<int64_t, uint64_t, Node*, Tail*>;
  auto key = [&](uint64_t hits, int priority) -> int64_t {
    switch (policy_) {
      case EvictionPolicy::lru: return 0;
      case EvictionPolicy::lfu: return static_cast<int64_t>(hits);
      case EvictionPolicy::priority: return priority;
    }
    return 0;
  };
  auto rank = [&](Node* node) -> Rank { return {key(node->hits, node->priority), node->last_access, node, nullptr}; };
  auto rank_tail = [&](Tail* t) -> Rank { return {key(t->hits, t->priority), t->last_access, nullptr, t}; };
  std::priority_queue<Rank, std::vector<Rank>, std::greater<>> heap;
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (auto& c : node->children) stack.push_back(c.get());
    for (auto& t : node->tails)
      if (t->holds == 0) heap.push(rank_tail(t.get()));
    if (node != root_.get() && node->leaf() && node->lock_ref == 0) heap.push(rank(node));
  }
  while (static_cast<int>(out.size()) < n && !heap.empty()) {
    Node* leaf = std::get<2>(heap.top());
    Tail* tail = std::get<3>(heap.top());
    heap.pop();
    if (tail) {
      out.push_back({tail->page, PageKey{}, true});
      Node* parent = tail->parent;
      remove_tail(tail);
      if (parent != root_.get() && parent->leaf() && parent->lock_ref == 0) heap.push(rank(parent));
      continue;
    }
    for (int p = 0; p < leaf->n_pages(); ++p)
      out.push_back({leaf->pages[static_cast<size_t>(p)], leaf->keys[static_cast<size_t>(p)]});
    n_pages_ -= leaf->n_pages();
    Node* parent = leaf->parent;
    auto it = std::find_if(parent->children.begin(), parent->children.end(),
                           [&](const std::unique_ptr<Node>& c) { return c.get() == leaf; });
    parent->children.erase(it);  // frees leaf
    if (parent != root_.get() && parent->leaf() && parent->lock_ref == 0) heap.push(rank(parent));
  }
  return out;
}

std::vector<RadixTree::Evicted> RadixTree::erase_first_token_if(const std::function<bool(int32_t)>& pred,
                                                                int* n_kept) {
  std::vector<Evicted> out;
  int kept = 0;
  for (size_t i = 0; i < root_->tails.size();) {  // the prompts shorter than a page
    Tail* t = root_->tails[i].get();
    if (!pred(t->tokens.front())) {
      ++i;
    } else if (t->holds > 0) {
      ++kept;
      ++i;
    } else {
      out.push_back({t->page, PageKey{}, true});
      remove_tail(t);
    }
  }
  auto& top = root_->children;
  for (auto it = top.begin(); it != top.end();) {
    Node* sub = it->get();
    if (!pred(sub->tokens.front())) {
      ++it;
      continue;
    }
    std::vector<Node*> stack{sub}, nodes;
    bool locked = false;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      nodes.push_back(n);
      locked = locked || n->lock_ref > 0;  // a held tail locks its node too
      for (auto& c : n->children) stack.push_back(c.get());
    }
    if (locked) {
      ++kept;
      ++it;
      continue;
    }
    for (const Node* n : nodes) {
      for (int p = 0; p < n->n_pages(); ++p) out.push_back({n->pages[static_cast<size_t>(p)], n->keys[static_cast<size_t>(p)]});
      n_pages_ -= n->n_pages();
      for (const auto& t : n->tails) out.push_back({t->page, PageKey{}, true});
      n_pages_ -= static_cast<int>(n->tails.size());
      n_tails_ -= static_cast<int>(n->tails.size());
    }
    it = top.erase(it);  // frees the subtree
  }
  if (n_kept) *n_kept = kept;
  return out;
}

// ---- partly filled pages ----

RadixTree::Partial RadixTree::match_partial(NodeRef at, std::span<const int32_t> rest, int max_tokens, bool touch) {
  Partial best;
  Node* node = at ? at : root_.get();
  const int cap = std::min({max_tokens, static_cast<int>(rest.size()), page_size_ - 1});
  if (cap <= 0) return best;
  const auto common = [&](const int32_t* a, size_t n) {
    int k = 0;
    while (k < cap && static_cast<size_t>(k) < n && a[k] == rest[static_cast<size_t>(k)]) ++k;
    return k;
  };
  for (auto& t : node->tails) {
    const int k = common(t->tokens.data(), t->tokens.size());
    if (k > best.n_tokens) best = {k, t->page, nullptr, t.get()};
  }
  for (auto& c : node->children) {
    const int k = common(c->tokens.data(), static_cast<size_t>(page_size_));
    if (k > best.n_tokens) best = {k, c->pages.front(), c.get(), nullptr};
  }
  if (touch && best.tail) {
    best.tail->last_access = ++clock_;
    ++best.tail->hits;
  } else if (touch && best.node) {
    touch_path(best.node, INT_MIN, /*count_use=*/true);
  }
  return best;
}

bool RadixTree::insert_tail(NodeRef at, std::span<const int32_t> tokens, int32_t page, int priority,
                            std::vector<int32_t>& freed) {
  BRIGADE_CHECK(!tokens.empty() && static_cast<int>(tokens.size()) < page_size_, "a tail fills part of a page");
  Node* node = at ? at : root_.get();
  const auto begins = [&](const int32_t* a, size_t n) {  // a[0, n) begins with tokens
    return n >= tokens.size() && std::equal(tokens.begin(), tokens.end(), a);
  };
  for (auto& c : node->children)
    if (begins(c->tokens.data(), static_cast<size_t>(page_size_))) return false;
  for (auto& t : node->tails) {
    if (begins(t->tokens.data(), t->tokens.size())) {
      t->last_access = ++clock_;
      return false;
    }
  }
  drop_covered_tails(node, tokens, &freed);
  auto t = std::make_unique<Tail>();
  t->parent = node;
  t->tokens.assign(tokens.begin(), tokens.end());
  t->page = page;
  t->priority = priority;
  node->tails.push_back(std::move(t));
  ++n_tails_;
  ++n_pages_;
  if (node != root_.get()) touch_path(node, priority, /*count_use=*/false);
  node->tails.back()->last_access = ++clock_;
  return true;
}

void RadixTree::drop_covered_tails(Node* node, std::span<const int32_t> tokens, std::vector<int32_t>* freed) {
  for (size_t i = 0; i < node->tails.size();) {
    Tail* t = node->tails[i].get();
    const bool covered = t->holds == 0 && t->tokens.size() <= tokens.size() &&
                         std::equal(t->tokens.begin(), t->tokens.end(), tokens.begin());
    if (!covered) {
      ++i;
      continue;
    }
    freed->push_back(t->page);
    remove_tail(t);
  }
}

void RadixTree::remove_tail(Tail* tail) {
  BRIGADE_CHECK(tail->holds == 0, "a held tail stays");
  auto& tails = tail->parent->tails;
  auto it = std::find_if(tails.begin(), tails.end(), [&](const std::unique_ptr<Tail>& t) { return t.get() == tail; });
  BRIGADE_CHECK(it != tails.end(), "a tail is its node's");
  tails.erase(it);  // frees tail
  --n_tails_;
  --n_pages_;
}

void RadixTree::hold(const Partial& p) {
  if (p.tail) {
    if (p.tail->holds++ == 0) ++n_held_tails_;
    lock(p.tail->parent);  // its node stays too (a node with a tail is never a leaf)
  } else if (p.node) {
    lock(p.node);
  }
}

void RadixTree::release(const Partial& p) {
  if (p.tail) {
    BRIGADE_CHECK(p.tail->holds > 0, "release matches a hold");
    if (--p.tail->holds == 0) --n_held_tails_;
    unlock(p.tail->parent);
  } else if (p.node) {
    unlock(p.node);
  }
}

}  // namespace brigade
