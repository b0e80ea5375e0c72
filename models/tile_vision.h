// Internal to models/: the towers whose images are square tiles of a SigLIP-style ViT followed by the
// pixel shuffle (VisionKind::idefics3: Idefics3's and SmolVLM's, transformers'
// Idefics3Model.get_image_features; VisionKind::aya_vision: Aya Vision's,
// AyaVisionModel.get_image_features), over the Backend ops (Backend::supports_vision).
//
// Each image the model sees is one tile of [3, S, S] pixels (S = image_size), its grid side x side
// patches (side = S / patch_size; the patch convolution's stride drops the last S % patch_size
// pixels of each side, as torch's Conv2d does). The processor's tiles of one picture reach the
// tower as that many images: the tokenizer splits them (actors/tokenizer). A tile runs alone
// through the tower: its side^2 patch rows (the stride-p convolution as one matmul over c-major
// patches, with its bias), the learned position table added (Idefics3: at
// Idefics3VisionEmbeddings' bucketed positions, idefics3_position_ids, for a whole tile the
// identity wherever transformers' float arithmetic gives it; SigLIP's: the identity), the pre-norm
// layers (models/vit_layer.h) up to the feature layer, and post_layernorm where the features are
// last_hidden_state (VisionConfig::final_norm: Idefics3's; Aya Vision reads hidden_states[k],
// before it). Then the pixel shuffle (merge m = scale_factor / downsample_factor) makes token
// (r, c) of the tile's (side / m)^2 the patches (m r + j, m c + k) for j, k in [0, m), k fastest,
// concatenated (Idefics3Connector's and AyaVisionMultiModalProjector's pixel_shuffle with their
// permutes: the same order, as one gather of patch rows whose m^2 consecutive rows are one token's
// [m^2 hidden] row), and the projector: Idefics3's modality_projection.proj, bias-free; Aya
// Vision's LayerNorm (adapter_layer_norm_eps), linear_1 to alignment_intermediate_size, the SwiGLU
// silu(second half) * first half, linear_2 (both with biases).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "models/model.h"
#include "models/vision_config.h"
#include "models/vit_layer.h"
#include "models/vit_scratch.h"
#include "models/weight_loader.h"

namespace brigade {

// Idefics3VisionEmbeddings' position ids for a tile of n x n whole patches out of a table of
// n x n: each axis' fractional coordinates i * float32(1 / n), clamped below 1 - 1e-6 and bucketed
// (torch.bucketize right=True) against torch.arange(1 / n, 1.0, 1 / n), as transformers computes
// them in float32; row-major.
std::vector<int32_t> idefics3_position_ids(int n);

class TileVision {
 public:
  // Loads the tower and projector, shape-checked against v: Idefics3's vision_model.* and
  // connector.* (models/idefics3_config.h idefics3_tensors' names), Aya Vision's vision_tower.* and
  // multi_modal_projector.* (the LLaVA names gemma3_tensors gives); only the layers up to the
  // feature layer; matrices as stored (never block-quantized), vectors f32. Refuses a backend whose
  // activations are not f32.
  Status load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden);
  // out [images * tile_tokens, text_hidden] = each tile's tokens in order. Checks every image (a
  // tile: grid side x side, [3, S, S] pixels) before running anything; tiles are encoded a few at
  // a time in scratch allocated at the first call.
  Status encode(std::span<const StepImage> images, const Tensor& out);
  int tile_tokens() const { return v_.image_features(v_.patches_per_side(), v_.patches_per_side()); }
  // The work of encoding one tile by the roofline rule (Model::step_cost).
  double flops_per_tile() const;

 private:
  struct Scratch {
    VitScratch vit;  // the patch rows, the state and the layers' buffers; max_images tiles per pass
    OwnedTensor shuffled, shuffle_ids;
    OwnedTensor gate_up, swiglu;  // Aya Vision's projector: [tokens, I] and [tokens, I / 2]
  };
  bool aya() const { return v_.kind == VisionKind::aya_vision; }
  std::string tower(const std::string& suffix) const { return (aya() ? "vision_tower." : "vision_model.") + suffix; }
  Status allocate_scratch();
  void encode_pass(std::span<const StepImage> tiles, size_t first, int n, const Tensor& out);

  Backend* backend_ = nullptr;
  VisionConfig v_;
  int text_hidden_ = 0;
  VitAct act_ = VitAct::gelu_tanh;
  OwnedTensor patch_w_, patch_b_, pos_, post_w_, post_b_;
  OwnedTensor proj_;                                          // Idefics3's projection
  OwnedTensor norm_w_, norm_b_, linear_1_, linear_1_b_, linear_2_, linear_2_b_;  // Aya Vision's
  std::vector<VitLayer> layers_;
  Scratch sc_;
};

}  // namespace brigade
