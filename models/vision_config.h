// VisionConfig: the image side of a multimodal checkpoint: Gemma3ForConditionalGeneration's
// (Gemma 3 4B, 12B, 27B) SigLIP tower and the projector that turns each image into
// mm_tokens_per_image embeddings of the language model (models/gemma3_vision.h), or the Qwen2-VL
// family's dynamic-resolution ViT and merger (models/qwen_vision.h), or Mistral 3's Pixtral tower
// and projector (the same class); config.json's vision_config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/anyres.h"

namespace brigade {

// Which tower: Gemma 3's SigLIP (fixed-size square images, a fixed token count), or the Qwen2-VL
// family's dynamic-resolution ViT (images of any size in multiples of merge * patch_size pixels,
// (grid_h / merge) * (grid_w / merge) tokens, M-RoPE positions in the language model).
enum class VisionKind : uint8_t {
  gemma3_siglip,  // Gemma3ForConditionalGeneration (models/gemma3_vision.h)
  qwen2_vl,       // Qwen2VLForConditionalGeneration: LayerNorm, fc1/quick_gelu/fc2, full attention
  qwen2_5_vl,     // Qwen2_5_VLForConditionalGeneration: RMSNorm, gated SiLU MLP, window attention
  qwen3_vl,       // Qwen3VLForConditionalGeneration: LayerNorm, fc1/gelu_tanh/fc2 with biases, full
                  // attention, learned position embeddings interpolated to the grid, DeepStack
  pixtral,        // Mistral3ForConditionalGeneration: Pixtral (ln_pre, RMSNorm, gated SiLU MLP, no
                  // biases, full attention) and Mistral3's projector (RMSNorm, patch merger, MLP)
  llava,          // LlavaForConditionalGeneration: a CLIP or SigLIP tower (models/clip_vision.h) read at
                  // vision_feature_layer, LlavaMultiModalProjector (linear, act, linear); fixed-size
                  // images of a grid of image_size / patch_size patches a side, merge 1;
                  // LlavaNextForConditionalGeneration and LlavaOnevisionForConditionalGeneration
                  // (anyres on): images of any size in tiles, their grid the image's height x width
                  // in pixels (models/anyres.h)
  glm4v,          // Glm4vForConditionalGeneration / Glm4vMoeForConditionalGeneration (GLM-4.1V, 4.5V,
                  // 4.6V): RMSNorm, gated SiLU MLP, full attention, bicubic position embeddings, a
                  // downsample convolution and a gated merger (models/glm4v_vision.cpp)
  gemma4,         // Gemma4ForConditionalGeneration (models/gemma4_vision.h): images of any size in
                  // whole merge x merge blocks of patches (merge = pooling_kernel_size), a token per
                  // block (average-pooled), 1D positions in the language model, no breaks
  internvl,       // InternVLForConditionalGeneration / InternVLChatModel: InternViT (class token, LayerNorm or
                  // RMSNorm, optional qk norm, layer scales) over tiles of image_size pixels, the pixel
                  // shuffle (merge = 1 / downsample_ratio) and an MLP projector (models/internvl_vision.h);
                  // an image of T tiles has the grid (T * side) x side
  idefics3,       // Idefics3ForConditionalGeneration / SmolVLMForConditionalGeneration: a SigLIP-style tower
                  // (no class token, post_layernorm) over square tiles of image_size pixels, the pixel
                  // shuffle (merge = scale_factor) and one bias-free projection (models/tile_vision.h);
                  // each tile is an image of side x side patches to the scheduler, the prompt text around
                  // an image's tiles the processor's (models/idefics3_image_processor.h)
  aya_vision,     // AyaVisionForConditionalGeneration: a SigLIP tower read at vision_feature_layer over
                  // GotOcr2's tiles (a column of them, as InternVL's), the pixel shuffle (merge =
                  // downsample_factor), LayerNorm and a SwiGLU projector (models/tile_vision.h); each tile
                  // an image of its own to the scheduler, as Idefics3's
  paligemma,      // PaliGemmaForConditionalGeneration (PaliGemma 1 / 2): a SigLIP tower's last_hidden_state
                  // (post_layernorm) over a fixed-size image and one linear projection with a bias
                  // (models/gemma3_vision.h): Gemma 3's fixed-size images without its pool and norm; the
                  // prompt attends to all of itself (ModelConfig::prefix_lm)
};

struct VisionConfig {
  VisionKind kind = VisionKind::gemma3_siglip;
  int hidden_size = 0;       // the tower's width; 0 = the checkpoint has no vision tower
  int intermediate_size = 0;
  int n_layers = 0;
  int n_heads = 0;
  int image_size = 0;        // pixels per side of the (square) input image
  int patch_size = 0;        // pixels per side of a patch (the patch embedding's stride)
  float eps = 1e-6f;         // layer_norm_eps: the tower's LayerNorms and the projector's RMSNorm
  int tokens_per_image = 0;  // mm_tokens_per_image: a square grid of average-pooled patches
  int32_t image_token = -1;  // image_token_index: the placeholder each image embedding replaces
  int32_t boi_token = -1;    // boi_token_index (<start_of_image>) and eoi_token_index around them
  int32_t eoi_token = -1;    // (Pixtral: [IMG_END], the image's last token)
  int32_t image_break_token = -1;  // Pixtral: [IMG_BREAK], after each row of image tokens
  // The Qwen2-VL family (kind != gemma3_siglip; image_size and tokens_per_image are then 0, and
  // boi/eoi_token are vision_start_token_id / vision_end_token_id):
  int merge = 0;                     // spatial_merge_size: merge x merge patches become one token
  int temporal_patch = 0;            // temporal_patch_size: an image is repeated this many frames
  int out_hidden_size = 0;           // the merger's output width (the language model's hidden)
  int window_size = 0;               // Qwen2.5-VL: window attention over window_size^2 pixels
  std::vector<int> fullatt_blocks;   // Qwen2.5-VL: the blocks that attend over the whole image
  std::string hidden_act;            // the blocks' MLP activation (quick_gelu, silu, ...)
  // Qwen3-VL: num_position_embeddings learned embeddings (a square grid, bilinearly resampled to
  // each image's grid), and deepstack_visual_indexes: the blocks after which a merger of their
  // own (postshuffle norm) taps features that the language model adds to the image's rows after
  // its decoder layers 0, 1, ... (one per tap).
  int num_position_embeddings = 0;
  std::vector<int> deepstack_layers;
  float rope_theta = 10000.0f;  // the 2D rotary's base (Qwen3-VL: vision_config.rope_parameters)
  // Pixtral: Mistral3MultiModalProjector's RMSNorm eps (the text model's rms_norm_eps) and
  // whether its linear_1 / linear_2 have biases (multimodal_projector_bias).
  float projector_eps = 1e-5f;
  bool projector_bias = false;
  // LLaVA: class_token: a CLIP tower (class embedding, pre_layrnorm, no patch bias), else SigLIP;
  // feature_layers: the hidden states the projector reads, concatenated (indices into
  // transformers' hidden_states, 0 = the embeddings, made non-negative); extra_tokens: the
  // features' rows beyond the grid's (+1 for CLIP's class row under "full", 0 for CLIP under
  // "default" and SigLIP under "full", -1 for SigLIP under "default", which drops its first patch);
  // projector_act: projector_hidden_act.
  bool class_token = false;
  std::vector<int> feature_layers;
  int extra_tokens = 0;
  std::string projector_act;
  // LLaVA-NeXT and LLaVA-OneVision: image_grid_pinpoints (anyres.on(); OneVision's
  // vision_aspect_ratio in anyres.max_area); an image's grid_h x grid_w is then its height and
  // width in pixels (OneVision: or 0 x 0, its base tile alone), its pixels the base tile and the
  // tiles ([1 + tiles, 3, S, S]), and its tokens anyres_tokens (the image_newline rows included).
  AnyresGrid anyres;
  // GLM-4.1V: the merger's gated MLP width (vision_config.intermediate_size; the blocks' MLP is
  // out_hidden_size wide, held in intermediate_size), and whether attn.qkv has a bias
  // (attention_bias). Its merger's LayerNorm eps is projector_eps; num_position_embeddings is
  // (image_size / patch_size)^2. Aya Vision: its projector's linear_1 width (alignment_intermediate_size,
  // both halves of its SwiGLU), the LayerNorm's eps in projector_eps.
  int merger_intermediate = 0;
  bool qkv_bias = true;
  // InternVL: the blocks' norms are RMSNorm (norm_type rms_norm) instead of LayerNorm; q and k
  // are RMS-normed over the whole projection (use_qk_norm); the final LayerNorm runs before the
  // features are read (use_mean_pooling false with feature layer -1). feature_layers holds the
  // one state read; class_token is set (dropped before the shuffle); projector_eps is the
  // projector LayerNorm's.
  bool rms_norm = false;
  bool qk_norm = false;
  float qk_eps = 1e-6f;  // the qk norm's eps: InternVLVisionRMSNorm's default (the remote layout: layer_norm_eps)
  bool final_norm = false;
  // Gemma 4: use_bidirectional_attention "vision" (the text config's): an image's rows see the
  // whole image on the sliding layers, so an image runs whole in one step (whole_images()); the
  // tower's position table per axis (position_embedding_size: a patch's x and y must be below
  // it), use_clipped_linears (the input_min / max and output_min / max buffers each linear
  // clamps by) and standardize (std_bias / std_scale on the pooled features).
  bool bidirectional = false;
  int position_table = 0;
  bool clipped_linears = false;
  bool standardize = false;

