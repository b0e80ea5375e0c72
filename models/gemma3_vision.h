// Internal to models/: Gemma 3's image encoder, written over the Backend ops
// (Backend::supports_vision): the SigLIP vision tower (transformers' SiglipVisionModel, its
// last_hidden_state) and Gemma3MultiModalProjector. An image [3, S, S] becomes n_patches patch
// rows (a convolution of stride p is a matmul over c-major patches) plus a learned position
// table, runs through the tower's pre-norm encoder layers (LayerNorm, attention with biases in
// which every patch sees every other, LayerNorm, fc1, gelu_tanh, fc2), the post LayerNorm, an
// average pool of k x k patches into tokens_per_image rows, Gemma's RMSNorm (1 + w) and the
// projection into the language model's width: the rows that replace the image's tokens.
// PaliGemma's (VisionKind::paligemma): the same tower, its last_hidden_state (a token per patch)
// through PaliGemmaMultiModalProjector's one linear layer with a bias, no pool and no norm.
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

class Gemma3Vision {
 public:
  // Loads vision_tower.* and multi_modal_projector.* (models/gemma_config.h gemma3_tensors'
  // names; PaliGemma's multi_modal_projector.linear.*), shape-checked against v; matrices as stored (never block-quantized: `weights: q8_0`
  // leaves the tower in float), vectors f32.
  Status load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden);
  // out [images.size() * tokens_per_image, text_hidden] (activation dtype) = each image's
  // features in order. Checks each image's pixel count; images are encoded a few at a time
  // (models/vit_scratch.h: kVitRowsPerPass patch rows), in scratch allocated at the first call.
  Status encode(std::span<const StepImage> images, const Tensor& out);
  // The work of encoding one image by the roofline rule (Model::step_cost): 2 flops per weight
  // per patch row, the attention's 4 * hidden per (patch, patch) pair, the projector's matmul;
  // the tower's weights are read once per pass.
  double flops_per_image() const;
  double weight_bytes() const { return weight_bytes_; }

 private:
  struct Scratch {
    VitScratch vit;  // the patch rows, the state and the layers' buffers; max_images per pass
    OwnedTensor pooled, pooled_normed, pool_rows;
  };
  Status allocate_scratch();
  // One pass over images [first, first + n) into out rows [first * T, (first + n) * T).
  Status encode_pass(std::span<const StepImage> images, size_t first, int n, const Tensor& out);
  void upload_i32(const Tensor& t, const std::vector<int32_t>& host);

  Backend* backend_ = nullptr;
  VisionConfig v_;
  int text_hidden_ = 0;
  OwnedTensor patch_w_, patch_b_, pos_, post_w_, post_b_, proj_norm_, proj_, proj_b_;  // proj_b_: PaliGemma's
  std::vector<VitLayer> layers_;
  Scratch sc_;
  double weight_bytes_ = 0.0;
};

}  // namespace brigade
