// Internal to models/: the Qwen2-VL family's config.json (Qwen2VLForConditionalGeneration,
// Qwen2_5_VLForConditionalGeneration) read as its language model, a Qwen2ForCausalLM with M-RoPE
// (ModelConfig::mrope_section, models/mrope.h), beside its vision tower (models/qwen_vision.h).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"
#include "models/raw_tensor.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is one of the family (architectures[0], else model_type qwen2_vl /
// qwen2_5_vl); which tower it has.
bool is_qwen_vl(const nlohmann::json& j);
VisionKind qwen_vl_kind(const nlohmann::json& j);

// Its language model's config as a Qwen2ForCausalLM config.json: the Hub's flat form (text fields
// at the top level) or transformers 5's text_config (over the top level's), without
// vision_config, and with the M-RoPE rope_scaling ({"type": "mrope", "mrope_section": [...]},
// or rope_type "default" with mrope_section) taken out into *mrope_section. corrupt / invalid
// for a malformed mrope_section.
Expected<nlohmann::json> qwen_vl_text_config(const nlohmann::json& j, std::vector<int>* mrope_section);

// The tensors under the names the loaders read: transformers 5's model.language_model.* become
// model.* and model.visual.* visual.*; the Hub's (model.*, visual.*, lm_head.*) stay; the patch
// embedding's Conv3d weight becomes a matrix (flatten_qwen_patch_embed).
std::map<std::string, RawTensor> qwen_vl_tensors(std::map<std::string, RawTensor> tensors);

}  // namespace brigade
