// RadixTree: the prefix cache of one KV pool (DESIGN.md §5), a radix tree over token ids at page
// granularity. Each edge holds whole pages: a run of tokens (a multiple of page_size) and the ids
// of the pages holding their KV, plus each page's PageKey (the hash chain that names its content
// in the lower tiers). A page in the tree is owned by the tree: no sequence writes into it, and it
// returns to the pool only when evicted.
//
// Partly filled pages (tails): a sequence that ends leaves its last page with 0 < n < page_size
// tokens computed; the tree may keep it as a tail of the node where the sequence's whole pages end.
// A later prompt that continues that node's path matches whole pages as usual, then the longest
// common run of its next tokens with a tail or with the first page of a child (match_partial): the
// caller copies those leading rows of that page into a page of its own (copy-on-write: a tail is
// never written again) instead of computing them. A tail is evictable unless held (hold()), even
// while a sequence locks its node; a node with tails is not a leaf.
//
// Sequences that use cached pages lock the node where their cached prefix ends; a lock holds every
// node on the path to the root. Unlocked leaves are evicted by the configured policy: LRU (least
// recently matched or inserted first, the default), LFU (fewest uses first, then LRU; a node's
// uses are the sequence that computed it and every match, not the re-inserts of a growing
// sequence), or priority-aware (lowest request priority first, then LRU).
//
// Plain class, no threads: one owner (the scheduler).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kvstore/page_key.h"

namespace brigade {

enum class EvictionPolicy : uint8_t { lru, lfu, priority };
Expected<EvictionPolicy> parse_eviction_policy(const std::string& name);
const char* eviction_policy_name(EvictionPolicy p);

class RadixTree {
 public:
  struct Node;
  struct Tail;
  // Where a matched or inserted prefix ends; nullptr is the root (the empty prefix).
  using NodeRef = Node*;

  struct Match {
    int n_tokens = 0;              // cached tokens (a multiple of page_size)
    std::vector<int32_t> pages;    // their pages, in order
    std::vector<PageKey> keys;     // their keys, in order
    NodeRef node = nullptr;        // lock this while the pages are in use
    PageKey last_key;              // key of the last matched page (the root key when none)
  };
  // The leading rows of one cached page that continue a match (match_partial): rows [0, n_tokens)
  // of `page` hold the KV of the next n_tokens tokens. Hold it (hold()) until the rows are copied.
  struct Partial {
    int n_tokens = 0;  // 0: nothing continues the match
    int32_t page = -1;
    Node* node = nullptr;  // the child whose first page it is, or
    Tail* tail = nullptr;  // the tail it is
  };
  struct Evicted {
    int32_t page = 0;
    PageKey key;
    bool partial = false;  // a tail: no key, nothing for the lower tiers
  };
  enum class PageFate : uint8_t {
    taken,      // the tree took the caller's page: it is the tree's now
    same,       // the tree already held this very page (the caller had it from a match)
    duplicate,  // the tree holds the same tokens in another page: the caller keeps (and frees) its own
  };

  RadixTree(int page_size, EvictionPolicy policy, PageKey root);
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Where a prompt's hash chain starts, by its first token: the tree's root key unless set. The
  // scheduler roots each LoRA adapter's prompts (first token salted by the adapter) in a key of
  // the adapter's identity, so the lower tiers never give one adapter's pages to another, even
  // across restarts or when a slot is reloaded with another adapter.
  using RootKeyOf = std::function<PageKey(int32_t first_token)>;
  void set_root_key_of(RootKeyOf f) { root_key_of_ = std::move(f); }

  int page_size() const { return page_size_; }
  EvictionPolicy policy() const { return policy_; }
  const PageKey& root_key() const { return root_key_; }

  // The longest cached prefix of tokens[0, max_tokens), in whole pages. Counts as a use of the
  // matched nodes (recency, hits) when `touch`.
  Match match(std::span<const int32_t> tokens, int max_tokens, bool touch = true);
  // Inserts the whole pages of tokens[0, pages.size() * page_size) held in `pages`. The result
  // says, for each page, whether the tree took it, already had it, or holds a duplicate; `end`
  // is set to the node where the inserted prefix ends (lock it to keep the pages). `priority`
  // raises the nodes' priority for the priority-aware policy.
  std::vector<PageFate> insert(std::span<const int32_t> tokens, std::span<const int32_t> pages, int priority,
                               NodeRef* end, std::vector<int32_t>* freed = nullptr);
  // insert() for tokens whose leading pages the tree already holds up to `from`: a node where an
  // earlier match or insert of the same tokens ended (nullptr: the root), which the caller has kept
  // locked since. Only pages [depth(from), pages.size()) are walked and the fates are theirs; the
  // tree ends exactly as insert() from the root leaves it (a growing sequence inserts each new page
  // without re-walking its whole path).
  // Tails that a new child's first page makes redundant (their tokens begin it) leave the tree and
  // their pages are appended to *freed when given (the caller frees them), unless held.
  std::vector<PageFate> insert_from(NodeRef from, std::span<const int32_t> tokens, std::span<const int32_t> pages,
                                    int priority, NodeRef* end, std::vector<int32_t>* freed = nullptr);

