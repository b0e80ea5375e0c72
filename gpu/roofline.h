// Measured ceilings of this GPU, for roofline reports (DESIGN.md §9): the device-to-device copy
// bandwidth of HBM and the bf16 tensor-core GEMM rate through the backend's own matmul.
#pragma once

#include "gpu/cuda_backend.h"

namespace brigade {

// HBM bandwidth in GB/s (1e9 bytes/s) counting bytes read plus bytes written, from device-to-
// device copies of a `bytes` buffer (default 2 GiB, far beyond L2), best of `reps`.
double measure_copy_bandwidth_gbps(CudaBackend& backend, size_t bytes = size_t{2} << 30, int reps = 5);

// bf16 GEMM rate in TFLOP/s (1e12 flop/s) of backend.matmul on size x size x size, best of `reps`.
double measure_bf16_gemm_tflops(CudaBackend& backend, int size = 8192, int reps = 5);

// The same with an fp8 (E4M3) weight, as fp8 models multiply (bf16 activations quantized per
// call, then the fp8 GEMM); 0 when the backend cannot run fp8 weights.
double measure_fp8_gemm_tflops(CudaBackend& backend, int size = 8192, int reps = 5);

}  // namespace brigade
