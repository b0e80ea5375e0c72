// Internal to models/: the Qwen2-VL family's config.json (Qwen2VLForConditionalGeneration,
// Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration) read as its language
// model, a Qwen2ForCausalLM (Qwen3ForCausalLM for Qwen3-VL) with M-RoPE (ModelConfig::
// mrope_section, models/mrope.h), beside its vision tower (models/qwen_vision.h).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"
#include "models/raw_tensor.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is one of the family (architectures[0], else model_type qwen2_vl /
// qwen2_5_vl / qwen3_vl); which tower it has.
bool is_qwen_vl(const nlohmann::json& j);
// Qwen3VLMoeForConditionalGeneration: Qwen3-VL with a Qwen3-MoE language model, whose fused
// experts the Hub stores transposed (ModelConfig::experts_transposed).
bool is_qwen3_vl_moe(const nlohmann::json& j);
VisionKind qwen_vl_kind(const nlohmann::json& j);

// Its language model's config as a Qwen2ForCausalLM (Qwen3-VL: Qwen3ForCausalLM; Qwen3-VL-MoE:
// Qwen3MoeForCausalLM with norm_topk_prob, as its router always renormalises) config.json: the
// Hub's flat form (text fields at the top level) or text_config (transformers 5, Qwen3-VL; over
// the top level's), without vision_config, and with the M-RoPE rope_scaling ({"type": "mrope",
// "mrope_section": [...]}, or rope_type "default" with mrope_section and Qwen3-VL's
// mrope_interleaved) taken out into *mrope_section and *mrope_interleaved. corrupt for a
// malformed mrope_section or mrope_interleaved.
Expected<nlohmann::json> qwen_vl_text_config(const nlohmann::json& j, std::vector<int>* mrope_section,
                                             bool* mrope_interleaved);

// A text config's M-RoPE: mrope_section and mrope_interleaved of its rope_scaling or
// rope_parameters (the config left as it is; both untouched where it has none). corrupt when
// malformed.
Status read_mrope(const nlohmann::json& text, std::vector<int>* mrope_section, bool* mrope_interleaved);

// invalid_argument unless section is 3 sizes (temporal, height, width) summing to rope_dims / 2;
// `key` names where the config holds it.
Status check_mrope_section(const std::vector<int>& section, int rope_dims, const std::string& key);

// The tensors under the names the loaders read: transformers 5's model.language_model.* become
// model.* and model.visual.* visual.*; the Hub's (model.*, visual.*, lm_head.*) stay; the patch
// embedding's Conv3d weight becomes a matrix (flatten_qwen_patch_embed).
std::map<std::string, RawTensor> qwen_vl_tensors(std::map<std::string, RawTensor> tensors);

}  // namespace brigade
