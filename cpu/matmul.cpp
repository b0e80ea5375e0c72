// matmul: out [n, m] = x [n, k] · w [m, k]ᵀ (+ bias [m]).
//
// Decode (n < kBlasMinRows) is bound by reading the weights: threads split the output columns
// (weight rows) and the register-blocked kernel streams each weight row once per 4 activation rows.
// Prefill (n >= kBlasMinRows) is bound by FLOPs: threads split the weight rows into panels, widen
// each panel to f32 in a thread-local buffer and run single-threaded OpenBLAS sgemm on it.
// Block-quantized weights (core/quant.h) take the integer kernels of cpu/quant_kernels.h over
// activations quantized per block of 32: below kQuantGemmMinRows (8) the decode kernel, from it
// the prefill kernel over weight rows repacked 8 at a time (docs/perf.md, "Quantized prefill").
// As with float weights, the two sum in different orders, so a row's last bits can depend on
// which side of the threshold its step falls.
#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

// Weight rows per BLAS panel: 64 rows x k f32 fits L2 for k up to ~2K and keeps sgemm's packing
// cost small against the n x 64 x k multiply.
constexpr int64_t kPanelRows = 64;

void add_bias(const CpuContext& c, const Tensor& bias, float* out, int64_t n, int64_t m,
              int64_t r0, int64_t r1) {
  thread_local std::vector<float> buf;
  const float* b = nullptr;
  if (bias.dtype == DType::f32) {
    b = bias.as<float>();
  } else {
    buf.resize(static_cast<size_t>(r1 - r0));
    c.kernels->to_f32(static_cast<const char*>(bias.data) + r0 * 2, bias.dtype, buf.data(), r1 - r0);
    b = buf.data() - r0;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = r0; r < r1; ++r) out[i * m + r] += b[r];
}

// Activation bytes per block: sgemm packs its x operand again on every call, so x is walked in
// blocks of about this many bytes (at least kXBlockMinRows rows), each run against every panel of the
// thread's weight rows while it sits in cache. Without the blocks, each 64-row panel re-read all
// of a long prefill's or a vision tower pass's x from memory (docs/perf.md, "Blocked activations").
constexpr int64_t kXBlockBytes = int64_t{4} << 20;
constexpr int64_t kXBlockMinRows = 256;

void blas_rows(const CpuContext& c, const MatmulArgs& a, int64_t r0, int64_t r1) {
  thread_local std::vector<float> panel;
  const int64_t block = std::max(kXBlockMinRows, kXBlockBytes / (a.k * static_cast<int64_t>(sizeof(float))));
  for (int64_t i0 = 0; i0 < a.n; i0 += block) {
    const int64_t n = std::min(block, a.n - i0);
    for (int64_t p = r0; p < r1; p += kPanelRows) {
      const int64_t rows = std::min(kPanelRows, r1 - p);
      const float* w = nullptr;
      const char* src = static_cast<const char*>(a.w) + dtype_bytes(a.w_dtype, p * a.k);
      if (a.w_dtype == DType::f32) {
        w = reinterpret_cast<const float*>(src);
      } else {  // widened once per block: 64 x k values against the block's 2 x n x 64 x k flops
        panel.resize(static_cast<size_t>(rows * a.k));
        c.kernels->to_f32(src, a.w_dtype, panel.data(), rows * a.k);
        w = panel.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(rows),
                  static_cast<int>(a.k), 1.0f, a.x + i0 * a.k, static_cast<int>(a.k), w, static_cast<int>(a.k),
                  0.0f, a.out + i0 * a.m + p, static_cast<int>(a.m));
    }
  }
}

// Weight rows per decode chunk: at least ~64 KiB of weights, in multiples of 4 rows so the
// kernels' 2- and 4-row tiles are rarely split.
int64_t decode_grain(size_t row_bytes) {
  return std::max<int64_t>(4, (65536 / std::max<int64_t>(1, static_cast<int64_t>(row_bytes))) & ~int64_t{3});
}

// One row group of a block-quantized weight: rows [offset, offset + rows) of the output's columns.
struct QuantPart {
  const void* w = nullptr;
  DType dtype = DType::q8_0;
  int64_t offset = 0;
  int64_t rows = 0;
};

