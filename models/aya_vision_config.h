// Aya Vision (AyaVisionForConditionalGeneration: CohereLabs/aya-vision-8b, -32b): a Cohere2 or
// Cohere language model (text_config) and the vision side (VisionKind::aya_vision: a SigLIP tower
// read at vision_feature_layer over GotOcr2's tiles, the pixel shuffle by downsample_factor and
// AyaVisionMultiModalProjector's LayerNorm + SwiGLU, models/tile_vision.h). Tensors in LLaVA's
// layouts (the Hub's language_model.model.* / vision_tower.vision_model.* / multi_modal_projector.*,
// or transformers 5's model.*), which gemma3_tensors maps. Images are cut by GotOcr2ImageProcessor
// with crop_to_patches (models/internvl_image_processor.h); AyaVisionProcessor writes each `<image>`
// as <|START_OF_IMG|>, then TILE_1 .. TILE_{T-1} and TILE_GLOBAL each before its tile's run of
// <|IMG_PATCH|>, then <|END_OF_IMG|>.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is an AyaVisionForConditionalGeneration (architectures, else model_type aya_vision).
bool is_aya_vision(const nlohmann::json& j);

// Its language model's config.json: text_config over Cohere2Config's defaults (model_type cohere2
// when absent) or CohereConfig's (cohere; another type refused by name), the top level's dtype and
// bos/eos ids where text_config has none, tied by the top level's tie_word_embeddings (AyaVisionConfig's
// default true), architectures Cohere2ForCausalLM / CohereForCausalLM.
Expected<nlohmann::json> aya_vision_text_config(const nlohmann::json& j);

// The vision side with SiglipVisionConfig's defaults as AyaVisionConfig overrides them (hidden 1152,
// intermediate 4304, 26 layers, 14 heads, 384 pixels in 14-pixel patches; its 14 heads do not divide
// 1152, so a config must give its own) and AyaVisionConfig's (vision_feature_layer -1,
// vision_feature_select_strategy full, downsample_factor 2, adapter_layer_norm_eps 1e-6,
// alignment_intermediate_size the text width, image_token_index 255036). Refuses, naming the field:
// another hidden_act than gelu / gelu_pytorch_tanh / quick_gelu, num_channels other than 3,
// vision_feature_select_strategy default (it drops a patch, which the pixel shuffle cannot take), a
// list of feature layers or one outside the hidden states, a downsample_factor that does not divide
// the tile's patches, an odd or non-positive alignment_intermediate_size, an image token outside the
// text vocabulary, check_vit_sizes' errors (image_size need not be whole patches).
Expected<VisionConfig> read_aya_vision(const nlohmann::json& j, int text_vocab, int text_hidden);

// processor_config.json's tokens a tile, (img_size // (patch_size * downsample_factor))^2 with
// AyaVisionProcessor's defaults (364, 28, 1), in the directory of model_path, against the tower's
// tile_tokens: invalid_argument naming both when they differ; ok without the file; corrupt for a
// file that is not a JSON object or a field that is not a positive integer.
Status check_aya_vision_processor(const std::string& model_path, int tile_tokens);

}  // namespace brigade
