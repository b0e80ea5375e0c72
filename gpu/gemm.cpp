#include "gpu/gemm.h"

#include <string>

#include "gpu/cuda_check.h"
#include "gpu/kernels.h"

namespace brigade::gpu {
namespace {

// Largest power of two (<= 256) dividing the address: what the heuristic may assume.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 1 && (a % static_cast<uintptr_t>(al)) != 0) al /= 2;
  return al;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f8e4m3: return CUDA_R_8F_E4M3;
    default: return CUDA_R_16BF;
  }
}

template <class T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

}  // namespace

Gemm::Gemm(void* workspace, size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  BRIGADE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) destroy(p);
  if (handle_) cublasLtDestroy(handle_);
}

void Gemm::destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  p = Plan{};
}

// fp8: the per-tensor scales (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, the default scale mode)
// are device pointers on the descriptor; they are set before the heuristic runs, as for every
// call after it, so the algorithm is chosen for the descriptor it will run with.
void Gemm::set_scales(const Plan& p, Scales scales) {
  if (scales.w == nullptr) return;
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(scales.w));
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(scales.x));
}

bool Gemm::make_plan(const Key& key, bool with_bias, Scales scales, Plan& p) {
  const auto [n, m, k, in_t, out_t, bias_t, al_w, al_x, al_out, al_bias] = key;
  const cudaDataType_t in = cuda_type(static_cast<DType>(in_t));
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (with_bias) {
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_attr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, cuda_type(static_cast<DType>(bias_t)));
  }
  set_scales(p, scales);
  BRIGADE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  BRIGADE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, in, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  BRIGADE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, cuda_type(static_cast<DType>(out_t)), static_cast<uint64_t>(m),
                                                  static_cast<uint64_t>(n), m));
  cublasLtMatmulPreference_t pref = nullptr;
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes_, sizeof(workspace_bytes_)));
  const uint32_t aw = static_cast<uint32_t>(al_w), ax = static_cast<uint32_t>(al_x), ao = static_cast<uint32_t>(al_out);
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof(aw)));
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax, sizeof(ax)));
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ao, sizeof(ao)));
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ao, sizeof(ao)));
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || count == 0) {
    destroy(p);
    return false;
  }
  p.algo = result.algo;
  p.fused_bias = with_bias;
  (void)al_bias;
  return true;
}

Gemm::Plan& Gemm::plan(const Key& key, Scales scales) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  const bool bias = std::get<5>(key) >= 0;
  // Fused bias first; without an algorithm for it, a plain GEMM and the bias kernel.
  if (!(bias && make_plan(key, true, scales, p)) && !make_plan(key, false, scales, p)) {
    const auto [n, m, k, in_t, out_t, bias_t, al_w, al_x, al_out, al_bias] = key;
    const std::string why = std::string("cuBLASLt has no algorithm for the ") + dtype_name(static_cast<DType>(in_t)) +
                            " GEMM out [n=" + std::to_string(n) + ", m=" + std::to_string(m) + "] " +
                            dtype_name(static_cast<DType>(out_t)) + " = x [n, k=" + std::to_string(k) +
                            "] . w [m, k]^T (alignments w " + std::to_string(al_w) + ", x " + std::to_string(al_x) +
                            ", out " + std::to_string(al_out) + " bytes)" +
                            (in_t == static_cast<int>(DType::f8e4m3) ? "; load with bf16 weights instead" : "");
    check_failed("cublasLtMatmulAlgoGetHeuristic", why.c_str(), __FILE__, __LINE__);
  }
  return plans_.emplace(key, p).first->second;
}

void Gemm::run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, cudaStream_t stream) {
  BRIGADE_CHECK(x.dtype == DType::bf16 && w.dtype == DType::bf16, "GPU matmul: x and w are bf16");
  matmul(x, w, bias, out, Scales{}, stream);
}

void Gemm::run_fp8(const Tensor& x8, const float* x_scale, const Tensor& w8, const float* w_scale,
                   const Tensor& bias, const Tensor& out, cudaStream_t stream) {
  BRIGADE_CHECK(x8.dtype == DType::f8e4m3 && w8.dtype == DType::f8e4m3 && x_scale != nullptr && w_scale != nullptr,
                "fp8 GEMM: x and w are f8e4m3 with their scales");
  BRIGADE_CHECK(w8.ndim == 2 && w8.dim(1) % 16 == 0, "fp8 GEMM: k is a multiple of 16");
  matmul(x8, w8, bias, out, Scales{x_scale, w_scale}, stream);
}

void Gemm::matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, Scales scales,
                  cudaStream_t stream) {
  BRIGADE_CHECK(out.dtype == DType::bf16 || out.dtype == DType::f32, "GPU matmul: out is bf16 or f32");
  BRIGADE_CHECK(w.ndim == 2 && x.row_numel() == w.dim(1), "x [n, k] and w [m, k] agree on k");
  BRIGADE_CHECK(out.numel() == x.dim(0) * w.dim(0), "out is [n, m]");
  BRIGADE_CHECK(bias.empty() || (bias.numel() == w.dim(0) && bias.dtype != DType::f16), "bias is [m] f32 or bf16");
  const int64_t n = x.dim(0), m = w.dim(0), k = w.dim(1);
  if (n == 0 || m == 0) return;
  const int bias_t = bias.empty() ? -1 : static_cast<int>(bias.dtype);
  const Key key{n, m, k, static_cast<int>(w.dtype), static_cast<int>(out.dtype), bias_t, alignment(w.data),
                alignment(x.data), alignment(out.data), bias.empty() ? 0 : alignment(bias.data)};
  Plan& p = plan(key, scales);
  if (p.fused_bias) set_attr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias.data));
  set_scales(p, scales);
  const float alpha = 1.0f, beta = 0.0f;
  BRIGADE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w.data, p.a, x.data, p.b, &beta, out.data, p.d,
                                      out.data, p.d, &p.algo, workspace_, workspace_bytes_, stream));
  if (!bias.empty() && !p.fused_bias) launch_add_bias(out.data, out.dtype, bias.data, bias.dtype, n, m, stream);
}

}  // namespace brigade::gpu