// Block-quantized weights (one, or the row groups of matmul_stacked): the n activation rows
// quantized once per format the groups read (BlockQ8, and BlockQ8K for a K-quant decode), then
// threads split all m weight rows: decode_grain's chunks for decode, 64-row chunks (8 packed
// panels) for prefill; a chunk that spans groups runs each group's kernel on its share.
void quant_matmul(const CpuContext& c, const float* x, int64_t n, int64_t k, std::span<const QuantPart> parts,
                  int64_t m, float* out, const Tensor& bias) {
  thread_local std::vector<BlockQ8> xq;
  thread_local std::vector<BlockQ8K> xqk;
  const int64_t nb = k / 32;
  const bool prefill = n >= kQuantGemmMinRows;
  bool want_q8 = prefill, want_q8k = false;
  size_t min_row_bytes = SIZE_MAX;
  for (const QuantPart& p : parts) {
    (!prefill && decodes_with_q8k(p.dtype) ? want_q8k : want_q8) = true;
    min_row_bytes = std::min(min_row_bytes, dtype_bytes(p.dtype, k));
  }
  if (want_q8k) xqk.resize(static_cast<size_t>(n * (nb / 8)));
  if (want_q8) xq.resize(static_cast<size_t>(n * nb));
  BlockQ8K* xkp = xqk.data();
  BlockQ8* xp = xq.data();
  c.pool->parallel_for(n, 1, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      if (want_q8k) c.kernels->quantize_q8k(x + i * k, xkp + i * (nb / 8), k);
      if (want_q8) c.kernels->quantize_q8(x + i * k, xp + i * nb, k);
    }
  });
  c.pool->parallel_for(m, prefill ? kPanelRows : decode_grain(min_row_bytes), [&](int64_t r0, int64_t r1, int) {
    for (const QuantPart& p : parts) {
      const int64_t b = std::max(r0, p.offset) - p.offset, e = std::min(r1, p.offset + p.rows) - p.offset;
      if (b >= e) continue;
      QMatmulArgs q;
      q.n = n;
      q.nb = nb;
      q.w = p.w;
      q.w_dtype = p.dtype;
      q.row_bytes = dtype_bytes(p.dtype, k);
      q.m = m;
      q.out = out + p.offset;
      if (prefill) {
        q.x = xp;
        c.kernels->qgemm_rows(q, b, e);
      } else if (decodes_with_q8k(p.dtype)) {
        q.xk = xkp;
        c.kernels->qkmatmul_rows(q, b, e);
      } else {
        q.x = xp;
        c.kernels->qmatmul_rows(q, b, e);
      }
    }
    if (!bias.empty()) add_bias(c, bias, out, n, m, r0, r1);
  });
}

}  // namespace

void matmul(const CpuContext& c, const Tensor& x, const Tensor& w, const Tensor& bias,
            const Tensor& out) {
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32, "matmul activations are f32");
  BRIGADE_CHECK(w.ndim == 2 && x.row_numel() == w.dim(1), "x [n, k] and w [m, k] agree on k");
  BRIGADE_CHECK(out.numel() == x.dim(0) * w.dim(0), "out is [n, m]");
  BRIGADE_CHECK(bias.empty() || bias.numel() == w.dim(0), "bias is [m]");
  MatmulArgs a;
  a.x = x.as<float>();
  a.n = x.dim(0);
  a.k = w.dim(1);
  a.w = w.data;
  a.w_dtype = w.dtype;
  a.m = w.dim(0);
  a.out = out.as<float>();
  if (a.n == 0 || a.m == 0) return;
  if (is_block_quantized(a.w_dtype)) {
    BRIGADE_CHECK(a.k % dtype_block_elems(a.w_dtype) == 0, "a quantized weight's rows are whole blocks");
    const QuantPart part{a.w, a.w_dtype, 0, a.m};
    return quant_matmul(c, a.x, a.n, a.k, {&part, 1}, a.m, a.out, bias);
  }
  const bool use_blas = a.n >= kBlasMinRows;
  if (use_blas) {
    // Each worker calls sgemm itself; OpenBLAS must not start its own threads inside ours.
    static std::once_flag once;
    std::call_once(once, [] { openblas_set_num_threads(1); });
  }
  // Chunks of one panel (prefill) or decode_grain's rows.
  const int64_t grain = use_blas ? kPanelRows : decode_grain(dtype_bytes(a.w_dtype, a.k));
  c.pool->parallel_for(a.m, grain, [&](int64_t r0, int64_t r1, int) {
    if (use_blas) blas_rows(c, a, r0, r1);
    else c.kernels->matmul_rows(a, r0, r1);
    if (!bias.empty()) add_bias(c, bias, a.out, a.n, a.m, r0, r1);
  });
}

void matmul_stacked(const CpuContext& c, const Tensor& x, std::span<const Tensor> ws, const Tensor& bias,
                    const Tensor& out) {
  BRIGADE_CHECK(!ws.empty(), "matmul_stacked has at least one weight");
  if (ws.size() == 1) return matmul(c, x, ws[0], bias, out);
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32, "matmul activations are f32");
  std::vector<QuantPart> parts;
  int64_t m = 0;
  for (const Tensor& w : ws) {
    BRIGADE_CHECK(w.ndim == 2 && x.row_numel() == w.dim(1), "x [n, k] and every w [m_i, k] agree on k");
    BRIGADE_CHECK(is_block_quantized(w.dtype) && w.dim(1) % dtype_block_elems(w.dtype) == 0,
                  "matmul_stacked's weights are block-quantized, rows of whole blocks");
    parts.push_back({w.data, w.dtype, m, w.dim(0)});
    m += w.dim(0);
  }
  BRIGADE_CHECK(out.numel() == x.dim(0) * m, "out is [n, m_1 + m_2 + ...]");
  BRIGADE_CHECK(bias.empty() || bias.numel() == m, "bias is [m_1 + m_2 + ...]");
  if (x.dim(0) == 0 || m == 0) return;
  quant_matmul(c, x.as<float>(), x.dim(0), x.row_numel(), parts, m, out.as<float>(), bias);
}

}  // namespace brigade::cpu
