// VisionConfig: the image side of a Gemma3ForConditionalGeneration checkpoint (Gemma 3 4B, 12B,
// 27B): its SigLIP tower (config.json vision_config) and the projector that turns each image into
// mm_tokens_per_image embeddings of the language model (models/gemma3_vision.h).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace brigade {

struct VisionConfig {
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
  int32_t eoi_token = -1;

  bool present() const { return n_layers > 0; }
  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  int tokens_per_side() const;
  int pool_kernel() const { return patches_per_side() / tokens_per_side(); }  // average pool k x k
  int head_dim() const { return hidden_size / n_heads; }
  int64_t patch_width() const { return int64_t{3} * patch_size * patch_size; }  // a patch's pixels, c-major
};

// config.json's vision_config, mm_tokens_per_image and token indices of a
// Gemma3ForConditionalGeneration, with transformers' defaults (SiglipVisionConfig's, Gemma3Config's)
// for the fields it leaves out. Refuses what the tower cannot run (another activation, channels,
// a patch grid the pool does not divide), naming the field; image_token must lie inside the text
// vocabulary text_vocab (it is embedded before its rows are replaced).
Expected<VisionConfig> read_gemma3_vision(const nlohmann::json& config, int text_vocab);

}  // namespace brigade
