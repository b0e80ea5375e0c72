// Internal to gpu/: error checks for CUDA runtime and cuBLAS calls.
//
// BRIGADE_CUDA_CHECK(expr) stops the process with the CUDA error name and string when expr fails
// (inside ops a failure is a bug or a lost device; see cuda_backend.h).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/status.h"

namespace brigade::gpu {

[[noreturn]] void cuda_failed(const char* expr, cudaError_t err, const char* file, int line);
[[noreturn]] void cublas_failed(const char* expr, cublasStatus_t st, const char* file, int line);
// "cudaErrorMemoryAllocation: out of memory" for Status messages.
std::string cuda_error_string(cudaError_t err);

}  // namespace brigade::gpu

#define BRIGADE_CUDA_CHECK(expr)                                                   \
  do {                                                                             \
    const cudaError_t _e = (expr);                                                 \
    if (_e != cudaSuccess) ::brigade::gpu::cuda_failed(#expr, _e, __FILE__, __LINE__); \
  } while (0)

#define BRIGADE_CUBLAS_CHECK(expr)                                                     \
  do {                                                                                 \
    const cublasStatus_t _s = (expr);                                                  \
    if (_s != CUBLAS_STATUS_SUCCESS) ::brigade::gpu::cublas_failed(#expr, _s, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define BRIGADE_CUDA_CHECK_LAUNCH() BRIGADE_CUDA_CHECK(cudaGetLastError())
