// Internal to gpu/: bf16 GEMM through cuBLASLt, out [n, m] = x [n, k] · w [m, k]ᵀ (+ bias [m]).
//
// Row-major x/w/out are the column-major matrices xᵀ [k, n], wᵀ [k, m], outᵀ [m, n], so the call
// is outᵀ = op_T(wᵀ) · xᵀ with no copies. A plan (descriptors plus the heuristic's algorithm) is
// cached per (shape, output type, bias type, pointer alignments). Bias is fused as the BIAS
// epilogue when cuBLASLt offers an algorithm for it, otherwise added by a separate kernel.
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

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool fused_bias = false;  // false with a bias: a separate kernel adds it
  };
  // n, m, k, out dtype, bias dtype (-1 none), alignments of w, x, out, bias
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int, int>;
  Plan& plan(const Key& key);
  bool make_plan(const Key& key, bool with_bias, Plan& p);
  static void destroy(Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
};

}  // namespace brigade::gpu
