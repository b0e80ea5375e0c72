#include "kvstore/radix_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace brigade {
namespace {

constexpr int kPage = 4;
using Fate = RadixTree::PageFate;

std::vector<int32_t> seq(std::initializer_list<int32_t> pages_first_tokens) {
  // One page per value v: tokens v, v+1, v+2, v+3.
  std::vector<int32_t> out;
  for (int32_t v : pages_first_tokens)
    for (int k = 0; k < kPage; ++k) out.push_back(v + k);
  return out;
}

TEST(RadixTree, MatchesWholePagesOfTheLongestCachedPrefix) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  EXPECT_EQ(t.match(seq({10, 20}), 100).n_tokens, 0);
  RadixTree::NodeRef end = nullptr;
  auto fates = t.insert(seq({10, 20, 30}), std::vector<int32_t>{7, 8, 9}, 0, &end);
  EXPECT_EQ(fates, (std::vector<Fate>{Fate::taken, Fate::taken, Fate::taken}));
  EXPECT_EQ(t.n_pages(), 3);

  auto m = t.match(seq({10, 20, 30, 40}), 100);
  EXPECT_EQ(m.n_tokens, 12);
  EXPECT_EQ(m.pages, (std::vector<int32_t>{7, 8, 9}));
  // Keys are the hash chain from the model's root over each page's tokens.
  PageKey k = root_key("m");
  std::vector<PageKey> want;
  for (int32_t v : {10, 20, 30}) want.push_back(k = chain_key(k, seq({v})));
  EXPECT_EQ(m.keys, want);
  EXPECT_EQ(m.last_key, want.back());

  // A partial last page never matches; max_tokens caps the match at a page boundary.
  auto tokens = seq({10, 20, 30});
  tokens.pop_back();
  EXPECT_EQ(t.match(tokens, 100).n_tokens, 8);
  EXPECT_EQ(t.match(seq({10, 20, 30}), 11).n_tokens, 8);
  // A different second page diverges after the first.
  EXPECT_EQ(t.match(seq({10, 21, 30}), 100).pages, (std::vector<int32_t>{7}));
  // continue_keys extends the chain past a match.
  auto m1 = t.match(seq({10}), 100);
  EXPECT_EQ(t.continue_keys(m1, seq({10, 20, 30}), 3), (std::vector<PageKey>{want[1], want[2]}));
}

// A root per first token (LoRA adapters: the scheduler's salted first tokens): chains of prompts
// that start with a negative token start from their own root, in match, insert and continue_keys.
TEST(RadixTree, RootKeyOfTheFirstTokenStartsTheChain) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  const PageKey other = root_key("m|lora=x");
  t.set_root_key_of([&](int32_t first) { return first < 0 ? other : root_key("m"); });
  auto salted = seq({-100, 20});
  EXPECT_EQ(t.match(salted, 100).last_key, other) << "nothing matched: the chain's root";
  t.insert(salted, std::vector<int32_t>{1, 2}, 0, nullptr);
  t.insert(seq({10, 20}), std::vector<int32_t>{3, 4}, 0, nullptr);
  auto m = t.match(salted, 100);
  ASSERT_EQ(m.keys.size(), 2u);
  PageKey k = other;
  EXPECT_EQ(m.keys[0], k = chain_key(k, seq({-100})));
  EXPECT_EQ(m.keys[1], chain_key(k, seq({20})));
  EXPECT_EQ(t.match(seq({10, 20}), 100).keys[0], chain_key(root_key("m"), seq({10})));
  auto none = t.match(seq({-200}), 100);
  EXPECT_EQ(t.continue_keys(none, seq({-200}), 1), (std::vector<PageKey>{chain_key(other, seq({-200}))}));
}

