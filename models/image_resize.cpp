// Built with -ffp-contract=off (models/CMakeLists.txt): Pillow's wheels compute the filter
// weights without fused multiply-adds, and a fused bicubic weight can round differently.
#include "models/image_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace brigade {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // 8 result bits, 2 bits of headroom for negative lobes

double bilinear_weight(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic with a = -0.5, as Pillow evaluates it (the expression order fixes the rounding).
double bicubic_weight(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * std::numbers::pi;
  return std::sin(x) / x;
}

// Pillow's lanczos_filter: the sinc windowed by a 3-lobe sinc, cut at [-3, 3) (not symmetric at
// the ends, as Pillow has it). Pillow calls libm's sin, as std::sin does here.
double lanczos_weight(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

struct Filter {
  double (*weight)(double);
  double support;  // in input pixels at scale 1
};

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::lanczos: return {lanczos_weight, 3.0};
    case Resample::bilinear: return {bilinear_weight, 1.0};
    case Resample::bicubic: return {bicubic_weight, 2.0};
  }
  BRIGADE_CHECK(false, "Resample is one of the enumerators (parsers map other codes to errors)");
  return {};
}

// The taps of one pass: output i reads input [first[i], first[i] + count[i]) with
// weights[i * n_taps + t], fixed point with kPrecisionBits fractional bits.
struct Taps {
  int n_taps = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // [n_out, n_taps]
};

Taps precompute_taps(int n_in, int n_out, Resample resample) {
  const Filter filter = filter_of(resample);
  const double scale = double(float(n_in)) / n_out;  // Pillow: (double)(box_end - box_start) / n_out
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter.support * filter_scale;
  const double inv_filter_scale = 1.0 / filter_scale;  // multiplied, not divided, as Pillow does
  Taps t;
  t.n_taps = int(std::ceil(support)) * 2 + 1;
  t.first.resize(n_out);
  t.count.resize(n_out);
  t.weights.assign(size_t(n_out) * t.n_taps, 0);
  std::vector<double> w(t.n_taps);
  for (int i = 0; i < n_out; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(int(center - support + 0.5), 0);
    const int n = std::min(int(center + support + 0.5), n_in) - lo;
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
      const double x = (k + lo - center + 0.5) * inv_filter_scale;
      w[k] = filter.weight(x);
      sum += w[k];
    }
    for (int k = 0; k < n; ++k) {
      const double v = sum != 0.0 ? w[k] / sum : w[k];
      t.weights[size_t(i) * t.n_taps + k] = int32_t(v < 0 ? -0.5 + v * (1 << kPrecisionBits)
                                                          : 0.5 + v * (1 << kPrecisionBits));
    }
    t.first[i] = lo;
    t.count[i] = n;
  }
  return t;
}

uint8_t round_clip(int acc) { return uint8_t(std::clamp(acc >> kPrecisionBits, 0, 255)); }

// Horizontal pass over input rows [row_begin, row_end): [rows, w_in, 3] -> [rows, w_out, 3].
std::vector<uint8_t> resample_rows(const std::vector<uint8_t>& in, int w_in, int row_begin, int row_end,
                                   const Taps& t) {
  const int w_out = int(t.first.size());
  std::vector<uint8_t> out(size_t(row_end - row_begin) * w_out * 3);
  for (int y = row_begin; y < row_end; ++y) {
    const uint8_t* src = in.data() + size_t(y) * w_in * 3;
    uint8_t* dst = out.data() + size_t(y - row_begin) * w_out * 3;
    for (int x = 0; x < w_out; ++x) {
      const int32_t* k = &t.weights[size_t(x) * t.n_taps];
      int acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int j = 0; j < t.count[x]; ++j) {
        const uint8_t* p = src + size_t(t.first[x] + j) * 3;
        for (int c = 0; c < 3; ++c) acc[c] += p[c] * k[j];
      }
      for (int c = 0; c < 3; ++c) dst[x * 3 + c] = round_clip(acc[c]);
    }
  }
  return out;
}

// Vertical pass: [.., w, 3] whose row 0 is input row `row_offset` -> [h_out, w, 3].
std::vector<uint8_t> resample_columns(const std::vector<uint8_t>& in, int w, int row_offset, const Taps& t) {
  const int h_out = int(t.first.size());
  const size_t stride = size_t(w) * 3;
  std::vector<uint8_t> out(size_t(h_out) * stride);
  for (int y = 0; y < h_out; ++y) {
    const int32_t* k = &t.weights[size_t(y) * t.n_taps];
    const uint8_t* src = in.data() + size_t(t.first[y] - row_offset) * stride;
    for (size_t x = 0; x < stride; ++x) {
      int acc = 1 << (kPrecisionBits - 1);
      for (int j = 0; j < t.count[y]; ++j) acc += src[size_t(j) * stride + x] * k[j];
      out[size_t(y) * stride + x] = round_clip(acc);
    }
  }
  return out;
}

// The horizontal pass (when the width changes), then the vertical one (when the height does).
Image resize_horizontal_first(const Image& src, int width, int height, Resample filter) {
  BRIGADE_CHECK(width >= 1 && height >= 1 && width <= kMaxImageSide && height <= kMaxImageSide,
                "resize target within [1, kMaxImageSide] per side");
  BRIGADE_CHECK(src.rgb.size() == size_t(src.width) * src.height * 3 && !src.rgb.empty(),
                "src is a decoded image: rgb holds [height, width, 3]");
  Image out{width, height, {}, {}};
  if (width == src.width && height == src.height) {
    out.rgb = src.rgb;
    return out;
  }
  const Taps vertical = precompute_taps(src.height, height, filter);
  // Only the input rows the vertical pass reads go through the horizontal pass.
  const int row_begin = vertical.first.front();
  const int row_end = vertical.first.back() + vertical.count.back();
  std::vector<uint8_t> rows;
  int row_offset = 0;
  if (width != src.width) {
    rows = resample_rows(src.rgb, src.width, row_begin, row_end, precompute_taps(src.width, width, filter));
    row_offset = row_begin;
  } else {
    rows = src.rgb;
  }
  out.rgb = height != src.height ? resample_columns(rows, width, row_offset, vertical) : std::move(rows);
  return out;
}

}  // namespace

// Pillow 13 (libImaging/Resample.c, ImagingResampleInner; 11.0 always ran the horizontal pass
// first) runs the vertical pass first when the height shrinks by more than twice as many pixels
// as the width. Each pass rounds to uint8, so the order shows in the bytes; a resize that keeps
// a side runs only the other pass, so two calls make the vertical-first order.
Image resize_rgb(const Image& src, int width, int height, Resample filter) {
  const int shrink_h = src.height - height, shrink_w = src.width - width;
  if (shrink_h > 0 && shrink_h > 2 * shrink_w)
    return resize_horizontal_first(resize_horizontal_first(src, src.width, height, filter), width, height, filter);
  return resize_horizontal_first(src, width, height, filter);
}

}  // namespace brigade
