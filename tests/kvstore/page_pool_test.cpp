#include "kvstore/page_pool.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace brigade {
namespace {

TEST(PagePool, AllocatesAllOrNothing) {
  PagePool pool(4);
  auto a = pool.allocate(3);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size(), 3u);
  EXPECT_EQ(pool.n_free(), 1);
  auto b = pool.allocate(2);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.status().code(), StatusCode::out_of_resources);
  EXPECT_NE(b.status().message().find("2 pages requested, 1 of 4 free"), std::string::npos)
      << b.status().message();
  EXPECT_EQ(pool.n_free(), 1) << "a failed allocation takes nothing";
}

TEST(PagePool, DistinctPagesAndRefCounts) {
  PagePool pool(8);
  auto a = pool.allocate(8);
  ASSERT_TRUE(a.has_value());
  auto ids = *a;
  std::sort(ids.begin(), ids.end());
  EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), 7);

  std::vector<int32_t> shared = {ids[0], ids[1]};
  pool.ref(shared);
  EXPECT_EQ(pool.ref_count(ids[0]), 2);
  pool.unref(*a);
  EXPECT_EQ(pool.n_free(), 6) << "shared pages stay in use until their last reference goes";
  pool.unref(shared);
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_TRUE(pool.allocate(8).has_value());
}

TEST(PagePool, NegativeRequestIsAnError) {
  PagePool pool(2);
  EXPECT_EQ(pool.allocate(-1).status().code(), StatusCode::invalid_argument);
}

TEST(BlockTable, SlotsFollowPages) {
  BlockTable bt(16);
  EXPECT_EQ(bt.pages_needed(1), 1);
  EXPECT_EQ(bt.pages_needed(33), 3);
  std::vector<int32_t> pages = {5, 2};
  bt.append(pages);
  EXPECT_EQ(bt.capacity(), 32);
  EXPECT_EQ(bt.pages_needed(32), 0);
  EXPECT_EQ(bt.pages_needed(33), 1);
  EXPECT_EQ(bt.slot(0), 5 * 16);
  EXPECT_EQ(bt.slot(17), 2 * 16 + 1);
  auto taken = bt.take_all();
  EXPECT_EQ(taken, pages);
  EXPECT_EQ(bt.n_pages(), 0);
}

}  // namespace
}  // namespace brigade
