// Internal to models/: the config.json of Gemma 4's language model (Gemma4ForCausalLM, model_type
// gemma4_text; Gemma4ForConditionalGeneration, gemma4, whose language model brigade serves as
// text) read into ModelConfig, its Gemma 4 fields in ModelConfig::gemma4. The decoder is
// models/gemma4.h.
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// Whether config.json is Gemma 4's: architectures[0] Gemma4ForCausalLM or
// Gemma4ForConditionalGeneration, else model_type gemma4_text or gemma4.
bool is_gemma4(const nlohmann::json& j);

// Reads it as transformers' Gemma4TextConfig does (its defaults for absent fields; a
// Gemma4ForConditionalGeneration's text_config with the top level's dtype and ids): the Gemma 3
// fields (scaled embeddings, layer_types with the sliding window, the final softcap; norms scale
// by w; softmax scale 1) and the Gemma 4 ones: the full layers' geometry (global_head_dim and
// num_global_key_value_heads, or a saved per_layer_config), attention_k_eq_v, the RoPE of each
// layer type (rope_parameters: "default" on both, or "proportional" with partial_rotary_factor
// and factor on the full layers), per-layer inputs, num_kv_shared_layers with use_double_wide_mlp,
// and the MoE block (enable_moe_block: num_experts, top_k_experts, moe_intermediate_size).
// A Gemma4ForConditionalGeneration's towers are not run (vision_off says so; its image, video
// and audio token ids and the ids past the text vocabulary are refused). Refused by field:
// use_bidirectional_attention, attention_bias, another hidden_activation, other RoPE types, a
// per_layer_config that gives layers of one type different shapes or other fields.
Expected<ModelConfig> read_gemma4_config(const nlohmann::json& j);

}  // namespace brigade
