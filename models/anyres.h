// LLaVA-NeXT's "anyres" image layout (LlavaNextForConditionalGeneration, VisionConfig::anyres):
// an image of any size becomes the base tile (the image squashed to tile x tile pixels) and the
// tiles of the image resized within the best of the checkpoint's image_grid_pinpoints and padded
// to it; the tower encodes each tile into side x side features, and the model packs the base
// tile's features, then the tiles' feature grid cut back to the image's aspect (unpad_image),
// each row of it followed by the image_newline embedding. Everything here follows transformers'
// select_best_resolution, get_anyres_image_grid_shape, unpad_image and
// LlavaNextProcessor._get_unpadded_features, from the image's own height and width (its
// image_sizes entry), which is what a brigade image of this kind carries as its grid.
//
// LLaVA-OneVision (LlavaOnevisionForConditionalGeneration, AnyresGrid::max_area > 0) lays a lone
// image out the same way and then, as its vision_aspect_ratio anyres_max_N says, resizes the kept
// feature grid bilinearly when it holds more than 1.1^2 * N tiles' worth of features (to about N
// tiles' worth, aspect kept) before the newlines go in. An image of a prompt with several images is
// its base tile alone (LlavaOnevisionImageProcessor pads it square; pack_image_features appends
// one image_newline): such an image's grid is 0 x 0 ("base only"), its pixels [1, 3, S, S].
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

struct AnyresGrid {
  int tile = 0;  // pixels per tile side: the tower's image_size
  int side = 0;  // features per tile side: image_size / patch_size
  std::vector<std::array<int, 2>> pinpoints;  // image_grid_pinpoints: (height, width), whole tiles
  int max_area = 0;  // LLaVA-OneVision's anyres_max_N: N tiles' worth of features at most; 0: LLaVA-NeXT's
  bool on() const { return !pinpoints.empty(); }
  bool onevision() const { return max_area > 0; }
};

// A base-only image's grid (LLaVA-OneVision's images of a prompt with several).
inline bool anyres_base_only(int height, int width) { return height == 0 && width == 0; }

// invalid_argument (prefixed with `which`) unless an image of height x width pixels is one g
// takes: each side in [1, kMaxImageSide], or 0 x 0 (base only) under LLaVA-OneVision.
Status check_anyres_size(const AnyresGrid& g, int height, int width, const std::string& which);

// select_best_resolution: the pinpoint (height, width) that keeps the most of an image of
// height x width pixels when it is scaled to fit, the least padding among equals, the first
// among those.
std::array<int, 2> select_best_resolution(int height, int width, const std::vector<std::array<int, 2>>& pinpoints);

// Where an image's features lie: its tiles (tile_rows x tile_cols of them after the base tile),
// and the part of their (tile_rows * side) x (tile_cols * side) feature grid that unpad_image
// keeps: rows [row0, row0 + rows), columns [col0, col0 + cols); out_rows x out_cols is that part
// after LLaVA-OneVision's resize (rows x cols when none). A base-only image has no tiles and an
// empty grid.
struct AnyresLayout {
  int tile_rows = 0, tile_cols = 0;
  int rows = 0, cols = 0;
  int row0 = 0, col0 = 0;
  int out_rows = 0, out_cols = 0;
  int tiles() const { return tile_rows * tile_cols; }
  bool resized() const { return out_rows != rows || out_cols != cols; }
};
AnyresLayout anyres_layout(const AnyresGrid& g, int height, int width);

// The image's tokens (and features): side^2 for the base tile, then out_rows * (out_cols + 1);
// a base-only image side^2 + 1.
int anyres_tokens(const AnyresGrid& g, int height, int width);
// The most tokens, and tiles (the base one included), any image can take under g's pinpoints
// (an upper bound under LLaVA-OneVision's resize: every cut of every pinpoint's grid).
int anyres_max_tokens(const AnyresGrid& g);
int anyres_max_tiles(const AnyresGrid& g);
// Whether LLaVA-OneVision's resize leaves every image at least one feature row and column (an
// anyres_max_N too small for its pinpoints' grids can resize one to nothing, which transformers'
// interpolate refuses).
bool anyres_resize_keeps_rows(const AnyresGrid& g);

// LLaVA-OneVision's resize of a rows x cols feature grid to out_rows x out_cols, as torch's
// interpolate(mode="bilinear", align_corners=False) computes its taps in f32: output index i of
// an axis reads input indices i0 and i1 (i1 = i0 + 1, or i0 at the last) with weights w0 and w1.
struct BilinearTap {
  int i0 = 0, i1 = 0;
  float w0 = 1.0f, w1 = 0.0f;
};
std::vector<BilinearTap> bilinear_taps(int in, int out);

}  // namespace brigade