// erase_first_token_if drops whole subtrees by their first token (an unloaded adapter's
// prefixes), except those a sequence holds locked; other prompts stay.
TEST(RadixTree, EraseFirstTokenIfDropsUnlockedSubtrees) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  t.insert(seq({-100, 20, 30}), std::vector<int32_t>{1, 2, 3}, 0, nullptr);
  t.insert(seq({-100, 21}), std::vector<int32_t>{1, 4}, 0, nullptr);
  RadixTree::NodeRef held = nullptr;
  t.insert(seq({-300, 20}), std::vector<int32_t>{5, 6}, 0, &held);
  t.lock(held);
  t.insert(seq({10, 20}), std::vector<int32_t>{7, 8}, 0, nullptr);
  ASSERT_EQ(t.n_pages(), 8);
  int kept = -1;
  auto gone = t.erase_first_token_if([](int32_t first) { return first < 0; }, &kept);
  std::vector<int32_t> pages;
  for (const auto& e : gone) pages.push_back(e.page);
  std::sort(pages.begin(), pages.end());
  EXPECT_EQ(pages, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(kept, 1) << "the locked subtree stays";
  EXPECT_EQ(t.n_pages(), 4);
  EXPECT_EQ(t.n_evicted(), 0u);
  EXPECT_EQ(t.match(seq({-100, 20}), 100).n_tokens, 0);
  EXPECT_EQ(t.match(seq({-300, 20}), 100).n_tokens, 8);
  EXPECT_EQ(t.match(seq({10, 20}), 100).n_tokens, 8);
  t.unlock(held);
  EXPECT_EQ(t.erase_first_token_if([](int32_t first) { return first == -300; }, &kept).size(), 2u);
  EXPECT_EQ(kept, 0);
  EXPECT_EQ(t.n_pages(), 2);
  EXPECT_EQ(t.n_evictable(), 2);
}

// A cache reset: every unlocked node goes, also the unlocked branches below a locked path's
// nodes; the locked path stays whole and matchable.
TEST(RadixTree, ClearUnlockedKeepsOnlyLockedPaths) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  RadixTree::NodeRef held = nullptr;
  t.insert(seq({1, 2, 3}), std::vector<int32_t>{10, 11, 12}, 0, &held);
  t.lock(held);
  t.insert(seq({1, 2, 4, 5}), std::vector<int32_t>{10, 11, 13, 14}, 0, nullptr);  // branches off the held path
  t.insert(seq({1, 6}), std::vector<int32_t>{10, 15}, 0, nullptr);
  t.insert(seq({7, 8}), std::vector<int32_t>{16, 17}, 0, nullptr);
  ASSERT_EQ(t.n_pages(), 8);
  auto gone = t.clear_unlocked();
  std::vector<int32_t> pages;
  for (const auto& e : gone) pages.push_back(e.page);
  std::sort(pages.begin(), pages.end());
  EXPECT_EQ(pages, (std::vector<int32_t>{13, 14, 15, 16, 17}));
  EXPECT_EQ(t.n_pages(), 3);
  EXPECT_EQ(t.n_evictable(), 0);
  EXPECT_EQ(t.n_evicted(), 0u) << "a reset is not counted as evictions";
  EXPECT_EQ(t.match(seq({1, 2, 3}), 100).n_tokens, 3 * kPage);
  EXPECT_EQ(t.match(seq({1, 2, 4, 5}), 100).n_tokens, 2 * kPage);
  EXPECT_EQ(t.match(seq({7, 8}), 100).n_tokens, 0);
  t.unlock(held);
  EXPECT_EQ(t.clear_unlocked().size(), 3u);
  EXPECT_EQ(t.n_pages(), 0);
  EXPECT_TRUE(t.clear_unlocked().empty());
}

TEST(RadixTree, InsertReportsPagesItTookAlreadyHadOrDuplicates) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  t.insert(seq({1, 2}), std::vector<int32_t>{100, 101}, 0, nullptr);
  // Same tokens: page 100 is the very page (from a match), 201 duplicates 101, 202 is new.
  auto fates = t.insert(seq({1, 2, 3}), std::vector<int32_t>{100, 201, 202}, 0, nullptr);
  EXPECT_EQ(fates, (std::vector<Fate>{Fate::same, Fate::duplicate, Fate::taken}));
  EXPECT_EQ(t.n_pages(), 3);
  // A branch: shares page 1, then differs.
  fates = t.insert(seq({1, 5}), std::vector<int32_t>{100, 300}, 0, nullptr);
  EXPECT_EQ(fates, (std::vector<Fate>{Fate::same, Fate::taken}));
  EXPECT_EQ(t.n_pages(), 4);
  EXPECT_EQ(t.match(seq({1, 2, 3}), 100).pages, (std::vector<int32_t>{100, 101, 202}));
  EXPECT_EQ(t.match(seq({1, 5}), 100).pages, (std::vector<int32_t>{100, 300}));
}

