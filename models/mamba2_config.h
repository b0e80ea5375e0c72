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

// Python's json.dumps writes float('inf') and float('nan') as the bare tokens Infinity,
// -Infinity and NaN, which JSON (and nlohmann) rejects: `text` with each such token outside a
// string turned into the string "Infinity", "-Infinity" or "NaN" (read back by config_float).
std::string quote_python_floats(const std::string& text);

}  // namespace brigade
