#include "gpu/gemm.h"

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

cudaDataType_t cuda_type(DType t) { return t == DType::f32 ? CUDA_R_32F : CUDA_R_16BF; }

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

bool Gemm::make_plan(const Key& key, bool with_bias, Plan& p) {
  const auto [n, m, k, out_t, bias_t, al_w, al_x, al_out, al_bias] = key;
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  if (with_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bt = cuda_type(static_cast<DType>(bias_t));
    BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  }
  BRIGADE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  BRIGADE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
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

Gemm::Plan& Gemm::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  const bool bias = std::get<4>(key) >= 0;
  // Fused bias first; without an algorithm for it, a plain GEMM and the bias kernel.
  if (!(bias && make_plan(key, true, p))) {
    const bool ok = make_plan(key, false, p);
    BRIGADE_CHECK(ok, "cuBLASLt has an algorithm for this bf16 GEMM shape");
  }
  return plans_.emplace(key, p).first->second;
}

void Gemm::run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out, cudaStream_t stream) {
  BRIGADE_CHECK(x.dtype == DType::bf16 && w.dtype == DType::bf16, "GPU matmul: x and w are bf16");
  BRIGADE_CHECK(out.dtype == DType::bf16 || out.dtype == DType::f32, "GPU matmul: out is bf16 or f32");
  BRIGADE_CHECK(w.ndim == 2 && x.row_numel() == w.dim(1), "x [n, k] and w [m, k] agree on k");
  BRIGADE_CHECK(out.numel() == x.dim(0) * w.dim(0), "out is [n, m]");
  BRIGADE_CHECK(bias.empty() || (bias.numel() == w.dim(0) && bias.dtype != DType::f16), "bias is [m] f32 or bf16");
  const int64_t n = x.dim(0), m = w.dim(0), k = w.dim(1);
  if (n == 0 || m == 0) return;
  const int bias_t = bias.empty() ? -1 : static_cast<int>(bias.dtype);
  const Key key{n, m, k, static_cast<int>(out.dtype), bias_t, alignment(w.data), alignment(x.data),
                alignment(out.data), bias.empty() ? 0 : alignment(bias.data)};
  Plan& p = plan(key);
  if (p.fused_bias) {
    const void* ptr = bias.data;
    BRIGADE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof(ptr)));
  }
  const float alpha = 1.0f, beta = 0.0f;
  BRIGADE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, w.data, p.a, x.data, p.b, &beta, out.data, p.d,
                                      out.data, p.d, &p.algo, workspace_, workspace_bytes_, stream));
  if (!bias.empty() && !p.fused_bias) launch_add_bias(out.data, out.dtype, bias.data, bias.dtype, n, m, stream);
}

}  // namespace brigade::gpu
