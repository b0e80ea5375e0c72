// Internal to models/: the config.json fields of Microsoft Phi-3.5-MoE (PhimoeForCausalLM,
// model_type phimoe; PhimoeConfig), read into ModelConfig by parse_hf_config
// (models/model_config.cpp) for the Llama decoder (models/llama.h): Mixtral's layer
// (LlamaAttention with attention_bias on q/k/v and o, sliding_window on every layer) under
// LayerNorms with biases (nn.LayerNorm, eps rms_norm_eps), a biased lm_head (lm_head_bias), Phi-3's
// longrope with cos/sin scaled by short_mscale / long_mscale, and on every layer
// num_local_experts experts of intermediate_size, two per token chosen by sparsemixer.
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// The attention, norms, head and RoPE magnitude (c.arch "phimoe", the common fields and the RoPE
// read already). Refuses by name what the decoder does not run: hidden_act other than silu, a
// rope type other than default and longrope, a longrope without short_mscale and long_mscale
// (PhimoeConfig refuses those too).
Status read_phimoe(const nlohmann::json& j, ModelConfig& c);

// The sparsemixer routing (PhimoeTopKRouter in eval: MoeScoring::sparsemixer) with
// router_jitter_noise (0.01 by default) as its threshold; the experts' count and width read
// already. num_experts_per_tok must be 2, the only top-k sparsemixer computes (transformers
// ignores the field); another value is refused by name.
Status read_phimoe_routing(const nlohmann::json& j, ModelConfig& c);

}  // namespace brigade
