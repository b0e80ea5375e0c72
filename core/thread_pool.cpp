#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace brigade {

namespace {

// How long a waiting thread spins before it sleeps. Ops of one forward pass follow each other
// within microseconds, so a worker that spins this long almost never pays a futex wake-up; an
// idle pool goes to sleep after this and costs nothing.
constexpr auto kSpinTime = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpinTime passes; returns done()'s last value.
template <class Pred>
bool spin_until(Pred done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 255) == 0 && std::chrono::steady_clock::now() - start > kSpinTime) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // A few chunks per thread balance uneven chunks (a straggling core, a ragged tail) while keeping
  // chunks contiguous and large enough to amortise the atomic that hands them out.
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t n_chunks = std::min<int64_t>(max_chunks, 4 * static_cast<int64_t>(n_threads_));
  if (n_threads_ == 1 || n_chunks <= 1) {
    fn(0, n, 0);
    return;
  }
  task_ = &fn;
  task_n_ = n;
  chunk_ = std::max(grain, (n + n_chunks - 1) / n_chunks);
  n_chunks_ = (n + chunk_ - 1) / chunk_;
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  // seq_cst pairs with the seq_cst increment of n_sleeping_ in worker_loop: either the worker sees
  // the new generation in its wait predicate, or we see it asleep and notify.
  generation_.fetch_add(1);
  if (n_sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    start_cv_.notify_all();
  }
  run_chunks(0);
  wait_for_workers();
  task_ = nullptr;
}

void ThreadPool::run_chunks(int worker_index) {
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= n_chunks_) return;
    const int64_t begin = c * chunk_;
    const int64_t end = std::min(task_n_, begin + chunk_);
    (*task_)(begin, end, worker_index);
  }
}

void ThreadPool::wait_for_workers() {
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(done)) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeping_.store(true);  // seq_cst: pairs with the last worker's decrement of pending_
  done_cv_.wait(lock, [this] { return pending_.load() == 0; });
  caller_sleeping_.store(false);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto started = [this, seen] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(started)) {
      std::unique_lock<std::mutex> lock(mu_);
      n_sleeping_.fetch_add(1);
      start_cv_.wait(lock, [this, seen] { return generation_.load() != seen; });
      n_sleeping_.fetch_sub(1);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    run_chunks(index);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      { std::lock_guard<std::mutex> lock(mu_); }
      done_cv_.notify_one();
    }
  }
}

}  // namespace brigade
