// LLaVA-NeXT's "anyres" image layout (LlavaNextForConditionalGeneration, VisionConfig::anyres):
// an image of any size becomes the base tile (the image squashed to tile x tile pixels) and the
// tiles of the image resized within the best of the checkpoint's image_grid_pinpoints and padded
// to it; the tower encodes each tile into side x side features, and the model packs the base
// tile's features, then the tiles' feature grid cut back to the image's aspect (unpad_image),
// each row of it followed by the image_newline embedding. Everything here follows transformers'
// select_best_resolution, get_anyres_image_grid_shape, unpad_image and
// LlavaNextProcessor._get_unpadded_features, from the image's own height and width (its
// image_sizes entry), which is what a brigade image of this kind carries as its grid.
#pragma once

#include <array>
#include <vector>

namespace brigade {

struct AnyresGrid {
  int tile = 0;  // pixels per tile side: the tower's image_size
  int side = 0;  // features per tile side: image_size / patch_size
  std::vector<std::array<int, 2>> pinpoints;  // image_grid_pinpoints: (height, width), whole tiles
  bool on() const { return !pinpoints.empty(); }
};

// select_best_resolution: the pinpoint (height, width) that keeps the most of an image of
// height x width pixels when it is scaled to fit, the least padding among equals, the first
// among those.
std::array<int, 2> select_best_resolution(int height, int width, const std::vector<std::array<int, 2>>& pinpoints);

// Where an image's features lie: its tiles (tile_rows x tile_cols of them after the base tile),
// and the part of their (tile_rows * side) x (tile_cols * side) feature grid that unpad_image
// keeps: rows [row0, row0 + rows), columns [col0, col0 + cols).
struct AnyresLayout {
  int tile_rows = 0, tile_cols = 0;
  int rows = 0, cols = 0;
  int row0 = 0, col0 = 0;
  int tiles() const { return tile_rows * tile_cols; }
};
AnyresLayout anyres_layout(const AnyresGrid& g, int height, int width);

// The image's tokens (and features): side^2 for the base tile, then rows * (cols + 1).
int anyres_tokens(const AnyresGrid& g, int height, int width);
// The most tokens, and tiles (the base one included), any image can take under g's pinpoints.
int anyres_max_tokens(const AnyresGrid& g);
int anyres_max_tiles(const AnyresGrid& g);

}  // namespace brigade
