// Internal to models/: the Qwen2-VL family's image encoders, written over the Backend ops
// (Backend::supports_vision): transformers' Qwen2_5_VisionTransformerPretrainedModel,
// Qwen2VisionTransformerPretrainedModel and Qwen3VLVisionModel, their pooler_output (the merged
// features that replace an image's tokens) and Qwen3-VL's deepstack_features.
//
// An image of grid_h x grid_w patches arrives as the processor flattens it: [grid_h * grid_w,
// 3 * temporal_patch * p * p] rows, each merge x merge block of patches merge^2 consecutive rows
// (models/qwen_image_processor.h). The patch embedding (a Conv3d of stride equal to its kernel,
// no bias) is one matmul over those rows. Each block is pre-norm: attention with biases over the
// fused qkv, the 2D rotary (head_dim d: frequency pair f < d/4 rotated by the patch's row, the
// next d/4 by its column, inv_freq 1 / 10000^(4f/d), neox halves; RopeConfig::sections), then
// the MLP. The merger norms each patch, concatenates the merge^2 patches of a block into one row
// and maps it through Linear, exact GELU, Linear into the language model's width.
//   - Qwen2.5-VL: RMSNorm, gated SiLU MLP (gate_proj, up_proj, down_proj, with biases). Blocks in
//     fullatt_block_indexes attend over the whole image, the others within windows of
//     window_size / merge / patch_size merged tokens per side (smaller at the image's bottom and
//     right edges): the patches are reordered window by window (whole merge blocks, as
//     get_window_index orders them) before the blocks and the merged tokens put back after.
//   - Qwen2-VL: LayerNorm, fc1 / quick_gelu / fc2, every block over the whole image.
//   - Qwen3-VL: as Qwen2-VL with linear_fc1 / gelu_pytorch_tanh / linear_fc2, a patch embedding
//     with a bias, plus learned position embeddings (pos_embed, a side x side grid) bilinearly
//     resampled (align_corners) to each image's grid on the host and added after the patch
//     embedding. After each block of deepstack_visual_indexes a DeepStack merger of its own
//     (LayerNorm over the concatenated merge^2 patches, then Linear, GELU, Linear) taps features.
//   - Pixtral (Mistral 3's tower, PixtralVisionModel with Mistral3MultiModalProjector): the patch
//     embedding (a Conv2d, no bias) then ln_pre (RMSNorm), RMSNorm blocks with q/k/v/o and a gated
//     SiLU MLP, none with biases; the 2D rotary's column quarter takes the odd frequencies
//     1 / theta^((4f+2)/d) where the row's takes the even ones. The projector: RMSNorm per patch
//     (the text model's eps), the merge^2 patches of a block as one row through merging_layer
//     (its columns read patch-major: torch's unfold is channel-major), linear_1, exact GELU,
//     linear_2. Its processor's rows come in the same merge-block order as Qwen2-VL's.
//   - GLM-4.1V / 4.5V (Glm4vVisionModel, models/glm4v_vision.cpp): the patch embedding (a Conv3d
//     with a bias) then post_conv_layernorm (RMSNorm) and learned position embeddings (a side x
//     side grid) bicubically resampled (grid_sample, align_corners false, border) to each patch's
//     centre; RMSNorm blocks with attn.qkv (a bias under attention_bias), proj without one and a
//     gated SiLU MLP out_hidden_size wide, no biases; then post_layernorm, the downsample Conv2d
//     (kernel = stride = merge: one Linear over each merge block's patches, with a bias) and the
//     merger: proj, LayerNorm, exact GELU, then a gated SiLU MLP (gate_proj, up_proj, down_proj).
// Attention runs on the paged CPU kernel: each image (or window) is one sequence whose rows see
// all of it (AttentionMeta::attend_until), its K/V rows in pages of the largest size that
// divides every sequence of the pass.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "models/model.h"
#include "models/raw_tensor.h"
#include "models/vision_config.h"
#include "models/weight_loader.h"

