// Internal to models/: the config.json of Kimi Linear (KimiLinearForCausalLM; its layers:
// models/kimi_linear.h) read into ModelConfig: DeepSeek-V3's MLA and MoE fields under Kimi's
// names, its KDA layers (ModelConfig::ssm with SsmConfig::kda) and which layers they are.
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// architectures[0] KimiLinearForCausalLM, or model_type kimi_linear (Moonshot's
// Kimi-Linear-48B-A3B).
bool is_kimi_linear(const nlohmann::json& j);

// arch "kimi_linear", as transformers' KimiLinearConfig reads it: the MoE fields under Kimi's
// names (num_experts, num_experts_per_token, num_shared_experts, num_expert_group, topk_group,
// moe_renormalize, routed_scaling_factor, moe_intermediate_size; DeepSeek's own names too) and
// DeepSeek-V3's routing (sigmoid scores, the selection bias, groups by their two best); dense
// layers from mlp_layer_types, else the first first_k_dense_replace (1); model_max_length (or
// max_position_embeddings); MLA (q_lora_rank, kv_lora_rank, qk_nope/rope_head_dim, v_head_dim)
// with no RoPE at all (ModelConfig::nope: transformers' KimiLinearAttention rotates nothing; the
// rope dims are a shared key part), softmax scale (nope + rope)^-1/2; the KDA layers from
// layer_types (linear_attention / full_attention) or linear_attn_config's 1-based kda_layers and
// full_attn_layers, else every fourth layer from layer 4 on full attention; their heads, head_dim
// and short_conv_kernel_size from linear_attn_config (or linear_num_heads, linear_head_dim,
// linear_conv_kernel_dim). Refused by name: hidden_act other than silu, mla_use_nope false (a
// rotated MLA transformers does not run), moe_router_activation_func other than sigmoid,
// mlp_layer_types with a dense layer after a sparse one, a layer type of another kind, and what
// DeepSeek-V3's reader refuses (models/deepseek_config.h).
Expected<ModelConfig> read_kimi_linear_config(const nlohmann::json& j);

}  // namespace brigade
