#include "kvstore/host_tier.h"

#include <gtest/gtest.h>

namespace brigade {
namespace {

PageKey key(uint64_t i) { return PageKey{i, ~i}; }
PageBytes bytes(size_t n, uint8_t fill) { return PageBytes(n, std::byte{fill}); }

TEST(HostTier, PutGetAndCounters) {
  HostTier t(100);
  EXPECT_TRUE(t.put(key(1), bytes(40, 1)).empty());
  ASSERT_TRUE(t.contains(key(1)));
  auto hit = t.get(key(1));
  ASSERT_TRUE(hit.has_value());
  ASSERT_EQ(hit->size(), 40u);
  EXPECT_EQ((*hit)[39], std::byte{1});
  EXPECT_FALSE(t.get(key(2)).has_value());
  const HostTierStats s = t.stats();
  EXPECT_EQ(s.n_hits, 1u);
  EXPECT_EQ(s.n_misses, 1u);
  EXPECT_EQ(s.bytes_in, 40u);
  EXPECT_EQ(s.bytes_out, 40u);
  EXPECT_EQ(s.n_entries, 1u);
  EXPECT_EQ(s.bytes_used, 40u);
}

TEST(HostTier, EvictsLeastRecentlyUsedAndHandsThemBack) {
  HostTier t(100);
  (void)t.put(key(1), bytes(40, 1));
  (void)t.put(key(2), bytes(40, 2));
  ASSERT_TRUE(t.get(key(1)).has_value());  // key 2 is now the least recently used
  auto evicted = t.put(key(3), bytes(40, 3));
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, key(2));
  EXPECT_EQ(evicted[0].bytes, bytes(40, 2));
  EXPECT_TRUE(t.contains(key(1)));
  EXPECT_TRUE(t.contains(key(3)));
  EXPECT_FALSE(t.contains(key(2)));
  EXPECT_EQ(t.bytes_used(), 80u);
  EXPECT_EQ(t.stats().n_evictions, 1u);
  // A large page pushes out several, oldest first.
  evicted = t.put(key(4), bytes(100, 4));
  ASSERT_EQ(evicted.size(), 2u);
  EXPECT_EQ(evicted[0].key, key(1));
  EXPECT_EQ(evicted[1].key, key(3));
  EXPECT_EQ(t.n_entries(), 1u);
}

TEST(HostTier, ReplacingAKeyDoesNotDoubleCount) {
  HostTier t(100);
  (void)t.put(key(1), bytes(60, 1));
  EXPECT_TRUE(t.put(key(1), bytes(60, 9)).empty());
  EXPECT_EQ(t.bytes_used(), 60u);
  EXPECT_EQ((*t.get(key(1)))[0], std::byte{9});
}

TEST(HostTier, ZeroCapacityOrOversizedPageComesStraightBack) {
  HostTier off(0);
  auto evicted = off.put(key(1), bytes(10, 1));
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, key(1));
  EXPECT_EQ(evicted[0].bytes.size(), 10u);
  EXPECT_FALSE(off.contains(key(1)));
  HostTier small(50);
  (void)small.put(key(2), bytes(20, 2));
  evicted = small.put(key(3), bytes(51, 3));
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, key(3));
  EXPECT_TRUE(small.contains(key(2))) << "an oversized page evicts nothing";
}

TEST(HostTier, ClearDropsEveryPage) {
  HostTier t(100);
  (void)t.put(key(1), bytes(30, 1));
  (void)t.put(key(2), bytes(30, 2));
  EXPECT_EQ(t.clear(), 2u);
  EXPECT_EQ(t.bytes_used(), 0u);
  EXPECT_EQ(t.n_entries(), 0u);
  EXPECT_FALSE(t.get(key(2)).has_value());
  EXPECT_TRUE(t.put(key(3), bytes(100, 3)).empty()) << "the whole capacity is free again";
  EXPECT_EQ(t.clear(), 1u);
}

TEST(HostTier, Erase) {
  HostTier t(100);
  (void)t.put(key(1), bytes(30, 1));
  EXPECT_TRUE(t.erase(key(1)));
  EXPECT_FALSE(t.erase(key(1)));
  EXPECT_EQ(t.bytes_used(), 0u);
  EXPECT_FALSE(t.get(key(1)).has_value());
}

}  // namespace
}  // namespace brigade