namespace brigade {

struct QwenVisionPass;  // a pass's host-side plan (qwen_vision.cpp)

class QwenVision {
 public:
  // Loads the tower (the Hub's `visual.*` names and transformers 5's `model.visual.*`, whichever
  // the checkpoint has; Pixtral's `vision_tower.*` and `multi_modal_projector.*`, with the patch
  // convolution as the matrix [hidden, 3 p p]), shape-checked against v; the patch embedding as the matrix [hidden,
  // patch_width()] (flatten_qwen_patch_embed). Matrices as stored (never block-quantized: the
  // 7B tower's MLP width 3420 is not whole blocks of 32), vectors f32, Qwen3-VL's position table
  // kept on the host in f32. Refuses a backend whose activations are not f32 or without vision
  // ops, another hidden_act than the kind's (silu, quick_gelu, gelu_pytorch_tanh) and an
  // out_hidden_size other than text_hidden.
  Status load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden);
  // out [sum of images' tokens, text_hidden] (activation dtype) = each image's merged features,
  // in images' order (image_features(grid_h, grid_w) rows each). Checks each image's grid
  // (positive multiples of merge, at most kMaxPatches patches) and pixel count (grid_h * grid_w *
  // patch_width() floats) before running anything. Images are encoded a few at a time, in
  // scratch sized by the largest pass so far (allocated at the first call, regrown for a larger
  // one). An image's features do not depend on the other images of the call (up to rounding).
  // Qwen3-VL also writes its DeepStack features: deepstack[k] [sum of tokens, text_hidden] from
  // the merger of tap k (VisionConfig::deepstack_layers[k]), in the same rows as out; the span
  // must hold one tensor per tap (none for the other kinds), else invalid_argument.
  Status encode(std::span<const StepImage> images, const Tensor& out, std::span<const Tensor> deepstack = {});
  int n_deepstack() const { return static_cast<int>(v_.deepstack_layers.size()); }
  // The work of encoding one image by the roofline rule (Model::step_cost): 2 flops per weight
  // per patch row (merged row for the mergers, DeepStack's included), the attention's 4 * hidden
  // per (query, key) pair of each block's sequences (windows or the whole image).
  double flops(int grid_h, int grid_w) const;
  double weight_bytes() const { return weight_bytes_; }

  static constexpr int kMaxPatches = 16384;  // an image's patches (3.2 Mpx at patch_size 14)

 private:
  struct Layer {
    bool full = true;  // attends over the whole image (else within windows)
    int tap = -1;      // Qwen3-VL: the DeepStack merger run on this block's output, else -1
    OwnedTensor norm1_w, norm1_b, qkv, qkv_b, proj, proj_b, norm2_w, norm2_b, mlp_in, mlp_in_b, mlp_out, mlp_out_b;
  };
  // Device copies of one layout of attention sequences (AttentionMeta), regrown as needed.
  struct SeqLayout {
    OwnedTensor q_start, ctx_len, block_table, attend_until;
    AttentionMeta meta;
    int page = 0;  // K/V rows per page: divides every sequence's length
  };
  // Norm, each merge block's merge^2 rows as one row, Linear, exact GELU, Linear. The norm is over
  // each patch (width hidden) before the merge, or over the merged row (postshuffle: Qwen3-VL's
  // DeepStack mergers).
  struct Merger {
    bool postshuffle = false;
    OwnedTensor norm_w, norm_b, in, in_b, out, out_b;
    OwnedTensor merge;  // Pixtral: merging_layer [hidden, merge^2 hidden] before `in` [text, hidden]
    // GLM: norm_w is post_layernorm, merge / merge_b the downsample [text, merge^2 hidden], `in`
    // the merger's proj [text, text], proj_norm_* its LayerNorm, gate_up [2 ctx, text], out [text, ctx].
    OwnedTensor merge_b, proj_norm_w, proj_norm_b, gate_up;
  };
  struct Scratch {
    int64_t rows = 0;  // patch rows per pass
    OwnedTensor patches, x, normed, qkv, attn, mlp, mlp_act, k, v, merged, positions, slots, unpermute;
    OwnedTensor pos_embed;  // Qwen3-VL: [rows, hidden] the resampled position embeddings
    OwnedTensor proj;       // Pixtral: [rows / merge^2, text_hidden] the projector's hidden rows
    OwnedTensor glm_mlp, glm_act;  // GLM: [rows / merge^2, 2 ctx] and [.., ctx], the merger's MLP
    SeqLayout full, window;
  };
  Status check_images(std::span<const StepImage> images) const;
  Status allocate_scratch(int64_t rows);
  Status upload_layout(const std::vector<int32_t>& lens, SeqLayout& dst);
  Status upload_i32(OwnedTensor& t, const std::vector<int32_t>& host);
  Status encode_pass(const QwenVisionPass& pass, const Tensor& out, std::span<const Tensor> deepstack);
  void run_block(const Layer& L, int64_t n);
  // m over the pass's n rows of sc_.x (left unchanged) into out [n / merge^2, text_hidden], in
  // the images' token order.
  void run_merger(const Merger& m, int64_t n, const Tensor& out);
  Status load_block(WeightLoader& w, const std::string& prefix, int l, Layer& L);
  Status load_merger(WeightLoader& w, const std::string& prefix, bool postshuffle, Merger& m);
  Status load_position_table(WeightLoader& w, const std::string& name);
  Status load_pixtral(WeightLoader& w);
  Status load_glm4v(WeightLoader& w, const std::string& prefix);
  Status load_glm4v_merger(WeightLoader& w, const std::string& prefix);
  void run_glm4v_merger(int64_t n, const Tensor& out);

