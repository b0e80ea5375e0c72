// fp8 (E4M3) quantization with a dynamic per-tensor scale: the weights once at load, the
// activations before every fp8 GEMM (gpu/gemm.h). Two kernels on the stream and no host sync, so
// a captured step replays them: an absmax reduction into one u32 (the bits of a non-negative
// float order like the float), then the quantizing pass, which derives the scale from it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>

#include "gpu/cuda_check.h"
#include "gpu/device_util.cuh"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;  // grid-stride loops beyond this: enough to fill an H200 many times

template <class T>
__global__ void absmax_kernel(const T* x, int64_t count, unsigned* amax) {
  __shared__ float scratch[32];
  float m = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    m = fmaxf(m, fabsf(to_float(x[i])));  // fmaxf drops NaN: a NaN input does not poison the scale
  m = block_max(m, scratch);
  if (threadIdx.x == 0) atomicMax(amax, __float_as_uint(m));
}

template <class T>
__global__ void quantize_kernel(const T* x, int64_t count, const unsigned* amax, float* scale,
                                __nv_fp8_storage_t* q) {
  // The scale launch_quantize_e4m3 (kernels.h) documents; division (IEEE, not a reciprocal) so the host
  // reference rounds every element the same way.
  const float s = fmaxf(__uint_as_float(*amax) / kE4m3Max, FLT_MIN);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = s;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    q[i] = __nv_cvt_float_to_fp8(to_float(x[i]) / s, __NV_SATFINITE, __NV_E4M3);
}

template <class T>
void quantize(const T* x, int64_t count, float* scale, unsigned* amax, uint8_t* q, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(count, kThreads), kMaxBlocks));
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(unsigned), stream));
  absmax_kernel<<<blocks, kThreads, 0, stream>>>(x, count, amax);
  BRIGADE_CUDA_CHECK_LAUNCH();
  quantize_kernel<<<blocks, kThreads, 0, stream>>>(x, count, amax, scale, reinterpret_cast<__nv_fp8_storage_t*>(q));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_quantize_e4m3(const void* x, DType x_t, int64_t count, float* scale, unsigned* amax, uint8_t* q,
                          cudaStream_t stream) {
  BRIGADE_CHECK(count > 0, "fp8 quantization of a non-empty tensor");
  switch (x_t) {
    case DType::bf16: quantize(static_cast<const __nv_bfloat16*>(x), count, scale, amax, q, stream); return;
    case DType::f16: quantize(static_cast<const __half*>(x), count, scale, amax, q, stream); return;
    case DType::f32: quantize(static_cast<const float*>(x), count, scale, amax, q, stream); return;
    default: BRIGADE_CHECK(false, "fp8 quantization reads f32, f16 or bf16");
  }
}

}  // namespace brigade::gpu