TEST(RadixTree, LockedPathsAreNeverEvictedAndSplitsKeepLocks) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  RadixTree::NodeRef a = nullptr;
  t.insert(seq({1, 2, 3, 4}), std::vector<int32_t>{1, 2, 3, 4}, 0, &a);
  t.lock(a);
  EXPECT_EQ(t.n_evictable(), 0);
  // Matching a prefix splits the locked edge; the lock still covers all four pages.
  auto m = t.match(seq({1, 2, 9}), 100);
  EXPECT_EQ(m.pages, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(t.n_evictable(), 0);
  EXPECT_TRUE(t.evict(10).empty());
  t.lock(m.node);
  t.unlock(a);
  EXPECT_EQ(t.n_evictable(), 2);  // pages 3, 4 are free to go; 1, 2 still locked by m
  auto gone = t.evict(10);
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[0].page, 3);
  EXPECT_EQ(gone[1].page, 4);
  EXPECT_EQ(t.n_pages(), 2);
  t.unlock(m.node);
  EXPECT_EQ(t.n_evictable(), 2);
  EXPECT_EQ(t.evict(1).size(), 2u);  // whole nodes go
  EXPECT_EQ(t.n_pages(), 0);
  EXPECT_EQ(t.match(seq({1}), 100).n_tokens, 0);
}

std::vector<int32_t> evict_order(EvictionPolicy policy) {
  RadixTree t(kPage, policy, root_key("m"));
  // Leaves under a shared first page: 2 (priority 5), 3 (priority 1), 4 (priority 3).
  t.insert(seq({1, 2}), std::vector<int32_t>{10, 20}, 5, nullptr);
  t.insert(seq({1, 3}), std::vector<int32_t>{10, 30}, 1, nullptr);
  t.insert(seq({1, 4}), std::vector<int32_t>{10, 40}, 3, nullptr);
  // Uses after insertion: leaf 2 twice, leaf 4 once, leaf 3 not at all (but 3 is newer than 2).
  t.match(seq({1, 2}), 100);
  t.match(seq({1, 2}), 100);
  t.match(seq({1, 4}), 100);
  std::vector<int32_t> order;
  for (int i = 0; i < 4; ++i)
    for (const auto& e : t.evict(1)) order.push_back(e.page);
  return order;
}

TEST(RadixTree, LfuCountsUsesNotTheReinsertsOfAGrowingSequence) {
  // One sequence grows page by page (an insert at each page boundary, as the scheduler does) to
  // 8 pages; another's single page is inserted once and matched twice. LFU must evict the long
  // sequence's pages (one use each) before the twice-matched page (three uses).
  RadixTree t(kPage, EvictionPolicy::lfu, root_key("m"));
  std::vector<int32_t> long_tokens, long_pages;
  RadixTree::NodeRef at = nullptr;
  for (int p = 0; p < 8; ++p) {
    const auto page = seq({100 + p});
    long_tokens.insert(long_tokens.end(), page.begin(), page.end());
    long_pages.push_back(100 + p);
    t.insert_from(at, long_tokens, long_pages, 0, &at);
  }
  t.insert(seq({7}), std::vector<int32_t>{7}, 0, nullptr);
  t.match(seq({7}), 100);
  t.match(seq({7}), 100);
  std::vector<int32_t> order;
  for (int i = 0; i < 9; ++i)
    for (const auto& e : t.evict(1)) order.push_back(e.page);
  ASSERT_EQ(order.size(), 9u);
  EXPECT_EQ(order.back(), 7) << "the twice-matched page outlives 8 pages used once";
}

TEST(RadixTree, EvictionFollowsThePolicyAndParentsGoLast) {
  EXPECT_EQ(evict_order(EvictionPolicy::lru), (std::vector<int32_t>{30, 20, 40, 10}));
  EXPECT_EQ(evict_order(EvictionPolicy::lfu), (std::vector<int32_t>{30, 40, 20, 10}));
  EXPECT_EQ(evict_order(EvictionPolicy::priority), (std::vector<int32_t>{30, 40, 20, 10}));
  EXPECT_EQ(parse_eviction_policy("lfu").value(), EvictionPolicy::lfu);
  EXPECT_FALSE(parse_eviction_policy("fifo").has_value());
}

