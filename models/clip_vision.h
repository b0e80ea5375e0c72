// Internal to models/: LLaVA's image encoder (VisionKind::llava), over the Backend ops
// (Backend::supports_vision): transformers' LlavaModel.get_image_features, i.e. a CLIP or SigLIP
// vision tower run up to the hidden states vision_feature_layer names, the rows that
// vision_feature_select_strategy keeps, and LlavaMultiModalProjector.
//
// An image [3, S, S] becomes its n_patches patch rows (the stride-p convolution as one matmul over
// c-major patches; SigLIP's with a bias), CLIP's class embedding in front (position 0), the
// learned position table added, CLIP's pre_layrnorm, then the pre-norm encoder layers
// (models/vit_layer.h; quick_gelu for CLIP, gelu_pytorch_tanh for SigLIP, as hidden_act says).
// hidden_states[k] is the state after k layers (0: the embeddings after pre_layrnorm); no
// post_layernorm. The projector's linear_1 reads the chosen states concatenated, so its columns
// are read in blocks of the tower's width, one per state, and each state's rows (all of them under
// "full", all but the first under "default") are multiplied as soon as the layers reach it:
// linear_1 = sum over states of x_k W_k (+ bias), then the activation and linear_2. Only the
// layers up to the deepest state read are loaded and run.
//
// LLaVA-NeXT (VisionConfig::anyres): an image is its base tile and its tiles ([1 + tiles, 3, S, S],
// its grid its height x width in pixels); each tile is encoded as an image above, and the image's
// features are transformers' pack_image_features: the base tile's rows, then the tiles' feature
// grid cut back to the image's aspect (models/anyres.h), each of its rows followed by
// image_newline. Each image's tiles are encoded in passes of their own, one image after another.
// LLaVA-OneVision (anyres.onevision()): that grid is first resized bilinearly where
// anyres_max_N says (one blend_rows of four taps a feature, newlines included); a base-only image
// (grid 0 x 0, one tile) is its tile's rows and one image_newline.
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

class ClipVision {
 public:
  // Loads vision_tower.* and multi_modal_projector.* (gemma3_tensors' names: the Hub's
  // vision_tower.vision_model.* and transformers 5's model.vision_tower.vision_model.* alike),
  // shape-checked against v; matrices as stored (never block-quantized), vectors f32. Refuses a
  // backend whose activations are not f32.
  Status load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden);
  // out [sum of the images' image_features, text_hidden] (activation dtype) = each image's
  // features in order. Checks each image's grid (the tower's side x side; LLaVA-NeXT: a size in
  // pixels) and pixel count (3 S S floats a tile) before running anything; tiles are encoded a few
  // at a time in scratch allocated at the first call.
  Status encode(std::span<const StepImage> images, const Tensor& out);
  // The rows a tile becomes: n_patches + extra_tokens (an image of LLaVA 1.5 is one tile).
  int n_features() const { return v_.n_patches() + v_.extra_tokens; }
  // The most rows any image becomes.
  int max_image_features() const { return v_.anyres.on() ? anyres_max_tokens(v_.anyres) : n_features(); }
  // The work of encoding one image by the roofline rule (Model::step_cost): its tiles'.
  double flops(const StepImage& im) const;
  double weight_bytes() const { return weight_bytes_; }

 private:
  struct Scratch {
    VitScratch vit;  // the patch rows, the state and the layers' buffers; max_images tiles per pass
    OwnedTensor selected, select_rows, proj, proj_part;
    // LLaVA-NeXT: one image's tiles' features then image_newline [max tiles * F + 1, text_hidden],
    // and the rows of it each of the image's features takes.
    OwnedTensor tile_features, pack_rows;
    // LLaVA-OneVision's resize: four rows of tile_features and their weights per feature.
    OwnedTensor blend_rows, blend_weights;
  };
  int n_positions() const { return v_.n_patches() + (v_.class_token ? 1 : 0); }
  double flops_per_tile() const;
  Status allocate_scratch();
  Status check_image(const StepImage& im) const;
  // One pass over tiles [first, first + n) (each [3, S, S]) into out rows [first * F, (first + n) * F).
  void encode_pass(std::span<const float* const> tiles, size_t first, int n, const Tensor& out);
  // LLaVA-NeXT / OneVision: one image's tiles encoded and packed into out [image_features, text_hidden].
  Status encode_anyres(const StepImage& im, const Tensor& out);
  // The row of `all` (encode_anyres' tile features) holding the tiles' feature grid's (y, x).
  int32_t tile_feature(const AnyresLayout& l, int y, int x) const;
  // LLaVA-OneVision's resized grid (l.resized()): the base tile's rows, then each row of the
  // resized grid and a newline (row `newline` of all), into out by blend_rows.
  Status blend_anyres(const AnyresLayout& l, int32_t newline, const Tensor& all, const Tensor& out);
  // Adds hidden state `x`'s kept rows times linear_1's column block `block` into proj (the first
  // block writes it, with the bias).
  void project_state(const Tensor& x, int n, size_t block);

  Backend* backend_ = nullptr;
  VisionConfig v_;
  int text_hidden_ = 0;
  VitAct act_ = VitAct::quick_gelu, projector_act_ = VitAct::gelu;
  OwnedTensor patch_w_, patch_b_, class_emb_, pos_, pre_w_, pre_b_;
  std::vector<VitLayer> layers_;       // the layers up to the deepest feature layer
  std::vector<OwnedTensor> linear_1_;  // per feature layer: linear_1's columns [text_hidden, hidden]
  OwnedTensor linear_1_b_, linear_2_, linear_2_b_;
  OwnedTensor image_newline_;  // LLaVA-NeXT: [text_hidden]
  Scratch sc_;
  double weight_bytes_ = 0.0;
};

}  // namespace brigade
