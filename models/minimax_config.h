// Internal to models/: the config.json of MiniMax-Text-01 / MiniMax-M1 as transformers ports them
// (MiniMaxForCausalLM, model_type minimax; its layers: models/minimax.h) read into ModelConfig:
// Mixtral's attention and experts, the lightning attention layers (ModelConfig::ssm with
// SsmConfig::lightning) and the residual scalings (ModelConfig::block_alpha / block_beta).
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// architectures[0] MiniMaxForCausalLM, or model_type minimax.
bool is_minimax(const nlohmann::json& j);

// arch "minimax", as transformers' MiniMaxConfig reads it: Mixtral's fields (num_local_experts,
// num_experts_per_tok, intermediate_size per expert, the softmax router renormalised over the top
// k), head_dim (hidden / heads by default) for both layer kinds, layer_types (linear_attention /
// full_attention; default: full at even layers, linear at odd ones), the six
// {linear_attn,full_attn,mlp}_{alpha,beta}_factor (1). block_size is read and not used (it only
// chunks transformers' prefill). RoPE over whole heads (MiniMaxRotaryEmbedding's default rope
// ignores partial_rotary_factor). Refused by name: hidden_act other than silu, a sliding_window,
// partial_rotary_factor or rotary_dim other than whole heads (what transformers rotates differs
// from the original remote code's there), router_jitter_noise != 0, a layer type of another kind.
Expected<ModelConfig> read_minimax_config(const nlohmann::json& j);

}  // namespace brigade