// Against a brute-force model: the match is the longest whole-page prefix shared with anything
// inserted, and each page is the one the first inserter of that prefix brought.
TEST(RadixTree, RandomInsertsMatchABruteForceModel) {
  std::mt19937 rng(7);
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  std::map<std::vector<int32_t>, int32_t> owner;  // page-prefix tokens -> page id
  int32_t next_page = 0;
  for (int round = 0; round < 400; ++round) {
    const int n_pages = 1 + static_cast<int>(rng() % 6);
    std::vector<int32_t> tokens;
    for (int i = 0; i < n_pages * kPage; ++i) tokens.push_back(static_cast<int32_t>(rng() % 3));
    std::vector<int32_t> expect_pages;
    for (int p = 1; p <= n_pages; ++p) {
      auto it = owner.find(std::vector<int32_t>(tokens.begin(), tokens.begin() + p * kPage));
      if (it == owner.end()) break;
      expect_pages.push_back(it->second);
    }
    auto m = t.match(tokens, 1 << 20);
    ASSERT_EQ(m.pages, expect_pages) << "round " << round;
    if (rng() % 2) {
      std::vector<int32_t> pages(m.pages);
      while (static_cast<int>(pages.size()) < n_pages) pages.push_back(next_page++);
      auto fates = t.insert(tokens, pages, 0, nullptr);
      for (int p = 0; p < n_pages; ++p) {
        const bool had = p < static_cast<int>(m.pages.size());
        EXPECT_EQ(fates[static_cast<size_t>(p)], had ? Fate::same : Fate::taken);
        owner.emplace(std::vector<int32_t>(tokens.begin(), tokens.begin() + (p + 1) * kPage),
                      pages[static_cast<size_t>(p)]);
      }
    }
  }
  EXPECT_EQ(t.n_pages(), static_cast<int>(owner.size()));
  EXPECT_EQ(static_cast<int>(t.evict(1 << 20).size()), static_cast<int>(owner.size()));
  EXPECT_EQ(t.n_pages(), 0);
}

