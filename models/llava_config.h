// LlavaForConditionalGeneration (model_type llava: llava-hf/llava-1.5-7b-hf and the like),
// LlavaNextForConditionalGeneration (llava_next: llava-hf/llava-v1.6-*-hf, llama3-llava-next-8b,
// llava-next-72b) and LlavaOnevisionForConditionalGeneration (llava_onevision:
// llava-hf/llava-onevision-qwen2-0.5b / 7b / 72b-ov-hf and -si-hf): its language model's config
// (any decoder brigade runs: llama, mistral, qwen2) and its vision side (VisionKind::llava: a CLIP
// or SigLIP tower and the projector, models/clip_vision.h; the anyres tiles and image_newline of
// LLaVA-NeXT and LLaVA-OneVision, models/anyres.h).
#pragma once

#include <array>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is a LlavaForConditionalGeneration (architectures[0], else model_type llava:
// config_names_class), a LlavaNextForConditionalGeneration (is_llava_next: llava_next) or a
// LlavaOnevisionForConditionalGeneration (is_llava_onevision, llava_onevision; is_llava_next too:
// the same anyres tiles, plus its resize and its several-images rule, models/anyres.h).
bool is_llava(const nlohmann::json& j);
bool is_llava_next(const nlohmann::json& j);
bool is_llava_onevision(const nlohmann::json& j);

// Its language model's config.json: text_config over the defaults of its model_type's class
// (LlamaConfig's when absent, as LlavaConfig; MistralConfig's, Qwen2Config's; another type is
// refused naming the supported ones), with the top level's dtype and bos/eos ids where
// text_config has none, and tie_word_embeddings as LlavaConfig decides it (the top level's, or
// text_config's when that is true).
Expected<nlohmann::json> llava_text_config(const nlohmann::json& j);

// The vision side: vision_config (CLIPVisionConfig's defaults, or SiglipVisionConfig's for
// model_type siglip_vision_model; LlavaConfig's 336-pixel CLIP-L/14 when vision_config is
// absent) and LlavaConfig's image_token_index (32000), vision_feature_layer (-2, or a list),
// vision_feature_select_strategy (default), projector_hidden_act (gelu),
// multimodal_projector_bias (true). Refuses, naming the field: another vision model_type, a
// hidden_act or projector_hidden_act other than gelu / gelu_pytorch_tanh / quick_gelu,
// num_channels other than 3, an image_size smaller than one patch (one that is not whole patches
// loses its last image_size % patch_size pixels a side to the patch convolution's stride, as
// SigLIP so400m/14 at 384 pixels does), a feature layer outside
// [-(layers + 1), layers], a strategy other than default / full, an image_token_index outside the
// text vocabulary.
// LLaVA-NeXT also reads image_grid_pinpoints into VisionConfig::anyres (LlavaNextConfig's five
// llava-v1.6 pinpoints when absent), refusing a pinpoint that is not whole tiles of image_size (at
// most 64) and a strategy under which a tile's features are not its patches (CLIP under full,
// SigLIP under default: transformers' pack_image_features cannot lay them out either).
// LLaVA-OneVision: LlavaOnevisionConfig's defaults instead (a qwen2 language model, SigLIP
// so400m/14 at 384 pixels when vision_config is absent, vision_feature_layer -1, strategy full,
// image_token_index 151646, 36 pinpoints of 1x1 to 6x6 tiles of 384 pixels), and
// vision_aspect_ratio anyres_max_N into VisionConfig::anyres.max_area (anyres_max_9 when absent;
// another form, or an N that resizes some image to nothing, is refused).
Expected<VisionConfig> read_llava_vision(const nlohmann::json& j, int text_vocab);

// The pinpoints when image_grid_pinpoints is absent (config.json's and the processor's alike):
// LlavaNextConfig's five llava-v1.6 ones at 336 pixels a tile, or LlavaOnevisionConfig's 36 (1x1 to
// 6x6 tiles of 384 pixels).
std::vector<std::array<int, 2>> default_llava_pinpoints(bool onevision);

}  // namespace brigade
