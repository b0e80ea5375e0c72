// A fixed pool of worker threads for data-parallel loops (the CPU backend's kernels).
//
// parallel_for splits [0, n) into contiguous chunks of at least `grain` items and runs them on
// the pool and the calling thread; it returns when all chunks are done. Not re-entrant: a task
// must not call parallel_for on the same pool. One caller at a time (the executor thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brigade {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads = 1 runs everything inline. 0 = hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // fn(begin, end, worker_index) for chunks covering [0, n); worker_index in [0, size()).
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  // Workers wait for `generation_` to change: they spin (about kSpinMicros) before sleeping on
  // start_cv_, because an op is a parallel_for and ~100 of them run per decoded token. The caller
  // waits for `pending_` to reach 0 the same way (spin, then done_cv_).
  void worker_loop(int index);
  void run_chunks(int worker_index);
  void wait_for_workers();

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // Task fields: written by the caller before it bumps generation_ (release), read by workers
  // after they observe the new generation (acquire).
  const std::function<void(int64_t, int64_t, int)>* task_ = nullptr;
  int64_t task_n_ = 0;
  int64_t chunk_ = 0;
  int64_t n_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int> pending_{0};        // workers not yet done with the current generation
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> n_sleeping_{0};     // workers blocked on start_cv_
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace brigade