// A growing sequence inserts from the node it holds locked (insert_from + move_lock) instead of
// from the root (insert + lock + unlock): over a random workload of sequences that share
// prefixes, grow page by page, end, and meet evictions, both trees reach the same nodes, give the
// same fates and keys, and evict the same pages in the same order (same recency, hits, priority).
TEST(RadixTree, InsertFromTheLockedNodeIsAnInsertFromTheRoot) {
  struct Live {
    std::vector<int32_t> tokens, pages;
    RadixTree::NodeRef in_root = nullptr, in_from = nullptr;  // locked node in each tree
    int family = 0, diverge = 0, priority = 0;
  };
  for (EvictionPolicy policy : {EvictionPolicy::lru, EvictionPolicy::lfu, EvictionPolicy::priority}) {
    SCOPED_TRACE(eviction_policy_name(policy));
    std::mt19937 rng(11);
    RadixTree by_root(kPage, policy, root_key("m")), by_from(kPage, policy, root_key("m"));
    std::vector<Live> live;
    int32_t next_page = 0;
    int next_unique = 0;
    std::map<Fate, int> n_fates;  // the workload must meet every fate, splits and evictions
    size_t n_evicted = 0;
    // Appends a page's tokens: the family's before the sequence's divergence page, unique after.
    auto add_tokens = [&](Live& q) {
      const int p = static_cast<int>(q.tokens.size()) / kPage;
      const int base = p < q.diverge ? q.family * 1000 + p * 10 : 100000 + next_unique++ * 1000 + p * 10;
      for (int k = 0; k < kPage; ++k) q.tokens.push_back(base + k);
    };
    for (int round = 0; round < 3000; ++round) {
      const unsigned op = rng() % 10;
      if (op < 2 && live.size() < 6) {  // admit: match, lock, and take own pages past the match
        Live q;
        q.family = static_cast<int>(rng() % 3);
        q.diverge = static_cast<int>(rng() % 10);
        q.priority = static_cast<int>(rng() % 4);
        const int n_prompt = 1 + static_cast<int>(rng() % 8);
        for (int p = 0; p < n_prompt; ++p) add_tokens(q);
        const auto a = by_root.match(q.tokens, static_cast<int>(q.tokens.size()));
        const auto b = by_from.match(q.tokens, static_cast<int>(q.tokens.size()));
        ASSERT_EQ(a.n_tokens, b.n_tokens);
        ASSERT_EQ(a.pages, b.pages);
        ASSERT_EQ(a.keys, b.keys);
        by_root.lock(a.node);
        by_from.lock(b.node);
        q.in_root = a.node;
        q.in_from = b.node;
        q.pages = a.pages;
        while (static_cast<int>(q.pages.size()) < n_prompt) q.pages.push_back(next_page++);
        live.push_back(std::move(q));
      } else if (op < 8 && !live.empty()) {  // grow by 0-3 pages and insert what is computed
        Live& q = live[rng() % live.size()];
        for (int g = static_cast<int>(rng() % 4); g > 0; --g) {
          add_tokens(q);
          q.pages.push_back(next_page++);
        }
        const int n = 1 + static_cast<int>(rng() % q.pages.size());  // computed pages
        if (n < by_from.depth(q.in_from)) continue;
        std::span<const int32_t> tokens(q.tokens.data(), static_cast<size_t>(n * kPage));
        std::span<const int32_t> pages(q.pages.data(), static_cast<size_t>(n));
        RadixTree::NodeRef end_root = nullptr, end_from = nullptr;
        const auto all = by_root.insert(tokens, pages, q.priority, &end_root);
        const auto tail = by_from.insert_from(q.in_from, tokens, pages, q.priority, &end_from);
        const int from_depth = by_from.depth(q.in_from);
        ASSERT_EQ(std::vector<Fate>(all.begin() + from_depth, all.end()), tail) << "round " << round;
        for (Fate f : all) ++n_fates[f];  // `same`: the matched pages insert_from skips
        ASSERT_EQ(by_from.depth(end_from), n);
        const auto keys = by_root.path_keys(end_root);
        ASSERT_EQ(by_from.path_keys(end_from), keys);
        ASSERT_EQ(by_from.path_keys(end_from, q.in_from), std::vector<PageKey>(keys.begin() + from_depth, keys.end()));
        by_root.lock(end_root);
        by_root.unlock(q.in_root);
        by_from.move_lock(q.in_from, end_from);
        q.in_root = end_root;
        q.in_from = end_from;
      } else if (op == 8 && !live.empty()) {  // end
        const size_t i = rng() % live.size();
        by_root.unlock(live[i].in_root);
        by_from.unlock(live[i].in_from);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (op == 9) {  // make room
        const int n = 1 + static_cast<int>(rng() % 6);
        const auto a = by_root.evict(n), b = by_from.evict(n);
        ASSERT_EQ(a.size(), b.size());
        n_evicted += a.size();
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_EQ(a[i].page, b[i].page) << "round " << round;
          ASSERT_EQ(a[i].key, b[i].key);
        }
      }
      ASSERT_EQ(by_root.n_pages(), by_from.n_pages());
      ASSERT_EQ(by_root.n_evictable(), by_from.n_evictable()) << "round " << round;
    }
    for (const Live& q : live) {
      by_root.unlock(q.in_root);
      by_from.unlock(q.in_from);
    }
    const auto a = by_root.evict(1 << 20), b = by_from.evict(1 << 20);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].page, b[i].page);
    EXPECT_GT(a.size(), 20u) << "the workload left a tree worth comparing";
    EXPECT_GT(n_evicted, 100u);
    for (Fate f : {Fate::taken, Fate::same, Fate::duplicate}) EXPECT_GT(n_fates[f], 50) << static_cast<int>(f);
  }
}

// ---- partly filled pages (tails) ----

std::vector<int32_t> cat(std::vector<int32_t> a, std::initializer_list<int32_t> b) {
  a.insert(a.end(), b);
  return a;
}

