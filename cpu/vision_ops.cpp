// The CPU side of the vision encoder ops (Backend::supports_vision): layer_norm, gelu_tanh, gelu,
// quick_gelu, scatter_rows and blend_rows. Arithmetic in f32 in the order torch's CPU kernels use
// for these shapes (mean, then the mean of squared deviations), so the towers match transformers
// closely.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

int64_t row_grain(int64_t row_elems) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elems)); }

// x = f(x) elementwise in place, x f32.
template <typename F>
void map_in_place(const CpuContext& c, const Tensor& x, const char* what, F f) {
  BRIGADE_CHECK(x.dtype == DType::f32, what);
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i] = f(p[i]);
  });
}

}  // namespace

// torch's LayerNorm in f32: the mean, then the mean of the squared deviations (each summed in
// double, so a wide row loses nothing to the order of the sum), (x - mean) * rsqrt(var + eps) * w + b.
void layer_norm_row(const float* x, const float* w, const float* b, float eps, float* out, int64_t d) {
  double sum = 0.0;
  for (int64_t j = 0; j < d; ++j) sum += x[j];
  const float mean = static_cast<float>(sum / static_cast<double>(d));
  double sq = 0.0;
  for (int64_t j = 0; j < d; ++j) sq += static_cast<double>((x[j] - mean) * (x[j] - mean));
  const float inv = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(d)) + eps);
  for (int64_t j = 0; j < d; ++j) {
    const float v = (x[j] - mean) * inv * w[j];
    out[j] = b != nullptr ? v + b[j] : v;
  }
}

void layer_norm(const CpuContext& c, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                const Tensor& out) {
  const int64_t n = x.dim(0), d = x.row_numel();
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32 && out.numel() == x.numel(),
                "layer_norm: x and out [n, d] f32");
  BRIGADE_CHECK(weight.numel() == d && (bias.empty() || bias.numel() == d), "layer_norm: weight [d], bias [d] or none");
  std::vector<float> wbuf(static_cast<size_t>(d)), bbuf(static_cast<size_t>(bias.empty() ? 0 : d));
  const float* w = as_f32(c, weight, wbuf.data());
  const float* b = bias.empty() ? nullptr : as_f32(c, bias, bbuf.data());
  const float* xp = x.as<const float>();
  float* op = out.as<float>();
  c.pool->parallel_for(n, row_grain(d), [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) layer_norm_row(xp + i * d, w, b, eps, op + i * d, d);
  });
}

void gelu_tanh(const CpuContext& c, const Tensor& x) {
  BRIGADE_CHECK(x.dtype == DType::f32, "gelu_tanh: x f32");
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) { c.kernels->gelu_tanh(p + b, e - b); });
}

// torch's CPU GELU (approximate='none') in f32: 0.5 x (1 + erf(x / sqrt(2))).
void gelu(const CpuContext& c, const Tensor& x) {
  BRIGADE_CHECK(x.dtype == DType::f32, "gelu: x f32");
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) { c.kernels->gelu_erf(p + b, e - b); });
}

// transformers' QuickGELUActivation: x * sigmoid(1.702 x), the sigmoid 1 / (1 + exp(-z)) in f32.
void quick_gelu(const CpuContext& c, const Tensor& x) {
  map_in_place(c, x, "quick_gelu: x f32", [](float v) { return v * (1.0f / (1.0f + std::exp(-1.702f * v))); });
}

void scatter_rows(const CpuContext& c, const Tensor& y, const Tensor& rows, const Tensor& src) {
  const int64_t r = rows.numel(), n = y.dim(0);
  BRIGADE_CHECK(src.dtype == y.dtype && src.numel() == r * y.row_numel(), "scatter_rows: y [n, d], src [r, d]");
  const size_t row_bytes = static_cast<size_t>(y.row_numel()) * dtype_size(y.dtype);
  const auto* idx = rows.as<const int32_t>();
  c.pool->parallel_for(r, row_grain(y.row_numel()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      BRIGADE_CHECK(idx[i] >= 0 && idx[i] < n, "scatter_rows: row index inside y");
      std::memcpy(static_cast<char*>(y.data) + static_cast<size_t>(idx[i]) * row_bytes,
                  static_cast<const char*>(src.data) + static_cast<size_t>(i) * row_bytes, row_bytes);
    }
  });
}

void blend_rows(const CpuContext& c, const Tensor& x, const Tensor& rows, const Tensor& weights, const Tensor& out) {
  const int64_t n = x.dim(0), d = x.row_numel(), r = out.dim(0);
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32 && out.row_numel() == d,
                "blend_rows: x [n, d] and out [r, d] f32");
  BRIGADE_CHECK(rows.dtype == DType::i32 && weights.dtype == DType::f32 && r > 0 && rows.numel() % r == 0 &&
                    weights.numel() == rows.numel(),
                "blend_rows: rows [r, K] i32 and weights [r, K] f32");
  const int64_t k = rows.numel() / r;
  const auto* idx = rows.as<const int32_t>();
  const auto* w = weights.as<const float>();
  const auto* src = x.as<const float>();
  auto* dst = out.as<float>();
  c.pool->parallel_for(r, row_grain(d), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* o = dst + i * d;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t row = idx[i * k + j];
        BRIGADE_CHECK(row >= 0 && row < n, "blend_rows: row index inside x");
        const float wj = w[i * k + j];
        const float* s = src + int64_t{row} * d;
        if (j == 0)
          for (int64_t col = 0; col < d; ++col) o[col] = wj * s[col];
        else
          for (int64_t col = 0; col < d; ++col) o[col] += wj * s[col];
      }
    }
  });
}

}  // namespace brigade::cpu
