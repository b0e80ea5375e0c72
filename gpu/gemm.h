// Internal to gpu/: GEMMs through cuBLASLt, out [n, m] = x [n, k] · w [m, k]ᵀ (+ bias [m]), in
// bf16 or in fp8 (E4M3 x and w, each with a device f32 scale; core/backend.h "fp8 weights").
//
// Row-major x/w/out are the column-major matrices xᵀ [k, n], wᵀ [k, m], outᵀ [m, n], so the call
// is outᵀ = op_T(wᵀ) · xᵀ with no copies: A = w transposed, B = x not, the "TN" layout cuBLASLt
// requires for fp8 on Hopper and Ada. A plan (descriptors plus the heuristic's algorithm) is
// cached per (shape, input type, output type, bias type, pointer alignments). Bias is fused as
// the BIAS epilogue when cuBLASLt offers an algorithm for it, otherwise added by a separate
// kernel. Without any algorithm for a shape the process stops with the shape and types in the
// message (an fp8 GEMM never falls back to bf16 silently).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/tensor.h"

namespace brigade::gpu {

class Gemm {
 public:
  Gemm(void* workspace, size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x [n, k] bf16, w [m, k] bf16, bias [m] f32/bf16 or empty, out [n, m] bf16 or f32.
  void run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, cudaStream_t stream);
  // out = (*x_scale * *w_scale) * x8 · w8ᵀ (+ bias): x8 [n, k] and w8 [m, k] f8e4m3 codes, the
  // scales one device f32 each (read by the GEMM when it runs, so they may be written by kernels
  // queued before it); k a multiple of 16 (fp8 needs 16-byte aligned leading dimensions).
  void run_fp8(const Tensor& x8, const float* x_scale, const Tensor& w8, const float* w_scale, const Tensor& bias,
               const Tensor& out, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool fused_bias = false;  // false with a bias: a separate kernel adds it
  };
  struct Scales {
    const float* x = nullptr;  // B's scale (null for bf16)
    const float* w = nullptr;  // A's scale
  };
  // n, m, k, input dtype, out dtype, bias dtype (-1 none), alignments of w, x, out, bias
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int, int, int>;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, Scales scales,
              cudaStream_t stream);
  Plan& plan(const Key& key, Scales scales);
  bool make_plan(const Key& key, bool with_bias, Scales scales, Plan& p);
  static void set_scales(const Plan& p, Scales scales);
  static void destroy(Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
};

}  // namespace brigade::gpu