  Backend* backend_ = nullptr;
  VisionConfig v_;
  int text_hidden_ = 0;
  bool qwen2_5_ = false;  // Qwen2.5-VL (RMSNorm, gated MLP, windows)
  bool qwen3_ = false;    // Qwen3-VL (patch bias, position table, gelu_tanh MLP, DeepStack)
  bool pixtral_ = false;  // Pixtral (ln_pre, no biases, Mistral 3's projector)
  bool glm4v_ = false;    // GLM (post-conv norm, bicubic positions, downsample and gated merger)
  bool gated_ = false;    // RMSNorm and a gated SiLU MLP (Qwen2.5-VL, Pixtral, GLM)
  OwnedTensor ln_pre_;    // Pixtral: the RMSNorm after the patch embedding; GLM: post_conv_layernorm
  OwnedTensor patch_w_, patch_b_;
  std::vector<float> pos_table_;  // Qwen3-VL, GLM: [num_position_embeddings, hidden], host f32
  Merger merger_;
  std::vector<Merger> deepstack_;  // Qwen3-VL: deepstack_merger_list, one per tap
  std::vector<Layer> layers_;
  RopeConfig rope_;
  Scratch sc_;
  double weight_bytes_ = 0.0;
};

// The checkpoint tensors with the patch embedding's Conv3d weight [hidden, 3, temporal_patch,
// p, p] (visual.patch_embed.proj.weight, or model.visual.*) seen as the matrix [hidden,
// 3 * temporal_patch * p * p] that QwenVision::load reads: its inputs in c, t, y, x order, as
// the processor flattens a patch. Other tensors pass through unchanged.
void flatten_qwen_patch_embed(std::map<std::string, RawTensor>& tensors);

// GLM's position embedding of the patch at (row, col) of a grid_h x grid_w image into dst
// [hidden]: table [side * side, hidden] (row-major grid) sampled bicubically at the patch's
// centre ((col + 0.5) / grid_w, (row + 0.5) / grid_h of the table's side), as
// F.grid_sample(mode="bicubic", align_corners=False, padding_mode="border") computes it in f32:
// Keys' cubic (A = -0.75) over the 4 x 4 taps around it, clamped to the table's edge, along x
// first, then y.
void glm4v_position_embedding(std::span<const float> table, int side, int64_t hidden, int grid_h, int grid_w,
                              int row, int col, float* dst);

// Qwen2.5-VL's window order of one image of hm x wm merged tokens (get_window_index), windows of
// side merged tokens: `order` gets the tokens (row-major indices) window by window, windows
// row-major and tokens row-major inside each, and `lens` each window's token count (the last row
// and column of windows are cut short where side does not divide hm or wm).
void qwen_window_order(int hm, int wm, int side, std::vector<int32_t>& order, std::vector<int32_t>& lens);

}  // namespace brigade
