#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace brigade {
namespace {

// Every index of [0, n) is visited exactly once, chunks respect the grain (except the tail),
// and worker indices are inside [0, size()).
void check_coverage(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> bad_worker{false}, bad_chunk{false};
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int w) {
    if (w < 0 || w >= pool.size()) bad_worker = true;
    if (b >= e || (e - b < grain && e != n)) bad_chunk = true;
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " n " << n;
  EXPECT_FALSE(bad_worker.load());
  EXPECT_FALSE(bad_chunk.load()) << "n " << n << " grain " << grain;
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 3, 7, 64, 100, 1000, 4097})
      for (int64_t grain : {1, 3, 16, 5000}) check_coverage(pool, n, grain);
  }
}

TEST(ThreadPool, ZeroItemsCallsNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.parallel_for(0, 1, [&](int64_t, int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, SingleThreadRunsInlineOnCaller) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e, int w) {
    ++calls;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(w, 0);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, ManyRapidCalls) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  constexpr int kCalls = 20000;
  for (int c = 0; c < kCalls; ++c) {
    pool.parallel_for(10, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i, std::memory_order_relaxed);
    });
  }
  EXPECT_EQ(sum.load(), int64_t{kCalls} * 45);
}

TEST(ThreadPool, WakesSleepingWorkers) {
  // Gaps far longer than the spin time put workers (and the waiting caller) to sleep on the
  // condition variables; every call must still complete and use more than the caller.
  ThreadPool pool(2);
  std::atomic<int> n_worker_chunks{0};
  for (int c = 0; c < 20; ++c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::atomic<int> done{0};
    pool.parallel_for(8, 1, [&](int64_t b, int64_t e, int w) {
      if (w != 0) n_worker_chunks.fetch_add(1);
      // A slow chunk makes the caller wait past its spin.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      done.fetch_add(static_cast<int>(e - b));
    });
    ASSERT_EQ(done.load(), 8);
  }
  EXPECT_GT(n_worker_chunks.load(), 0);
}

TEST(ThreadPool, WritesAreVisibleAfterReturn) {
  ThreadPool pool(4);
  std::vector<int> v(10000, 0);
  for (int round = 1; round <= 50; ++round) {
    pool.parallel_for(static_cast<int64_t>(v.size()), 64, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) v[static_cast<size_t>(i)] += 1;
    });
    for (int x : v) ASSERT_EQ(x, round);
  }
}

TEST(ThreadPool, DefaultUsesHardwareThreads) {
  ThreadPool pool;
  EXPECT_GE(pool.size(), 1);
}

}  // namespace
}  // namespace brigade
