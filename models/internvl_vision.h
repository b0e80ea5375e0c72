// Internal to models/: InternVL's image encoder (VisionKind::internvl), over the Backend ops
// (Backend::supports_vision): transformers' InternVLModel.get_image_features.
//
// An image arrives as the processor's tiles (models/internvl_image_processor.h): T tiles of [3,
// S, S] pixels one after another, its grid (T * side) x side patches (side = S / patch_size).
// Each tile runs alone through InternViT: its side^2 patch rows (the stride-p convolution as one
// matmul over c-major patches, with its bias), the class token in front, the learned position
// table added (every tile is S pixels, so the table is never interpolated), then the pre-norm
// layers (models/vit_layer.h: LayerNorm or RMSNorm, q|k|v with optional biases and the
// whole-projection qk RMSNorm of InternViT-6B, full attention over the tile, the layer scales
// lambda_1 / lambda_2 folded into projection_layer and fc2 at load, fc1 / activation / fc2).
// hidden_states[k] is the state after k layers; feature layer -1 takes the last one through the
// final LayerNorm when use_mean_pooling is false. The class row is dropped and the pixel shuffle
// (merge m = 1 / downsample_ratio) makes token (r, c) of the tile's (side / m)^2 the patches
// (m r + j, m c + k) for j, k in [0, m), k fastest, concatenated: transformers' pixel_shuffle
// with both its transposes, done as one gather of patch rows whose m^2 consecutive rows are one
// token's [m^2 hidden] row. Then InternVLMultiModalProjector: LayerNorm (eps 1e-5), linear_1,
// the activation, linear_2. A tile's tokens follow in row-major order, the tiles in order.
#pragma once

#include <span>
#include <vector>

#include "core/backend.h"
#include "models/model.h"
#include "models/vision_config.h"
#include "models/vit_layer.h"
#include "models/vit_scratch.h"
#include "models/weight_loader.h"

namespace brigade {

class InternVision {
 public:
  // Loads vision_tower.* and multi_modal_projector.* (models/internvl_config.h internvl_tensors'
  // names: either checkpoint layout), shape-checked against v; only the layers up to the feature
  // layer. Matrices as stored (never block-quantized), vectors f32. Refuses a backend whose
  // activations are not f32.
  Status load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden);
  // out [sum of the images' features, text_hidden] = each image's tiles' tokens in order. Checks
  // each image's grid (a whole number of tiles: grid_w = side, grid_h = T side) and pixel count
  // before running anything; tiles are encoded a few at a time in scratch allocated at the first
  // call.
  Status encode(std::span<const StepImage> images, const Tensor& out);
  // Tokens of one tile: (side / merge)^2.
  int tile_tokens() const { return v_.image_features(v_.patches_per_side(), v_.patches_per_side()); }
  // The work of encoding one tile by the roofline rule (Model::step_cost).
  double flops_per_tile() const;

 private:
  struct Scratch {
    VitScratch vit;  // the patch rows, the state and the layers' buffers; max_images tiles per pass
    OwnedTensor shuffled, proj, cls_rows, cls_ids, shuffle_ids;
  };
  int n_positions() const { return v_.n_patches() + 1; }
  Status allocate_scratch();
  // One pass over tiles[first, first + n) into out rows [first * F, (first + n) * F).
  void encode_pass(std::span<const float* const> tiles, size_t first, int n, const Tensor& out);
  Status load_layer(WeightLoader& w, int l);

  Backend* backend_ = nullptr;
  VisionConfig v_;
  int text_hidden_ = 0;
  VitAct act_ = VitAct::gelu, projector_act_ = VitAct::gelu;
  OwnedTensor patch_w_, patch_b_, cls_, pos_, final_w_, final_b_;
  std::vector<VitLayer> layers_;  // the layers up to the feature layer
  OwnedTensor norm_w_, norm_b_, linear_1_, linear_1_b_, linear_2_, linear_2_b_;
  Scratch sc_;
};

}  // namespace brigade
