// Multimodal RoPE (M-RoPE) of the Qwen2-VL family: each token has three rotary positions
// (temporal, height, width). Text tokens have all three equal; an image's tokens, a merged grid of
// h x w, sit at (base, base + y, base + x) where base is the position the image's first token
// would have as text; the text after the image resumes at base + max(h, w). So the image's h * w
// tokens span max(h, w) positions, and every later token's rotary position runs
// mrope_image_shift(h, w) = h * w - max(h, w) behind its position in the sequence (the KV index).
// transformers: Qwen2VLModel.get_rope_index / Qwen2_5_VLModel.get_rope_index (images; no video).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/model.h"

namespace brigade {

// invalid_argument unless a dynamic image's grid of grid_h x grid_w patches is whole merge x merge
// blocks (positive sides, multiples of merge); `which` names the image in the message.
inline Status check_merge_grid(int32_t grid_h, int32_t grid_w, int merge, const std::string& which) {
  if (grid_h > 0 && grid_w > 0 && merge > 0 && grid_h % merge == 0 && grid_w % merge == 0) return Status::ok();
  return invalid_argument(which + " has a grid of " + std::to_string(grid_h) + " x " + std::to_string(grid_w) +
                          " patches; each side must be a positive multiple of the merge size " + std::to_string(merge));
}

// How far the rotary positions fall behind the token positions past an image of a merged grid
// h x w (tokens). 0 for a 1-token image.
inline int32_t mrope_image_shift(int32_t h, int32_t w) { return h * w - std::max(h, w); }

// The three planes of rotary positions of a step ([3 * n_tokens]: all temporal, then height,
// then width; RopeConfig::sections order), from batch.positions, batch.rope_delta (empty = 0) and
// the dynamic images in batch.images (grid_h / grid_w in patches, merged merge x merge into
// tokens). A text row j of sequence s has positions[j] - delta on every plane, where delta is
// rope_delta[s] plus the shifts of the images of s before row j in this step. An image's rows
// may be a part of it (StepImage::first, the rest in other steps): their positions are those of
// the same tokens in the whole image, and rope_delta counts only images wholly before the step
// (check_step_images checks the images first).
std::vector<int32_t> mrope_positions(const StepBatch& batch, int merge);

}  // namespace brigade
