// Measured ceilings of this machine, for roofline reports (DESIGN.md §9): how fast all threads
// can read memory, how fast they can multiply f32 matrices, and int8 blocks.
#pragma once

#include <cstddef>

#include "core/thread_pool.h"

namespace brigade {

// Memory read bandwidth in GB/s (1e9 bytes/s): every thread of `pool` sums its share of a
// `bytes` buffer (default 256 MiB, far larger than any cache), best of `reps` passes.
// Takes about a second; allocates and frees the buffer.
double measure_read_bandwidth_gbps(ThreadPool& pool, size_t bytes = size_t{256} << 20, int reps = 5);

// f32 GEMM throughput in GFLOP/s: every thread runs single-threaded OpenBLAS sgemm of
// size x size x size at once (the kernel the CPU backend uses for prefill), best of `reps`.
double measure_f32_gemm_gflops(ThreadPool& pool, int size = 512, int reps = 3);

// int8 multiply-add throughput in GOP/s (a multiply and an add count two, as FLOPs do): every
// thread runs the instruction the block-quantized kernels multiply with (vpdpbusd with AVX-512
// VNNI, else AVX2's maddubs + madd) on registers, best of `reps`. The compute ceiling of quantized
// weights' prefill. 0 where the CPU has neither (the scalar kernels).
double measure_int8_gops(ThreadPool& pool, int reps = 3);

}  // namespace brigade
