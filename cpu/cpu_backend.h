// The CPU backend: Backend ops on host memory with SIMD kernels chosen at run time
// (AVX2+FMA; AVX-512 and AVX512-BF16 where the CPU has them) and a thread pool.
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"

namespace brigade {

struct CpuBackendOptions {
  int n_threads = 0;  // 0 = all hardware threads
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

// The SIMD level the kernels dispatch to on this CPU: "avx512bf16", "avx512", "avx2" or "scalar".
std::string cpu_simd_level();

}  // namespace brigade
