// Internal to models/: the DeepSeek-V2/V3 fields of config.json (MLA attention and the MoE with
// shared experts), and GLM-4.5's (the same MoE beside GQA attention), read into ModelConfig by
// parse_hf_config (models/model_config.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// Reads the MLA and routing fields of a deepseek_v2 / deepseek_v3 config (c.arch set, the common
// fields and rope scaling read already). Defaults are transformers' DeepseekV2Config /
// DeepseekV3Config's. Refuses what transformers' implementation does not run (with the reason):
// moe_layer_freq != 1, a scoring function or
// top-k method other than the architecture's, and deepseek_v2 with norm_topk_prob (transformers'
// DeepseekV2 ignores it; the original remote code would renormalise).
// Also DeepSeek-V3's descendants with their config classes' defaults: mistral4 (Mistral Small 4,
// Mistral4ForCausalLM: Mistral4TopkRouter's softmax scores grouped by their two best, no selection
// bias, and the query temperature of the rope parameters' llama_4_scaling_beta on all of q:
// read_llama4_scaling_beta) and glm4_moe_lite (GLM-4.7-Flash, Glm4MoeLiteForCausalLM: GLM-4.5's
// sigmoid routing, dense layers from mlp_layer_types, partial_rotary_factor other than 1 refused).
Status read_deepseek(const nlohmann::json& j, ModelConfig& c);

// The MLA and routing numbers fit together; names the field that does not.
Status validate_deepseek(const ModelConfig& c);

// Reads a glm4_moe config's experts and routing (Glm4MoeConfig's defaults: 128 routed experts of
// 1408, top 8, one shared expert, layer 0 dense, no groups, renormalised, scale 1), routed as
// DeepSeek-V3 routes (Glm4MoeTopkRouter is DeepseekV3TopkRouter: sigmoid, e_score_correction_bias,
// groups by their two best), and its MTP layers (num_nextn_predict_layers; loaded only with
// LoadOptions::mtp).
Status read_glm4_moe(const nlohmann::json& j, ModelConfig& c);

// Reads a dots1 config's experts and routing (dots.llm1, Dots1Config: Dots1TopkRouter is
// DeepseekV3TopkRouter; defaults 1408 wide, layer 0 on sparse, no groups, not renormalised, scale
// 1; n_routed_experts, num_experts_per_tok and n_shared_experts have none and must be given).
// Refused by name, as for deepseek_v3: scoring_func other than sigmoid (transformers' Dots1 always
// routes by sigmoid, vLLM and llama.cpp by what the field says: the reference is ambiguous),
// topk_method other than noaux_tc, moe_layer_freq other than 1.
Status read_dots1(const nlohmann::json& j, ModelConfig& c);

// mlp_layer_types ("dense" / "sparse" per layer; absent: the first n_dense layers dense) as
// first_k_dense_replace (the dense prefix) and mlp_only_layers (the other dense layers): GLM-4.7-Flash's,
// MiMo-V2-Flash's and K-EXAONE's (models/mimo_exaone_config.h).
Status read_dense_mlp_layers(const nlohmann::json& j, ModelConfig& c, int n_dense);

// The routed experts, groups and shared experts of DeepSeek's, GLM-4.5's and dots.llm1's sparse layers fit
// together; names the field that does not.
Status validate_grouped_moe(const ModelConfig& c);

}  // namespace brigade
