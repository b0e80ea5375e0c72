#include "models/anyres.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/status.h"

namespace brigade {
namespace {

// Python's int(round(x, 7)) for the non-negative sizes unpad_image computes.
int round7_int(double x) { return static_cast<int>(std::trunc(std::nearbyint(x * 1e7) / 1e7)); }

}  // namespace

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
  return l;
}

int anyres_tokens(const AnyresGrid& g, int height, int width) {
  const AnyresLayout l = anyres_layout(g, height, width);
  return g.side * g.side + l.rows * (l.cols + 1);
}

int anyres_max_tokens(const AnyresGrid& g) {
  int most = 0;
  for (const auto& [h, w] : g.pinpoints)
    most = std::max(most, g.side * g.side + (h / g.tile) * g.side * ((w / g.tile) * g.side + 1));
  return most;
}

int anyres_max_tiles(const AnyresGrid& g) {
  int most = 0;
  for (const auto& [h, w] : g.pinpoints) most = std::max(most, 1 + (h / g.tile) * (w / g.tile));
  return most;
}

}  // namespace brigade