  // ---- partly filled pages (tails; the class comment) ----
  // The longest run, at most max_tokens (< page_size), of `rest` (the tokens after node's path)
  // that a tail of node or the first page of one of its children starts with; ties go to a tail.
  // Counts as a use (recency, hits) when `touch`. n_tokens 0 when nothing continues.
  Partial match_partial(NodeRef node, std::span<const int32_t> rest, int max_tokens, bool touch = true);
  // Offers `page`, whose first tokens.size() rows (0 < size < page_size) hold the KV of `tokens`,
  // the tokens after node's path, as a tail of node. Returns whether the tree took the page (else
  // the caller keeps and frees it: a tail or a child's first page already covers those tokens).
  // Tails it makes redundant (their tokens begin it) leave, their pages appended to *freed.
  bool insert_tail(NodeRef node, std::span<const int32_t> tokens, int32_t page, int priority,
                   std::vector<int32_t>& freed);
  // Keeps a match_partial's page from being evicted or dropped until release(): a child's node
  // is locked, a tail pinned.
  void hold(const Partial& p);
  void release(const Partial& p);
  int n_tails() const { return n_tails_; }
  // Pages on the path from the root to the end of node (0 for the root).
  int depth(NodeRef node) const;
  // Keys of the pages that would follow `m` for tokens (continuing its hash chain), for pages
  // [m.n_tokens / page_size, n_pages): what a lower tier is asked for.
  std::vector<PageKey> continue_keys(const Match& m, std::span<const int32_t> tokens, int n_pages) const;

  // Keys of the pages on the path from `from` (a node on it, exclusive; nullptr: the root) down to
  // node, in order: pages [depth(from), depth(node)).
  std::vector<PageKey> path_keys(NodeRef node, NodeRef from = nullptr) const;

  void lock(NodeRef node);
  void unlock(NodeRef node);
  // lock(to) then unlock(from), for `to` at or below `from`: walks only the nodes between them.
  void move_lock(NodeRef from, NodeRef to);

  // Evicts at least n pages if that many are evictable (whole unlocked leaves, by policy, a
  // parent becoming a leaf in turn); returns them with their keys, to free (or demote).
  std::vector<Evicted> evict(int n);
  // Removes every unlocked node (all that evict(n_evictable()) would take) and returns its pages
  // to free: a cache reset. A locked node and the path to it stay. Not counted as evictions.
  std::vector<Evicted> clear_unlocked();

  // Removes every subtree below the root whose first token satisfies `pred` (an unloaded LoRA
  // adapter's prefixes) and returns its pages to free. A subtree with a locked node (a sequence
  // still uses it) stays; *n_kept counts those subtrees when given. Not counted as evictions.
  std::vector<Evicted> erase_first_token_if(const std::function<bool(int32_t)>& pred, int* n_kept = nullptr);

  int n_pages() const { return n_pages_; }
  // Pages in unlocked nodes and unheld tails (what evict could free); n_pages counts tails too.
  int n_evictable() const { return n_pages_ - n_locked_pages_ - n_held_tails_; }
  uint64_t n_evicted() const { return n_evicted_; }

 private:
  std::vector<Evicted> take_leaves(int n);  // evict without the count
  Node* split(Node* node, int n_pages);  // node keeps its first n_pages; the rest moves to a child
  void touch_path(Node* node, int priority, bool count_use);
  bool page_equal(const int32_t* a, const int32_t* b) const;
  Node* find_child(Node* node, const int32_t* first_page) const;  // the child starting with that page
  PageKey root_for(std::span<const int32_t> tokens) const;

  int page_size_;
  EvictionPolicy policy_;
  PageKey root_key_;
  RootKeyOf root_key_of_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  // Removes node's unheld tails whose tokens begin `tokens` (n >= each tail's length), appending
  // their pages to freed.
  void drop_covered_tails(Node* node, std::span<const int32_t> tokens, std::vector<int32_t>* freed);
  void remove_tail(Tail* tail);  // frees it; the caller has its page
  int n_pages_ = 0;
  int n_locked_pages_ = 0;
  int n_tails_ = 0;
  int n_held_tails_ = 0;
  uint64_t n_evicted_ = 0;
};

}  // namespace brigade
