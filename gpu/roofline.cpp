#include "gpu/roofline.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu/cuda_check.h"

namespace brigade {
namespace {

// Seconds `fn` takes on the backend's stream, measured with CUDA events, best of reps (after one
// warm-up run).
template <class Fn>
double best_seconds(CudaBackend& b, int reps, Fn fn) {
  const auto stream = static_cast<cudaStream_t>(b.stream());
  cudaEvent_t start, stop;
  BRIGADE_CUDA_CHECK(cudaEventCreate(&start));
  BRIGADE_CUDA_CHECK(cudaEventCreate(&stop));
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    BRIGADE_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    BRIGADE_CUDA_CHECK(cudaEventRecord(stop, stream));
    BRIGADE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BRIGADE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, static_cast<double>(ms) * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace

double measure_copy_bandwidth_gbps(CudaBackend& backend, size_t bytes, int reps) {
  auto src = backend.allocate(bytes);
  auto dst = backend.allocate(bytes);
  BRIGADE_CHECK(src.has_value() && dst.has_value(), "GPU memory for the bandwidth measurement");
  const auto stream = static_cast<cudaStream_t>(backend.stream());
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(src->data(), 1, bytes, stream));
  const double s = best_seconds(backend, reps, [&] {
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * static_cast<double>(bytes) / s * 1e-9;
}

namespace {

// TFLOP/s of backend.matmul of x [n, n] bf16 (every value 2^-7, which keeps the products finite;
// the rate does not depend on them) by the weight w [n, n], best of reps.
double gemm_tflops(CudaBackend& backend, const Tensor& w, int reps) {
  const int64_t n = w.dim(0);
  const size_t bytes = static_cast<size_t>(n * n) * 2;
  auto x = backend.allocate(bytes), out = backend.allocate(bytes);
  BRIGADE_CHECK(x.has_value() && out.has_value(), "GPU memory for the GEMM measurement");
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(x->data(), 0x3c, bytes, static_cast<cudaStream_t>(backend.stream())));
  const Tensor xt = x->view(DType::bf16, {n, n}), ot = out->view(DType::bf16, {n, n});
  const double s = best_seconds(backend, reps, [&] { backend.matmul(xt, w, Tensor(), ot); });
  return 2.0 * static_cast<double>(n) * n * n / s * 1e-12;
}

}  // namespace

double measure_bf16_gemm_tflops(CudaBackend& backend, int size, int reps) {
  const int64_t n = size;
  const size_t bytes = static_cast<size_t>(n * n) * 2;
  auto w = backend.allocate(bytes);
  BRIGADE_CHECK(w.has_value(), "GPU memory for the GEMM measurement");
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(w->data(), 0x3c, bytes, static_cast<cudaStream_t>(backend.stream())));
  return gemm_tflops(backend, w->view(DType::bf16, {n, n}), reps);
}

double measure_fp8_gemm_tflops(CudaBackend& backend, int size, int reps) {
  if (!backend.supports_weight_dtype(DType::f8e4m3)) return 0.0;
  const int64_t n = size;
  // The weight is made on the host (prepare_weight quantizes it), every value bf16 2^-7.
  std::vector<uint16_t> host(static_cast<size_t>(n * n), 0x3c00);
  auto w = backend.prepare_weight(Tensor(host.data(), DType::bf16, {n, n}), DType::f8e4m3);
  BRIGADE_CHECK(w.has_value(), "an fp8 weight for the GEMM measurement");
  return gemm_tflops(backend, w->tensor, reps);
}

}  // namespace brigade
