// The CUDA side of Backend::scatter_add_rows (the LoRA delta of a step's adapter rows): one
// block per source row, f32 arithmetic, bf16 storage.
#include <cuda_bf16.h>

#include "gpu/cuda_check.h"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

__global__ void scatter_add_rows_kernel(__nv_bfloat16* y, int64_t d, const int32_t* rows, int64_t n,
                                        const __nv_bfloat16* src) {
  const int64_t r = blockIdx.x;
  const int32_t dst = rows[r];
  if (dst < 0 || dst >= n) return;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const int64_t at = int64_t{dst} * d + j;
    y[at] = __float2bfloat16_rn(__bfloat162float(y[at]) + __bfloat162float(src[r * d + j]));
  }
}

}  // namespace

void launch_scatter_add_rows(void* y, int64_t d, const int32_t* rows, int64_t r, int64_t n, const void* src,
                             cudaStream_t stream) {
  if (r == 0) return;
  const unsigned threads = d >= 256 ? 256u : 64u;
  scatter_add_rows_kernel<<<static_cast<unsigned>(r), threads, 0, stream>>>(
      static_cast<__nv_bfloat16*>(y), d, rows, n, static_cast<const __nv_bfloat16*>(src));
  BRIGADE_CUDA_CHECK_LAUNCH();
}

}  // namespace brigade::gpu
