// Internal to models/: the DeepSeek-V2/V3 fields of config.json (MLA attention and the MoE with
// shared experts), read into ModelConfig by parse_hf_config (models/model_config.cpp).
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
Status read_deepseek(const nlohmann::json& j, ModelConfig& c);

// The MLA and routing numbers fit together; names the field that does not.
Status validate_deepseek(const ModelConfig& c);

}  // namespace brigade
