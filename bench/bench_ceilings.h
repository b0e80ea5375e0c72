// The CPU benchmarks' thread count and machine ceilings, measured once per process in the same run
// as the benchmark, so that a result can be stated as a fraction of what the host did then.
#pragma once

#include <cstdlib>

#include "core/thread_pool.h"
#include "cpu/membw.h"

namespace brigade::bench {

// BRIGADE_BENCH_THREADS, else 0 (every core).
inline int bench_threads() {
  const char* env = std::getenv("BRIGADE_BENCH_THREADS");
  return env ? std::atoi(env) : 0;
}

// The f32 GEMM ceiling (single-threaded OpenBLAS sgemm on every thread), for `of_sgemm`.
inline double sgemm_gflops() {
  static const double g = [] {
    ThreadPool pool(bench_threads());
    return measure_f32_gemm_gflops(pool, 512, 10);
  }();
  return g;
}

}  // namespace brigade::bench
