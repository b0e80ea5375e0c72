// Internal to models/: the config.json of a Mamba2 language model (transformers' Mamba2Config,
// Mamba2ForCausalLM: Mamba-Codestral, the mamba2-*-hf conversions) read into ModelConfig
// (ModelConfig::ssm, every layer in ssm_layers). The model itself: models/mamba2.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"

namespace brigade {

// architectures[0] Mamba2ForCausalLM, or model_type mamba2 without architectures.
bool is_mamba2(const nlohmann::json& j);

// arch "mamba2": hidden_size, num_hidden_layers, vocab_size, num_heads, head_dim, n_groups,
// state_size, conv_kernel, expand (expand * hidden_size must be num_heads * head_dim),
// use_conv_bias, use_bias, layer_norm_epsilon, time_step_limit (a pair; Python's Infinity as
// json.dumps writes it or as transformers 5's {"__float__": "Infinity"}), tie_word_embeddings,
// bos/eos_token_id, torch_dtype; max_position_embeddings when present, else 1 << 20 (a state
// has no positional limit). Refused by name: hidden_act other than silu, quantization_config,
// heads not a multiple of n_groups.
Expected<ModelConfig> read_mamba2_config(const nlohmann::json& j);

// architectures[0] GraniteMoeHybridForCausalLM, or model_type granitemoehybrid (IBM Granite 4.0-H:
// Micro, Tiny, Small).
bool is_granite_hybrid(const nlohmann::json& j);

// arch "granitemoehybrid": layer_types (mamba / linear_attention, attention / full_attention) into
// ssm_layers; the attention layers' num_attention_heads, num_key_value_heads, attention_multiplier
// (the softmax scale, attn_scale); the mixers' mamba_n_heads, mamba_d_head ("auto": expand *
// hidden / heads), mamba_n_groups, mamba_d_state, mamba_d_conv, mamba_expand, mamba_conv_bias,
// mamba_proj_bias, time_step_limit; the MLP: shared_intermediate_size (a SwiGLU every token
// runs, shared_expert_intermediate_size) and num_local_experts experts of intermediate_size
// (top num_experts_per_tok, softmax over them: norm_topk_prob); embedding_multiplier,
// residual_multiplier, logits_scaling. Refused by name: position_embedding_type rope (Granite
// 4.0-H's attention has no positions), attention_bias, hidden_act other than silu,
// quantization_config.
Expected<ModelConfig> read_granite_hybrid_config(const nlohmann::json& j);

// Python's json.dumps writes float('inf') and float('nan') as the bare tokens Infinity,
// -Infinity and NaN, which JSON (and nlohmann) rejects: `text` with each such token outside a
// string turned into the string "Infinity", "-Infinity" or "NaN" (read back by config_float).
std::string quote_python_floats(const std::string& text);

}  // namespace brigade