  // Idefics3 and Aya Vision: each tile is an image of its own (models/tile_vision.h); the image
  // before the tokenizer splits it is its tiles, laid out as the processor's grid says.
  bool tiled() const { return kind == VisionKind::idefics3 || kind == VisionKind::aya_vision; }

  bool present() const { return n_layers > 0; }
  // Fixed-size images of tokens_per_image tokens (Gemma 3's, PaliGemma's), else sized by their grid.
  bool dynamic() const { return kind != VisionKind::gemma3_siglip && kind != VisionKind::paligemma; }
  // Whether an image's tokens attend to one another (Gemma 3, Gemma 4 under "vision"): then the
  // image runs whole in one step; else causally and chunked prefill may split it.
  bool whole_images() const { return !dynamic() || bidirectional; }
  // The prompt tokens of an image of grid_h x grid_w patches (dynamic), else tokens_per_image:
  // its features' rows, and for Pixtral an [IMG_BREAK] after each row of them, the last one
  // [IMG_END] (pixtral_image_tokens).
  int image_tokens(int grid_h, int grid_w) const {
    if (anyres.on()) return anyres_tokens(anyres, grid_h, grid_w);
    return dynamic() ? (grid_h / merge) * (grid_w / merge + (kind == VisionKind::pixtral ? 1 : 0)) + extra_tokens
                     : tokens_per_image;
  }
  // The tower's output rows for such an image (its features): image_tokens less Pixtral's breaks
  // (LLaVA-NeXT's newlines are rows of its features).
  int image_features(int grid_h, int grid_w) const {
    if (anyres.on()) return anyres_tokens(anyres, grid_h, grid_w);
    return dynamic() ? (grid_h / merge) * (grid_w / merge) + extra_tokens : tokens_per_image;
  }
  // The feature row that the image's prompt token j (in [0, image_tokens)) takes, or -1 where
  // the token keeps its embedding (Pixtral's breaks and end); j itself for the other kinds.
  int feature_of(int j, int grid_w) const {
    if (kind != VisionKind::pixtral) return j;
    const int row = grid_w / merge + 1;
    return (j + 1) % row == 0 ? -1 : (j / row) * (row - 1) + j % row;
  }
  // The id the image's prompt token j holds: image_token, or Pixtral's break / end.
  int32_t token_at(int j, int grid_h, int grid_w) const {
    if (feature_of(j, grid_w) >= 0) return image_token;
    return j + 1 == image_tokens(grid_h, grid_w) ? eoi_token : image_break_token;
  }
  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  int tokens_per_side() const;
  int pool_kernel() const { return patches_per_side() / tokens_per_side(); }  // average pool k x k
  int head_dim() const { return hidden_size / n_heads; }
  // A patch's pixels, c-major (the Qwen2-VL family's patches span temporal_patch frames too).
  int64_t patch_width() const {
    return int64_t{3} * (temporal_patch > 0 ? temporal_patch : 1) * patch_size * patch_size;
  }
};

// config.json's vision_config, mm_tokens_per_image and token indices of a
// Gemma3ForConditionalGeneration, with transformers' defaults (SiglipVisionConfig's, Gemma3Config's)
// for the fields it leaves out. Refuses what the tower cannot run (another activation, channels,
// a patch grid the pool does not divide), naming the field; image_token must lie inside the text
// vocabulary text_vocab (it is embedded before its rows are replaced).
Expected<VisionConfig> read_gemma3_vision(const nlohmann::json& config, int text_vocab);

// config.json's vision_config and token ids of a Qwen2VLForConditionalGeneration (kind qwen2_vl)
// or Qwen2_5_VLForConditionalGeneration (qwen2_5_vl), with the defaults of transformers'
// Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig and Qwen2VLConfig for the fields it leaves out.
// Qwen2-VL names the tower's width embed_dim and the merger's output hidden_size, its MLP
// embed_dim * mlp_ratio; Qwen2.5-VL names them hidden_size, out_hidden_size and
// intermediate_size. image_token_id / vision_start_token_id / vision_end_token_id come from the
// top level, else from text_config (boi_token / eoi_token are the vision start and end). Refuses,
// naming the field, what the tower cannot run: another hidden_act (qwen2_vl: quick_gelu;
// qwen2_5_vl: silu), in_channels other than 3, a head_dim not a multiple of 4 (the 2D rotary
// splits it in quarters), a window smaller than one merged token, fullatt_block_indexes outside
// the blocks, an image_token_id outside the text vocabulary text_vocab.
// Qwen3VLForConditionalGeneration (qwen3_vl): Qwen3VLVisionConfig's names and defaults (depth,
// hidden_size, intermediate_size, num_heads, hidden_act gelu_pytorch_tanh, patch_size 16,
// out_hidden_size, num_position_embeddings 2304, deepstack_visual_indexes [8, 16, 24], the
// rotary's rope_parameters.rope_theta 10000); refuses a num_position_embeddings that is not a
// square, deepstack indexes outside the blocks or not increasing (transformers orders the
// features by block, the mergers by index).
Expected<VisionConfig> read_qwen_vl_vision(const nlohmann::json& config, int text_vocab, VisionKind kind);

// config.json's vision_config (PixtralVisionConfig: num_hidden_layers, hidden_size,
// intermediate_size, num_attention_heads, patch_size, hidden_act, rope_parameters) and the
// top-level Mistral3Config fields of a Mistral3ForConditionalGeneration (kind pixtral), with
// Mistral3Config's defaults: spatial_merge_size 2, image_token_index 10, projector_hidden_act
// gelu, multimodal_projector_bias false, vision_feature_layer -1. The projector maps to
// text_hidden and norms with text_eps. [IMG_BREAK] and [IMG_END] (image_break_token,
// eoi_token) are not in config.json: tekken's ids 12 and 13, which a tokenizer may override. Refuses, naming the field: a hidden_act other than silu,
// num_channels other than 3, a head_dim not hidden_size / num_attention_heads or not a multiple
// of 4, a vision_feature_layer other than the last block's, another projector activation, an
// image_token_index outside the text vocabulary.
Expected<VisionConfig> read_pixtral_vision(const nlohmann::json& config, int text_vocab, int text_hidden,
                                           float text_eps);

// config.json's vision_config (Glm4vVisionConfig / Glm4vMoeVisionConfig: depth, hidden_size,
// num_heads, intermediate_size, out_hidden_size, image_size, patch_size, spatial_merge_size,
// temporal_patch_size, rms_norm_eps, attention_bias, hidden_act, rope_parameters) and the token
// ids of a Glm4vForConditionalGeneration or Glm4vMoeForConditionalGeneration (kind glm4v), with
// transformers' defaults: image_token_id / image_start_token_id / image_end_token_id from the top
// level, else text_config, else Glm4vConfig's (151343, 151339, 151340; the MoE's image token
// 151363, moe = true). Refuses, naming the field: a hidden_act other than silu, in_channels other
// than 3, a head_dim not a multiple of 4, an image_size not a multiple of patch_size, an
// image_token_id outside the text vocabulary.
Expected<VisionConfig> read_glm4v_vision(const nlohmann::json& config, int text_vocab, bool moe);

// A fixed-size ViT's sizes as read from vision_config (LLaVA's CLIP / SigLIP, InternViT):
// invalid_argument naming the field for a non-positive size, a hidden_size not whole heads, an
// image_size not whole patches (partial_patches: smaller than one patch; the patch convolution's
// stride then drops the last image_size % patch_size pixels of each side, as SigLIP so400m/14 at
// 384 pixels does), a non-positive layer_norm_eps.
Status check_vit_sizes(const VisionConfig& v, bool partial_patches = false);

}  // namespace brigade
