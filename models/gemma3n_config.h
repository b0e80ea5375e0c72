// Internal to models/: the config.json of Gemma 3n (Gemma3nForCausalLM, model_type gemma3n_text;
// Gemma3nForConditionalGeneration, gemma3n, whose language model brigade serves as text) read into
// ModelConfig, its Gemma 3n fields in ModelConfig::gemma3n. The decoder is models/gemma3n.h.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// Whether config.json is Gemma 3n's: architectures[0] Gemma3nForCausalLM or
// Gemma3nForConditionalGeneration, else model_type gemma3n_text or gemma3n.
bool is_gemma3n(const nlohmann::json& j);

// Reads it as transformers' Gemma3nTextConfig does (its defaults for absent fields, a
// Gemma3nForConditionalGeneration's text_config with the top level's dtype and ids): the Gemma 3
// fields (scaled embeddings, layer_types with the sliding window, two RoPE bases, the final
// softcap; norms scale by w, not 1 + w; softmax scale 1) and the Gemma 3n ones: AltUp, LAuReL,
// per-layer inputs, per-layer MLP widths and activation sparsity, and which K/V cache layer each
// layer reads (num_kv_shared_layers: the last layers reuse the last earlier layer of their own
// attention type). A Gemma3nForConditionalGeneration's towers are not run (vision_off says so;
// ids from the vision embedder's vocab_offset on are refused). Refused by field: another
// hidden_activation, attention_bias, a rope scaling of the sliding layers, layer types other than
// sliding/full, a shared layer type no earlier layer produces, per-layer lists of the wrong length.
Expected<ModelConfig> read_gemma3n_config(const nlohmann::json& j);

// The cache layer each layer writes or reads (Gemma3nFields::kv_layer, Gemma4Fields::kv_layer):
// layers [n - n_shared, n) reuse the K/V of the last layer of their own attention type (c's
// sliding_layers) before that range (transformers' kv_sharing_modes), the others write their own.
// invalid_argument for n_shared outside [0, n) or a shared type no earlier layer produces.
Expected<std::vector<int>> shared_kv_layers(const ModelConfig& c, int n_shared);

}  // namespace brigade
