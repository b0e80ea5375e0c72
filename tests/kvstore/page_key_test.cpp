#include "kvstore/page_key.h"

#include <gtest/gtest.h>

#include <vector>

namespace brigade {
namespace {

TEST(PageKey, EqualOnlyForTheSameModelAndTheSameTokensFromTheStart) {
  const PageKey a = root_key("model-a"), b = root_key("model-b");
  EXPECT_NE(a, b);
  const std::vector<int32_t> p1{1, 2, 3, 4}, p2{5, 6, 7, 8}, p2x{5, 6, 7, 9};
  const PageKey a1 = chain_key(a, p1);
  EXPECT_EQ(a1, chain_key(root_key("model-a"), p1));    // deterministic
  EXPECT_NE(a1, chain_key(b, p1));                      // another model
  EXPECT_NE(chain_key(a1, p2), chain_key(a1, p2x));     // one token differs
  EXPECT_NE(chain_key(a1, p2), chain_key(chain_key(a, p2), p2));  // another page before it
  EXPECT_NE(chain_key(a, p1), chain_key(a, std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(a1.hex().size(), 32u);
}

}  // namespace
}  // namespace brigade
