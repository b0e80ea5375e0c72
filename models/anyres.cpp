#include "models/anyres.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/status.h"
#include "models/image.h"

namespace brigade {
namespace {

// Python's int(round(x, 7)) for the non-negative sizes unpad_image computes.
int round7_int(double x) { return static_cast<int>(std::trunc(std::nearbyint(x * 1e7) / 1e7)); }

// Python's float floor division a // b (float_floor_div) for a >= 0, b > 0: from fmod, so that
// it can differ from floor(a / b) when a / b rounds up to a whole number.
double py_floordiv(double a, double b) {
  const double mod = std::fmod(a, b);
  const double div = (a - mod) / b;
  if (div == 0.0) return 0.0;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// LLaVA-OneVision's anyres_max_N resize of a rows x cols grid of side x side tiles' features:
// ratio = sqrt(rows * cols / (N * side^2)); past 1.1 the grid becomes int(rows // ratio) x
// int(cols // ratio).
void max_area_resize(const AnyresGrid& g, int rows, int cols, int& out_rows, int& out_cols) {
  out_rows = rows, out_cols = cols;
  if (!g.onevision()) return;
  const double ratio = std::sqrt(static_cast<double>(int64_t{rows} * cols) /
                                 static_cast<double>(int64_t{g.max_area} * g.side * g.side));
  if (!(ratio > 1.1)) return;
  out_rows = static_cast<int>(py_floordiv(rows, ratio));
  out_cols = static_cast<int>(py_floordiv(cols, ratio));
}

}  // namespace

Status check_anyres_size(const AnyresGrid& g, int height, int width, const std::string& which) {
  if (g.onevision() && anyres_base_only(height, width)) return Status::ok();
  if (height > 0 && width > 0 && height <= kMaxImageSide && width <= kMaxImageSide) return Status::ok();
  return invalid_argument(which + " is " + std::to_string(height) + " x " + std::to_string(width) +
                          " pixels; this model's images give their height x width in pixels, each in [1, " +
                          std::to_string(kMaxImageSide) + "]" +
                          (g.onevision() ? ", or 0 x 0 for an image that is its base tile alone (as several images "
                                           "in one prompt are)"
                                         : ""));
}

std::array<int, 2> select_best_resolution(int height, int width, const std::vector<std::array<int, 2>>& pinpoints) {
  BRIGADE_CHECK(height > 0 && width > 0 && !pinpoints.empty(), "select_best_resolution: an image and pinpoints");
  std::array<int, 2> best = pinpoints.front();
  int64_t max_effective = 0;
  int64_t min_wasted = std::numeric_limits<int64_t>::max();
  for (const auto& [h, w] : pinpoints) {
    const double scale = std::min(static_cast<double>(w) / width, static_cast<double>(h) / height);
    const auto down_w = static_cast<int64_t>(width * scale), down_h = static_cast<int64_t>(height * scale);
    const int64_t effective = std::min(down_w * down_h, int64_t{width} * height);
    const int64_t wasted = int64_t{w} * h - effective;
    if (effective > max_effective || (effective == max_effective && wasted < min_wasted)) {
      max_effective = effective;
      min_wasted = wasted;
      best = {h, w};
    }
  }
  return best;
}

AnyresLayout anyres_layout(const AnyresGrid& g, int height, int width) {
  BRIGADE_CHECK(g.on() && g.tile > 0 && g.side > 0, "anyres_layout: LLaVA-NeXT's grid");
  if (g.onevision() && anyres_base_only(height, width)) return AnyresLayout{};
  const auto [best_h, best_w] = select_best_resolution(height, width, g.pinpoints);
  AnyresLayout l;
  l.tile_rows = best_h / g.tile, l.tile_cols = best_w / g.tile;
  const int cur_h = l.tile_rows * g.side, cur_w = l.tile_cols * g.side;
  l.rows = cur_h, l.cols = cur_w;
  // unpad_image: the side the image's aspect leaves padded loses its padding, floor((cur - new) / 2)
  // from each end.
  const double original_aspect = static_cast<double>(width) / height, current_aspect = static_cast<double>(cur_w) / cur_h;
  if (original_aspect > current_aspect) {
    const int new_h = round7_int(height * (static_cast<double>(cur_w) / width));
    const int pad = (cur_h - new_h) / 2;
    l.row0 = pad, l.rows = cur_h - 2 * pad;
  } else {
    const int new_w = round7_int(width * (static_cast<double>(cur_h) / height));
    const int pad = (cur_w - new_w) / 2;
    l.col0 = pad, l.cols = cur_w - 2 * pad;
  }
  max_area_resize(g, l.rows, l.cols, l.out_rows, l.out_cols);
  return l;
}

int anyres_tokens(const AnyresGrid& g, int height, int width) {
  if (g.onevision() && anyres_base_only(height, width)) return g.side * g.side + 1;
  const AnyresLayout l = anyres_layout(g, height, width);
  return g.side * g.side + l.out_rows * (l.out_cols + 1);
}

namespace {

// fn(out_rows, out_cols) for the feature grid of every image size g's pinpoints can give:
// unpad_image cuts a pinpoint's rows or its columns (never both), and OneVision's resize depends
// on the cut, so every cut; LLaVA-NeXT's largest is the uncut grid.
template <typename Fn>
void for_each_cut(const AnyresGrid& g, Fn&& fn) {
  for (const auto& [h, w] : g.pinpoints) {
    const int rows = (h / g.tile) * g.side, cols = (w / g.tile) * g.side;
    for (int cut = g.onevision() ? 1 : rows; cut <= rows; ++cut) {
      int r = 0, c = 0;
      max_area_resize(g, cut, cols, r, c);
      fn(r, c);
    }
    for (int cut = g.onevision() ? 1 : cols; cut <= cols; ++cut) {
      int r = 0, c = 0;
      max_area_resize(g, rows, cut, r, c);
      fn(r, c);
    }
  }
}

}  // namespace

int anyres_max_tokens(const AnyresGrid& g) {
  int most = g.onevision() ? g.side * g.side + 1 : 0;
  for_each_cut(g, [&](int r, int c) { most = std::max(most, g.side * g.side + r * (c + 1)); });
  return most;
}

bool anyres_resize_keeps_rows(const AnyresGrid& g) {
  bool keeps = true;
  for_each_cut(g, [&](int r, int c) { keeps = keeps && r > 0 && c > 0; });
  return keeps;
}

int anyres_max_tiles(const AnyresGrid& g) {
  int most = 0;
  for (const auto& [h, w] : g.pinpoints) most = std::max(most, 1 + (h / g.tile) * (w / g.tile));
  return most;
}

std::vector<BilinearTap> bilinear_taps(int in, int out) {
  BRIGADE_CHECK(in > 0 && out > 0, "bilinear_taps: non-empty axes");
  std::vector<BilinearTap> taps(static_cast<size_t>(out));
  if (in == out) {  // torch copies
    for (int i = 0; i < out; ++i) taps[static_cast<size_t>(i)] = {i, i, 1.0f, 0.0f};
    return taps;
  }
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int i = 0; i < out; ++i) {
    float src = scale * (static_cast<float>(i) + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
    const int i0 = std::min(static_cast<int>(std::floor(src)), in - 1);
    const float w1 = std::min(std::max(src - static_cast<float>(i0), 0.0f), 1.0f);
    taps[static_cast<size_t>(i)] = {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0f - w1, w1};
  }
  return taps;
}

}  // namespace brigade
