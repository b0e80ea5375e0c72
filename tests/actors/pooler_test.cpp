// Pooler (actors/executor/pooler.h): which hidden rows each pooling chunk asks for, the running
// sum that makes chunked mean pooling the one-chunk sum, and the chunks it refuses.
#include <gtest/gtest.h>

#include "actors/executor/pooler.h"

namespace brigade {
namespace {

SeqWorkItem chunk(uint64_t seq, Pooling p, int start, int n, int prompt_len) {
  SeqWorkItem w;
  w.seq_id = seq;
  w.pooling = p;
  w.start_pos = start;
  w.prompt_len = prompt_len;
  w.tokens.assign(static_cast<size_t>(n), 5);
  return w;
}

// Hidden row of prompt position q: [q, 2q + 1, 0.25 q^2] (distinct per position).
std::vector<float> row_of(int q) { return {static_cast<float>(q), 2.0f * q + 1.0f, 0.25f * q * q}; }

// Runs one step of chunks through the pooler (their positions as the hidden rows).
std::vector<PooledEmbedding> step(Pooler& p, const std::vector<SeqWorkItem>& items) {
  std::vector<int32_t> q_start = {0}, rows, pos;
  for (const auto& w : items) {
    for (int j = 0; j < static_cast<int>(w.tokens.size()); ++j) pos.push_back(w.start_pos + j);
    q_start.push_back(static_cast<int32_t>(pos.size()));
  }
  EXPECT_TRUE(p.plan(items, q_start, rows).is_ok());
  std::vector<float> buf;
  return p.collect([&](int r) {
    buf = row_of(pos[static_cast<size_t>(rows[static_cast<size_t>(r)])]);
    return std::span<const float>(buf);
  });
}

TEST(Pooler, ChunkedMeanIsTheMeanOfEveryPosition) {
  Pooler whole, chunked;
  const auto a = step(whole, {chunk(1, Pooling::mean, 0, 10, 10)});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(step(chunked, {chunk(1, Pooling::mean, 0, 3, 10)}).empty());
  EXPECT_TRUE(step(chunked, {chunk(1, Pooling::mean, 3, 4, 10)}).empty());
  const auto b = step(chunked, {chunk(1, Pooling::mean, 7, 3, 10)});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].values, b[0].values) << "the same rows summed in the same order";
  EXPECT_FLOAT_EQ(a[0].values[0], 4.5f);  // mean of 0..9
  EXPECT_FLOAT_EQ(a[0].values[2], 0.25f * 28.5f);  // mean of q^2 over 0..9 is 28.5
  EXPECT_EQ(chunked.n_tracked(), 0u) << "a finished sequence leaves nothing behind";
}

TEST(Pooler, LastAndClsTakeOneRowEach) {
  Pooler p;
  // cls keeps row 0 across chunks; last asks only in its final chunk, even after a cached prefix.
  EXPECT_TRUE(step(p, {chunk(1, Pooling::cls, 0, 4, 9), chunk(2, Pooling::last, 16, 4, 24)}).empty());
  const auto out = step(p, {chunk(1, Pooling::cls, 4, 5, 9), chunk(2, Pooling::last, 20, 4, 24)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].values, row_of(0));
  EXPECT_EQ(out[1].values, row_of(23));
}

TEST(Pooler, RefusesChunksThatCannotPool) {
  Pooler p;
  std::vector<int32_t> rows;
  const std::vector<int32_t> q = {0, 4};
  SeqWorkItem sampling = chunk(1, Pooling::last, 0, 4, 4);
  sampling.sample = true;
  EXPECT_FALSE(p.plan(std::vector{sampling}, q, rows).is_ok());
  EXPECT_FALSE(p.plan(std::vector{chunk(1, Pooling::last, 0, 4, 3)}, q, rows).is_ok()) << "past the prompt";
  // mean from the middle of a prompt it has not seen (a cached prefix) is refused.
  const Status st = p.plan(std::vector{chunk(1, Pooling::mean, 8, 4, 16)}, q, rows);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("position 0"), std::string::npos) << st.message();
  EXPECT_TRUE(rows.empty()) << "a refused plan asks for no rows";
  // Preempted and restarted from 0: the old sum is released, the new one starts over.
  step(p, {chunk(3, Pooling::mean, 0, 2, 4)});
  p.release(std::vector<uint64_t>{3});
  EXPECT_FALSE(p.plan(std::vector{chunk(3, Pooling::mean, 2, 2, 4)}, q, rows).is_ok());
  const auto again = step(p, {chunk(3, Pooling::mean, 0, 4, 4)});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FLOAT_EQ(again[0].values[0], 1.5f);
}

}  // namespace
}  // namespace brigade
