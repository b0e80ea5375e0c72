// Decode steps padded to batch-size buckets (actors/executor/step_buckets.h).
#include "actors/executor/step_buckets.h"

#include <gtest/gtest.h>

namespace brigade {
namespace {

const std::vector<int> kBuckets = {1, 2, 4, 8, 16};

// n single-token sequences; sequence s has s + 1 pages (page ids 10 s ...), 16 tokens a page.
StepBatch decode_batch(int n) {
  StepBatch b;
  b.max_blocks = n;
  b.q_start.push_back(0);
  for (int s = 0; s < n; ++s) {
    b.tokens.push_back(100 + s);
    b.positions.push_back(16 * s + 3);
    b.slots.push_back(160 * s + 16 * s + 3);
    b.q_start.push_back(s + 1);
    b.ctx_len.push_back(16 * s + 4);
    for (int p = 0; p < n; ++p) b.block_table.push_back(p <= s ? 10 * s + p : 0);
    b.logit_rows.push_back(s);
  }
  return b;
}

TEST(StepBuckets, PicksTheSmallestBucketThatHoldsADecodeStep) {
  EXPECT_EQ(pick_bucket(decode_batch(1), kBuckets, 64)->rows, 1);
  EXPECT_EQ(pick_bucket(decode_batch(3), kBuckets, 64)->rows, 4);
  EXPECT_EQ(pick_bucket(decode_batch(9), kBuckets, 64)->rows, 16);
  EXPECT_EQ(pick_bucket(decode_batch(3), kBuckets, 64)->width, 16) << "widths start at 16 pages";
  EXPECT_FALSE(pick_bucket(decode_batch(17), kBuckets, 64)) << "larger than the largest bucket: eager";
  EXPECT_FALSE(pick_bucket(decode_batch(9), kBuckets, 12)) << "the bucket exceeds max_batch_tokens";
  StepBatch prefill = decode_batch(2);
  prefill.tokens.push_back(7);  // the second sequence now has two tokens
  prefill.positions.push_back(20);
  prefill.slots.push_back(1);
  prefill.q_start.back() = 3;
  EXPECT_FALSE(pick_bucket(prefill, kBuckets, 64)) << "a prefill chunk runs eagerly";
  EXPECT_FALSE(pick_bucket(StepBatch{}, kBuckets, 64));
}

TEST(StepBuckets, WidthIsAPowerOfTwoAtLeastTheLongestBlockTable) {
  StepBatch b = decode_batch(2);
  b.max_blocks = 17;
  b.block_table.assign(2 * 17, 1);
  EXPECT_EQ(pick_bucket(b, kBuckets, 64)->width, 32);
  b.max_blocks = 32;
  b.block_table.assign(2 * 32, 1);
  EXPECT_EQ(pick_bucket(b, kBuckets, 64)->width, 32);
  EXPECT_NE(StepBucket({4, 16}).key(false), StepBucket({4, 32}).key(false));
  EXPECT_NE(StepBucket({4, 16}).key(false), StepBucket({4, 16}).key(true));
  EXPECT_NE(StepBucket({4, 16}).key(false), StepBucket({8, 16}).key(false));
}

TEST(StepBuckets, PaddingAppendsInertSequencesAndKeepsTheRealOnes) {
  const StepBatch real = decode_batch(3);
  StepBatch b = real;
  b.logit_rows = {0, 2};  // the second sequence does not sample
  std::vector<int32_t> feed = {5, -1, 7};
  const StepBucket bucket = *pick_bucket(b, kBuckets, 64);
  pad_to_bucket(b, bucket, feed);
  ASSERT_EQ(b.n_seqs(), 4);
  ASSERT_EQ(b.n_tokens(), 4);
  EXPECT_EQ(b.max_blocks, 16);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(b.tokens[s], real.tokens[s]);
    EXPECT_EQ(b.positions[s], real.positions[s]);
    EXPECT_EQ(b.slots[s], real.slots[s]);
    EXPECT_EQ(b.ctx_len[s], real.ctx_len[s]);
    for (int p = 0; p < 16; ++p)
      EXPECT_EQ(b.block_table[static_cast<size_t>(s * 16 + p)], p < 3 ? real.block_table[static_cast<size_t>(s * 3 + p)] : 0);
  }
  EXPECT_EQ(b.tokens[3], 0);
  EXPECT_EQ(b.positions[3], 0);
  EXPECT_EQ(b.slots[3], -1) << "write_kv skips the padding row";
  EXPECT_EQ(b.ctx_len[3], 1);
  EXPECT_EQ(b.q_start, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(feed, (std::vector<int32_t>{5, -1, 7, -1}));
  EXPECT_EQ(b.logit_rows, (std::vector<int32_t>{0, 2, 3, 3})) << "real rows first, then padding rows";
}

}  // namespace
}  // namespace brigade
