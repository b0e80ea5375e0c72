#include "kvstore/radix_tree.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace brigade
