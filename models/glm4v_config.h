// Internal to models/: GLM-4.1V's and GLM-4.5V / 4.6V's config.json
// (Glm4vForConditionalGeneration, Glm4vMoeForConditionalGeneration) read as their language
// model, a Glm4ForCausalLM (GLM-4-0414's layer: four norms, q/k/v biases, RoPE of adjacent pairs)
// or a Glm4MoeForCausalLM (GLM-4.5's, without q/k norms), each with M-RoPE
// (ModelConfig::mrope_section, models/mrope.h), beside the GLM vision tower (VisionKind::glm4v).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace brigade {

// Whether config.json is GLM-4.1V's or GLM-4.5V's (architectures[0], else model_type glm4v /
// glm4v_moe); is_glm4v_moe: the MoE one.
bool is_glm4v(const nlohmann::json& j);
bool is_glm4v_moe(const nlohmann::json& j);

// Its language model's config as a Glm4ForCausalLM / Glm4MoeForCausalLM config.json: text_config
// over the top level, without vision_config, with transformers' Glm4vTextConfig /
// Glm4vMoeTextConfig behaviour made explicit where brigade's glm4 / glm4_moe readers would
// differ: q/k/v biases always (glm4v) or attention_bias, true by default (glm4v_moe); no q/k
// norms; partial_rotary_factor 1.0 (glm4v) or 0.5 (glm4v_moe) where the config has none. The
// M-RoPE sections (rope_parameters' or rope_scaling's mrope_section, [8, 12, 12] where absent,
// as Glm4vTextRotaryEmbedding) go to *mrope_section. corrupt for a malformed mrope_section.
Expected<nlohmann::json> glm4v_text_config(const nlohmann::json& j, std::vector<int>* mrope_section);

}  // namespace brigade
