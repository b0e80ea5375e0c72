// The bf16 -> f32 widening that lets NCCL reduce bf16 activations in f32 (nccl_communicator.cpp).
#include <cuda_bf16.h>

#include <cstdint>

#include "gpu/cuda_check.h"
#include "gpu/nccl_widen.h"

namespace brigade::gpu {
namespace {

__global__ void bf16_to_f32_kernel(const __nv_bfloat16* src, float* dst, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) dst[i] = __bfloat162float(src[i]);
}

}  // namespace

void launch_bf16_to_f32(const void* src, float* dst, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  bf16_to_f32_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(src), dst, count);
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::gpu
