// Internal to models/: architectures whose layers are another's under a new name, read by rewriting
// their config.json into that one's before anything else reads it (parse_hf_config):
//   IQuestCoderForCausalLM (iquestcoder: IQuest-Coder-V1-40B; IQuestCoderConfig, which transformers
//     runs as LlamaForCausalLM): LlamaForCausalLM with IQuestCoderConfig's defaults; its remote
//     code's clip_qkv and use_sliding_window, which no released checkpoint sets, refused by name
//     (transformers refuses them too);
//   SolarOpenForCausalLM (solar_open: Upstage Solar-Open-100B; SolarOpenConfig over Glm4MoeConfig):
//     GLM-4.5's mixture of experts (sigmoid routing with the selection bias, groups, shared
//     experts, routed_scaling_factor) in every layer behind Llama's attention: as
//     Glm4MoeForCausalLM with first_k_dense_replace 0, no q/k norms, whole heads rotated unless
//     partial_rotary_factor says otherwise, no MTP layers, SolarOpenConfig's defaults
//     (num_local_experts is n_routed_experts' other name).
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace brigade {

// Rewrites an aliased architecture's config.json in place (above); any other is left unchanged.
// The refusals name the field.
Status apply_alias_config(nlohmann::json& j);

}  // namespace brigade
