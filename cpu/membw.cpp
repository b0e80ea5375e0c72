#include "cpu/membw.h"

#include "cpu/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace brigade {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double measure_read_bandwidth_gbps(ThreadPool& pool, size_t bytes, int reps) {
  const int64_t n = static_cast<int64_t>(bytes / sizeof(uint64_t));
  std::vector<uint64_t> buf(static_cast<size_t>(n));
  // Touch every page from the threads that will read it.
  pool.parallel_for(n, 1 << 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  });
  std::atomic<uint64_t> sink{0};
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, 1 << 16, [&](int64_t b, int64_t e, int) {
      // Four independent integer sums: vectorised by the compiler at any ISA, never compute bound.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      const uint64_t* p = buf.data();
      int64_t i = b;
      for (; i + 4 <= e; i += 4) { s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3]; }
      for (; i < e; ++i) s0 += p[i];
      sink.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
    });
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e9);
  }
  return best;
}

double measure_f32_gemm_gflops(ThreadPool& pool, int size, int reps) {
  openblas_set_num_threads(1);
  const size_t elems = static_cast<size_t>(size) * static_cast<size_t>(size);
  const int t = pool.size();
  std::vector<std::vector<float>> a(static_cast<size_t>(t)), c(static_cast<size_t>(t));
  std::vector<float> b(elems, 0.5f);
  for (int i = 0; i < t; ++i) {
    a[static_cast<size_t>(i)].assign(elems, 1.0f);
    c[static_cast<size_t>(i)].assign(elems, 0.0f);
  }
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(t, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, size, size, size, 1.0f,
                    a[static_cast<size_t>(i)].data(), size, b.data(), size, 0.0f,
                    c[static_cast<size_t>(i)].data(), size);
      }
    });
    const double flops = 2.0 * static_cast<double>(elems) * size * t;
    best = std::max(best, flops / seconds_since(t0) / 1e9);
  }
  return best;
}

double measure_int8_gops(ThreadPool& pool, int reps) {
  const auto loop = cpu::kernels_for(cpu::simd_level_from_env()).int8_dot_loop;
  if (loop == nullptr) return 0.0;
  constexpr int64_t kIters = int64_t{1} << 22;  // 8 x 32 x 2^22 multiply-adds: ~10-30 ms a thread
  std::atomic<int64_t> sink{0};
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sink.fetch_add(loop(kIters), std::memory_order_relaxed);
    });
    const double ops = 2.0 * 8 * 32 * static_cast<double>(kIters) * pool.size();
    best = std::max(best, ops / seconds_since(t0) / 1e9);
  }
  return best;
}

}  // namespace brigade
