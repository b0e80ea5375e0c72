// Internal to gpu/: the conversion kernel the NCCL communicator reduces bf16 through.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace brigade::gpu {

// dst [count] f32 = src [count] bf16, on the device, queued on stream.
void launch_bf16_to_f32(const void* src, float* dst, int64_t count, cudaStream_t stream);

}  // namespace brigade::gpu
