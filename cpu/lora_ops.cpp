// The CPU side of Backend::scatter_add_rows (the LoRA delta of a step's adapter rows).
#include "cpu/ops.h"

namespace brigade::cpu {

void scatter_add_rows(const CpuContext& c, const Tensor& y, const Tensor& rows, const Tensor& src) {
  const int64_t r = rows.numel(), n = y.dim(0), d = y.row_numel();
  BRIGADE_CHECK(y.dtype == DType::f32 && src.dtype == DType::f32 && src.numel() == r * d,
                "scatter_add_rows: y [n, d] and src [r, d] f32");
  const auto* idx = rows.as<const int32_t>();
  float* yp = y.as<float>();
  const float* sp = src.as<const float>();
  // Rows are distinct (the contract), so workers never touch the same row of y.
  c.pool->parallel_for(r, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      BRIGADE_CHECK(idx[i] >= 0 && idx[i] < n, "scatter_add_rows: row index inside y");
      float* dst = yp + idx[i] * d;
      const float* s = sp + i * d;
      for (int64_t j = 0; j < d; ++j) dst[j] += s[j];
    }
  });
}

}  // namespace brigade::cpu