// A tail continues the whole-page match it hangs from; the run is the common prefix with the
// next tokens, capped by max_tokens and below a page.
TEST(RadixTree, ATailContinuesTheMatchOfItsNode) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  RadixTree::NodeRef end = nullptr;
  t.insert(seq({10, 20}), std::vector<int32_t>{1, 2}, 0, &end);
  std::vector<int32_t> freed;
  ASSERT_TRUE(t.insert_tail(end, std::vector<int32_t>{30, 31, 32}, 9, 0, freed));
  EXPECT_TRUE(freed.empty());
  EXPECT_EQ(t.n_pages(), 3);
  EXPECT_EQ(t.n_tails(), 1);

  const auto prompt = cat(seq({10, 20}), {30, 31, 32, 33, 34});
  auto m = t.match(prompt, 100);
  ASSERT_EQ(m.n_tokens, 8);
  const std::span<const int32_t> rest(prompt.data() + 8, prompt.size() - 8);
  auto p = t.match_partial(m.node, rest, 100);
  EXPECT_EQ(p.n_tokens, 3);
  EXPECT_EQ(p.page, 9);
  EXPECT_NE(p.tail, nullptr);
  EXPECT_EQ(t.match_partial(m.node, rest, 2).n_tokens, 2) << "max_tokens caps the run";
  const std::vector<int32_t> diverging{30, 99};
  EXPECT_EQ(t.match_partial(m.node, diverging, 100).n_tokens, 1);
  EXPECT_EQ(t.match_partial(m.node, std::vector<int32_t>{99}, 100).n_tokens, 0);
  EXPECT_EQ(t.match_partial(nullptr, rest, 100).n_tokens, 0) << "a tail continues its own node only";
  // A prompt shorter than a page: tails of the root.
  ASSERT_TRUE(t.insert_tail(nullptr, std::vector<int32_t>{70, 71}, 5, 0, freed));
  EXPECT_EQ(t.match_partial(nullptr, std::vector<int32_t>{70, 71}, 100).page, 5);
}

// The first page of a child serves a prompt that diverges inside it, or ends in it (the last
// token is always computed, so a whole cached prompt's last page is matched partly).
TEST(RadixTree, AChildsFirstPageServesAPromptThatDivergesOrEndsInIt) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  t.insert(seq({10, 20, 30}), std::vector<int32_t>{1, 2, 3}, 0, nullptr);
  const auto prompt = cat(seq({10}), {20, 21, 99});
  auto m = t.match(prompt, 100);
  ASSERT_EQ(m.n_tokens, 4);
  auto p = t.match_partial(m.node, std::span<const int32_t>(prompt).subspan(4), 100);
  EXPECT_EQ(p.n_tokens, 2);
  EXPECT_EQ(p.page, 2);
  EXPECT_NE(p.node, nullptr);
  EXPECT_EQ(p.tail, nullptr);
  // The whole cached prompt, capped one token short: two pages and three rows of the third.
  const auto whole = seq({10, 20, 30});
  m = t.match(whole, 11);
  ASSERT_EQ(m.n_tokens, 8);
  p = t.match_partial(m.node, std::span<const int32_t>(whole).subspan(8), 11 - 8);
  EXPECT_EQ(p.n_tokens, 3);
  EXPECT_EQ(p.page, 3);
}

// A tail is offered once: tokens a tail or a child already begins with are refused (the caller
// frees its page), and a longer tail replaces the shorter ones it covers, which come back.
TEST(RadixTree, InsertTailKeepsOnlyTheLongestOfCoveringTails) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  RadixTree::NodeRef end = nullptr;
  t.insert(seq({10, 20}), std::vector<int32_t>{1, 2}, 0, &end);
  std::vector<int32_t> freed;
  ASSERT_TRUE(t.insert_tail(end, std::vector<int32_t>{30}, 5, 0, freed));
  ASSERT_TRUE(t.insert_tail(end, std::vector<int32_t>{40, 41}, 6, 0, freed));
  ASSERT_TRUE(t.insert_tail(end, std::vector<int32_t>{30, 31, 32}, 7, 0, freed));
  EXPECT_EQ(freed, (std::vector<int32_t>{5})) << "{30} is the start of {30, 31, 32}";
  EXPECT_EQ(t.n_tails(), 2);
  EXPECT_EQ(t.n_pages(), 4);
  freed.clear();
  EXPECT_FALSE(t.insert_tail(end, std::vector<int32_t>{30, 31}, 8, 0, freed)) << "covered by {30, 31, 32}";
  EXPECT_FALSE(t.insert_tail(nullptr, std::vector<int32_t>{10, 11}, 8, 0, freed)) << "covered by the child's first page";
  EXPECT_TRUE(freed.empty());
  // A whole page inserted after the node covers the tails it begins with.
  t.insert(cat(seq({10, 20}), {30, 31, 32, 33}), std::vector<int32_t>{1, 2, 10}, 0, nullptr, &freed);
  EXPECT_EQ(freed, (std::vector<int32_t>{7}));
  EXPECT_EQ(t.n_tails(), 1);
  EXPECT_EQ(t.n_pages(), 4);
}

