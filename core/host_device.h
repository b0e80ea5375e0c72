// BRIGADE_HOST_DEVICE: marks small inline functions that CUDA kernels call too (nvcc compiles
// them for both sides); plain inline for the host compiler.
#pragma once

#ifdef __CUDACC__
#define BRIGADE_HOST_DEVICE __host__ __device__
#else
#define BRIGADE_HOST_DEVICE
#endif
