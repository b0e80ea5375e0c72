// Internal to models/: Gemma 4's image encoder (VisionKind::gemma4), written over the Backend ops
// (Backend::supports_vision: the CPU backend, f32 activations) as transformers 5's
// Gemma4VisionModel and Gemma4MultimodalEmbedder compute it:
//
// - patches: the processor's rows [grid_h * grid_w, 3 p p] (values in [0, 1], each patch's
//   pixels y, x, channel) scaled 2 (x - 0.5) on the host, input_proj (no bias), plus the learned
//   x table row of the patch's column and y table row of its row (position_embedding_table
//   [2, P, hidden]);
// - layers: RMSNorm (scale w), q/k/v projections, q_norm / k_norm per head (with weights) and
//   v_norm (without), the axial 2D RoPE (the head's first half rotated NeoX-style by the patch's
//   x, the second half by its y, theta^(-4i / head_dim) each), attention over the image's patches
//   both ways with scale 1, o_proj, post-attention RMSNorm, residual, pre-FFW RMSNorm,
//   down(gelu_tanh(gate(x)) * up(x)), post-FFW RMSNorm, residual. Every linear is a
//   Gemma4ClippableLinear: with use_clipped_linears its input and output are clamped to the
//   checkpoint's input_min / input_max / output_min / output_max (clamps whose range is infinite
//   are skipped; the others run as Backend::clamp, the input's on a copy);
// - the pooler: the mean of each k x k block of patches (k = pooling_kernel_size) in row-major
//   block order, times sqrt(hidden), then (standardize) (x - std_bias) * std_scale (host, f32);
// - the embedder: RMSNorm without weight, embedding_projection into the text width.
//
// The RoPE runs as the backend's sectioned rotation (RopeConfig::sections, two planes x and y):
// q_proj's and k_proj's rows (and q_norm / k_norm's weights) are loaded with each head's quarters
// in the order 0, 2, 1, 3, so NeoX pair f of the permuted head is pair f of the first half (x)
// for f < head_dim / 4, of the second half (y) after; q . k is unchanged by the permutation.
// Images are encoded one per pass (their patch counts differ); scratch grows to the largest.
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "models/model.h"
#include "models/vision_config.h"
#include "models/vit_layer.h"
#include "models/weight_loader.h"

namespace brigade {

// config.json's vision_config (Gemma4VisionConfig, its defaults for absent fields: hidden 768,
// 16 layers, 12 heads, head_dim 64, MLP 3072, patch_size 16, pooling_kernel_size 3,
// position_embedding_size 10240, axial RoPE theta 100) and the top-level image ids
// (image_token_id 258880, boi_token_id 255999, eoi_token_id 258882 by default) of a
// Gemma4ForConditionalGeneration. Not present (n_layers 0) when vision_config is null or absent.
// Refuses by field: another hidden_activation, attention_bias, num_key_value_heads other than
// num_attention_heads, a head_dim other than hidden_size / num_attention_heads or not a multiple
// of 4, a rope_type other than axial, output_proj_dims other than hidden_size, an image token
// outside the text vocabulary.
Expected<VisionConfig> read_gemma4_vision(const nlohmann::json& config, int text_vocab);

class Gemma4Vision {
 public:
  // The most soft tokens an image has (Gemma4ImageProcessor's largest max_soft_tokens).
  static constexpr int64_t kMaxTokens = 1120;
  // Loads vision_tower.* and embed_vision.* (gemma3_tensors' names), shape-checked against v;
  // matrices as stored (never block-quantized), vectors and the position table f32, the clamp
  // bounds read to the host.
  Status load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden);
  // out [sum of images' tokens, text_hidden] = each image's features in order ((grid_h / k) *
  // (grid_w / k) rows each). Checks each image's grid (positive multiples of k, coordinates
  // within the position table) and pixel count.
  Status encode(std::span<const StepImage> images, const Tensor& out);
  // The work of encoding an image of grid_h x grid_w patches: 2 flops per weight per patch, the
  // attention's 4 * hidden per (patch, patch) pair, the embedder's matmul.
  double flops(int grid_h, int grid_w) const;

 private:
  struct Linear {
    OwnedTensor w;
    float in_lo = 0, in_hi = 0, out_lo = 0, out_hi = 0;
    bool clamp_in = false, clamp_out = false;
  };
  struct Layer {
    OwnedTensor in_norm, post_attn_norm, pre_ffw_norm, post_ffw_norm, q_norm, k_norm;
    Linear q, k, v, o, gate, up, down;
  };
  Expected<Linear> load_linear(WeightLoader& w, const std::string& prefix, int64_t rows, int64_t cols,
                               const std::vector<Slice>& row_order);
  Status ensure_scratch(int64_t patches);
  void linear(const Linear& L, const Tensor& x, const Tensor& out);
  Status encode_one(const StepImage& im, const Tensor& out);

  Backend* backend_ = nullptr;
  VisionConfig v_;
  int text_hidden_ = 0;
  OwnedTensor input_proj_, pos_table_, ones_, proj_;
  std::vector<float> std_bias_, std_scale_;
  std::vector<Layer> layers_;
  RopeConfig rope_;
  int64_t capacity_ = 0;  // patches the scratch holds
  OwnedTensor x_, normed_, sep_, qkv_, attn_, delta_, lin_in_, gate_, up_, pooled_, pooled_normed_;
  OwnedTensor ids_, planes_, order_;  // i32: the position tables' rows, the RoPE's planes, q|k|v's layout
  VitAttention attention_;
  std::vector<float> host_;
};

}  // namespace brigade
