// The in-process communicator: sums, bf16 reduced in f32, determinism across ranks and runs, and
// failures (abort, timeout, mismatched shapes) that end in an error instead of a hang.
#include "core/in_process_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace brigade {
namespace {

std::vector<std::unique_ptr<Communicator>> group_of(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto g = make_in_process_group({n, timeout});
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return std::move(*g);
}

// Runs fn(rank) on one thread per rank and returns each rank's status.
template <class Fn>
std::vector<Status> on_ranks(int n, Fn fn) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { st[static_cast<size_t>(r)] = fn(r); });
  for (auto& t : threads) t.join();
  return st;
}

// Values spanning many magnitudes, so a different summation order changes the f32 result.
std::vector<float> values(int rank, int n, uint32_t seed) {
  std::mt19937 rng(seed * 97 + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = std::ldexp(mant(rng), expo(rng));
  return v;
}

TEST(InProcessCommunicator, SumsInRankOrderIdenticallyOnEveryRank) {
  constexpr int kRanks = 3, kN = 1001;  // not a multiple of the ranks: uneven slices
  auto comms = group_of(kRanks);
  std::vector<std::vector<float>> data(kRanks);
  for (uint32_t iter = 0; iter < 20; ++iter) {
    for (int r = 0; r < kRanks; ++r) data[static_cast<size_t>(r)] = values(r, kN, iter);
    std::vector<float> want(kN);
    for (int i = 0; i < kN; ++i) {
      float s = data[0][static_cast<size_t>(i)];
      for (int r = 1; r < kRanks; ++r) s += data[static_cast<size_t>(r)][static_cast<size_t>(i)];
      want[static_cast<size_t>(i)] = s;
    }
    auto st = on_ranks(kRanks, [&](int r) {
      // Ranks arrive in a different order each time: the result must not care.
      std::this_thread::sleep_for(std::chrono::microseconds((iter * 7 + static_cast<uint32_t>(r) * 13) % 50));
      auto& d = data[static_cast<size_t>(r)];
      return comms[static_cast<size_t>(r)]->all_reduce_sum(Tensor(d.data(), DType::f32, {kN}));
    });
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(st[static_cast<size_t>(r)].is_ok()) << st[static_cast<size_t>(r)].to_string();
      ASSERT_EQ(0, std::memcmp(want.data(), data[static_cast<size_t>(r)].data(), kN * sizeof(float)))
          << "rank " << r << " iteration " << iter;
    }
  }
  EXPECT_EQ(comms[1]->rank(), 1);
  EXPECT_EQ(comms[1]->size(), kRanks);
}

TEST(InProcessCommunicator, Bf16IsSummedInF32AndRoundedOnce) {
  // 1 + 3 * 2^-8: in f32 exactly 1.01171875, which rounds (tie to even) to bf16 1.015625. Summed
  // in bf16 one rank at a time, each 1 + 2^-8 would round back to 1.0.
  constexpr int kRanks = 4;
  auto comms = group_of(kRanks);
  std::vector<std::vector<uint16_t>> data(kRanks);
  for (int r = 0; r < kRanks; ++r) data[static_cast<size_t>(r)] = {f32_to_bf16(r == 0 ? 1.0f : 1.0f / 256), f32_to_bf16(r + 0.5f)};
  auto st = on_ranks(kRanks, [&](int r) {
    return comms[static_cast<size_t>(r)]->all_reduce_sum(Tensor(data[static_cast<size_t>(r)].data(), DType::bf16, {1, 2}));
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].is_ok()) << st[static_cast<size_t>(r)].to_string();
    EXPECT_EQ(bf16_to_f32(data[static_cast<size_t>(r)][0]), 1.015625f);
    EXPECT_EQ(bf16_to_f32(data[static_cast<size_t>(r)][1]), 8.0f);
  }
}

TEST(InProcessCommunicator, SizeOneIsTheIdentity) {
  auto comms = group_of(1);
  std::vector<float> x = {1.5f, -2.0f};
  ASSERT_TRUE(comms[0]->all_reduce_sum(Tensor(x.data(), DType::f32, {2})).is_ok());
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
}

TEST(InProcessCommunicator, AbortWakesAWaitingRankAndFailsTheGroup) {
  auto comms = group_of(2, std::chrono::minutes(10));
  std::vector<float> x(8, 1.0f);
  Status waited;
  std::thread t([&] { waited = comms[0]->all_reduce_sum(Tensor(x.data(), DType::f32, {8})); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  comms[1]->abort("executor stopped");
  t.join();
  EXPECT_EQ(waited.code(), StatusCode::cancelled);
  EXPECT_NE(waited.message().find("rank 1"), std::string::npos) << waited.message();
  EXPECT_NE(waited.message().find("executor stopped"), std::string::npos) << waited.message();
  // The group stays failed: later collectives fail at once on every rank.
  EXPECT_EQ(comms[1]->all_reduce_sum(Tensor(x.data(), DType::f32, {8})).code(), StatusCode::cancelled);
  EXPECT_EQ(comms[0]->all_reduce_sum(Tensor(x.data(), DType::f32, {8})).code(), StatusCode::cancelled);
}

TEST(InProcessCommunicator, AMissingRankTimesOutInsteadOfHanging) {
  auto comms = group_of(2, std::chrono::milliseconds(50));
  std::vector<float> x(4, 1.0f);
  const Status st = comms[0]->all_reduce_sum(Tensor(x.data(), DType::f32, {4}));
  EXPECT_EQ(st.code(), StatusCode::cancelled);
  EXPECT_NE(st.message().find("waited 50 ms"), std::string::npos) << st.message();
  // The late rank learns about it rather than waiting in turn.
  EXPECT_EQ(comms[1]->all_reduce_sum(Tensor(x.data(), DType::f32, {4})).code(), StatusCode::cancelled);
}

TEST(InProcessCommunicator, MismatchedShapesFailEveryRank) {
  auto comms = group_of(2);
  std::vector<float> a(4, 1.0f), b(6, 1.0f);
  auto st = on_ranks(2, [&](int r) {
    auto& v = r == 0 ? a : b;
    return comms[static_cast<size_t>(r)]->all_reduce_sum(Tensor(v.data(), DType::f32, {static_cast<int64_t>(v.size())}));
  });
  for (const auto& s : st) {
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("rank 1 reduces f32 [6]"), std::string::npos) << s.message();
  }
  EXPECT_EQ(a, std::vector<float>(4, 1.0f));  // nothing was written
}

TEST(InProcessCommunicator, RejectsBadArguments) {
  EXPECT_EQ(make_in_process_group({0, std::chrono::seconds(1)}).status().code(), StatusCode::invalid_argument);
  auto comms = group_of(1);
  std::vector<int32_t> ids(3);
  EXPECT_EQ(comms[0]->all_reduce_sum(Tensor(ids.data(), DType::i32, {3})).code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace brigade