// Tails are evicted by the policy like leaves; a held tail stays (and keeps its node), and its
// node becomes a leaf once its tails are gone.
TEST(RadixTree, TailsAreEvictedLikeLeavesUnlessHeld) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  RadixTree::NodeRef a = nullptr, b = nullptr;
  t.insert(seq({10}), std::vector<int32_t>{1}, 0, &a);
  t.insert(seq({50}), std::vector<int32_t>{2}, 0, &b);
  std::vector<int32_t> freed;
  ASSERT_TRUE(t.insert_tail(a, std::vector<int32_t>{20}, 3, 0, freed));
  ASSERT_TRUE(t.insert_tail(b, std::vector<int32_t>{60}, 4, 0, freed));
  EXPECT_EQ(t.n_evictable(), 4);
  // Oldest first: the tail of a, then a (a leaf now), then b's tail, then b.
  auto gone = t.evict(1);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].page, 3);
  EXPECT_TRUE(gone[0].partial);
  gone = t.evict(1);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].page, 1);
  EXPECT_FALSE(gone[0].partial);

  const std::vector<int32_t> rest{60, 61};
  auto m = t.match(seq({50}), 100);
  auto p = t.match_partial(m.node, rest, 100);
  ASSERT_EQ(p.page, 4);
  t.hold(p);
  EXPECT_EQ(t.n_evictable(), 0) << "the held tail and its node";
  EXPECT_TRUE(t.evict(2).empty());
  EXPECT_TRUE(t.clear_unlocked().empty());
  t.release(p);
  EXPECT_EQ(t.n_evictable(), 2);
  gone = t.clear_unlocked();
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(t.n_pages(), 0);
  EXPECT_EQ(t.n_tails(), 0);
}

// Holding a child's page locks the child: it stays while a copy from it is pending.
TEST(RadixTree, HoldingAChildsPageLocksIt) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  t.insert(seq({10, 20}), std::vector<int32_t>{1, 2}, 0, nullptr);
  const std::vector<int32_t> rest{10, 11};
  auto p = t.match_partial(nullptr, rest, 100);
  ASSERT_EQ(p.page, 1);
  t.hold(p);
  EXPECT_EQ(t.n_evictable(), 0);
  EXPECT_TRUE(t.evict(2).empty());
  t.release(p);
  EXPECT_EQ(t.evict(2).size(), 2u);
}

// An unloaded adapter's prefixes go with their tails, the root's included; held ones stay.
TEST(RadixTree, EraseFirstTokenIfTakesTheTails) {
  RadixTree t(kPage, EvictionPolicy::lru, root_key("m"));
  RadixTree::NodeRef end = nullptr;
  t.insert(seq({-100}), std::vector<int32_t>{1}, 0, &end);
  std::vector<int32_t> freed;
  ASSERT_TRUE(t.insert_tail(end, std::vector<int32_t>{20}, 2, 0, freed));
  ASSERT_TRUE(t.insert_tail(nullptr, std::vector<int32_t>{-200, 5}, 3, 0, freed));
  ASSERT_TRUE(t.insert_tail(nullptr, std::vector<int32_t>{-300}, 4, 0, freed));
  ASSERT_TRUE(t.insert_tail(nullptr, std::vector<int32_t>{7}, 5, 0, freed));
  auto held = t.match_partial(nullptr, std::vector<int32_t>{-300}, 100);
  ASSERT_EQ(held.page, 4);
  t.hold(held);
  int kept = 0;
  auto gone = t.erase_first_token_if([](int32_t first) { return first < 0; }, &kept);
  std::vector<int32_t> pages;
  for (const auto& e : gone) pages.push_back(e.page);
  std::sort(pages.begin(), pages.end());
  EXPECT_EQ(pages, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(kept, 1);
  EXPECT_EQ(t.n_pages(), 2);
  EXPECT_EQ(t.n_tails(), 2);
  t.release(held);
}

}  // namespace
}  // namespace brigade
