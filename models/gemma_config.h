// Internal to models/: the Gemma 2 / Gemma 3 (text) fields of config.json, read into ModelConfig by
// parse_hf_config (models/model_config.cpp). Both run on the Llama decoder (models/llama.h).
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

bool is_gemma(const std::string& arch);

// Reads a gemma2 / gemma3_text config's fields (c.arch set, the common fields and rope scaling
// read already) as transformers' Gemma2Config / Gemma3TextConfig defaults and modeling code use
// them: norms scale by 1 + w and sandwich both blocks, the embeddings are scaled by
// sqrt(hidden_size), the MLP gate is gelu_pytorch_tanh, the softmax scale is
// query_pre_attn_scalar^-0.5, attn/final_logit_softcapping (null = none), layer_types (or the
// default rule: gemma2 even layers sliding, gemma3 all but every sliding_window_pattern-th) and
// gemma3's rope_local_base_freq for the sliding layers. Refuses, naming the field, what the
// decoder does not run (another hidden_activation, bidirectional attention, a layer type other
// than sliding_attention / full_attention, scaling of the local RoPE).
Status read_gemma(const nlohmann::json& j, ModelConfig& c);

}  // namespace brigade
