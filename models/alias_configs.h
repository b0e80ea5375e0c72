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
//     (num_local_experts is n_routed_experts' other name);
//   Param2MoEForCausalLM (param2moe: BharatGen Param2-17B-A2.4B; Param2MoeConfig over Glm4MoeConfig,
//     which transformers runs as Glm4MoeForCausalLM, and so does brigade): Param2MoeConfig's
//     defaults (q/k norms on, whole heads rotated, theta 5e5, its shape) and its attribute_map's
//     names (num_experts, num_shared_experts, use_qkv_bias, num_mtp_layers);
//   HYV3ForCausalLM (hy_v3: tencent/Hy3-preview; run as GLM-4.5's MoE): DeepSeek-V3's routing and
//     shared experts behind per-head q/k norms, a dense first layer, HYV3Config's defaults; its
//     attention_bias / mlp_bias refused (Apertus's o_proj bias, biased MLPs);
//   SarvamMoEForCausalLM (sarvam_moe: sarvamai/sarvam-30b; SarvamMoEConfig over Glm4MoeConfig, run as
//     Glm4MoeForCausalLM): as Param2 MoE with SarvamMoEConfig's defaults (theta 8e6);
//   SarvamMLAForCausalLM (sarvam_mla: sarvamai/sarvam-105b; SarvamMLAConfig over DeepseekV3Config,
//     run as DeepseekV3ForCausalLM): its original format read as transformers does (head_dim and
//     q_head_dim dropped, deepseek_yarn as yarn, num_experts / num_shared_experts) under
//     SarvamMLAConfig's defaults (one expert group, layer 0 dense, no q_lora_rank);
//   MiniCPM5MoeForCausalLM (minicpm5_moe: OpenBMB MiniCPM 5 MoE; MiniCPM5MoeConfig over Glm4MoeConfig):
//     DeepSeek-V3's / GLM-4.5's experts (sigmoid routing with the selection bias, groups, shared
//     experts, routed_scaling_factor) on the layers mlp_layer_types calls sparse, a SwiGLU on the
//     dense ones, behind Llama's attention with an output gate: q_proj holds each head's q rows
//     then its gate rows (split at open: split_q_gate_proj), and the attention's output is multiplied
//     by sigmoid(gate) before o_proj (use_gated_attention, which must be true); whole heads rotated
//     (theta 5e6 by default); as Glm4MoeForCausalLM with use_gated_attention, no q/k norms, no MTP.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

// Rewrites an aliased architecture's config.json in place (above); any other is left unchanged.
// The refusals name the field.
Status apply_alias_config(nlohmann::json& j);

// MiniCPM 5's self_attn.q_proj (the Hub's name; transformers' q_gate_proj, taken too: weight
// [2 H hd, hidden] or bias [2 H hd], head h's q rows then its gate rows) as self_attn.q_proj and
// self_attn.gate_proj, copied into `arena` (kept alive by the
// caller: models/checkpoint.h); other tensors pass through. corrupt, naming the tensor, for another
// shape or a quantized one.
Expected<std::map<std::string, RawTensor>> split_q_gate_proj(const ModelConfig& c, std::map<std::string, RawTensor> tensors,
                                                             std::vector<std::vector<uint8_t>>& arena);

// Hy3's checkpoints: their names as Glm4MoeForCausalLM's (transformers' conversion mapping for
// hy_v3): mlp.router.gate -> mlp.gate, mlp.expert_bias -> mlp.gate.e_score_correction_bias,
// mlp.shared_mlp -> mlp.shared_experts. Other names pass through (a checkpoint saved in the
// transformers names is unchanged).
std::map<std::string, RawTensor> hy_v3_tensors(std::map<std::string, RawTensor> tensors);

// Param2 MoE's checkpoints (and Sarvam MoE's, whose names transformers shares with them): their
// original names as Glm4MoeForCausalLM's (transformers' conversion mapping for param2moe):
// model.word_embeddings -> model.embed_tokens, .attention. -> .self_attn., dense -> o_proj,
// query_layernorm / key_layernorm -> q_norm / k_norm, mlp.gate.expert_bias ->
// mlp.gate.e_score_correction_bias, and the fused query_key_value (weight and bias: q rows, then
// k's, then v's) split into q_proj, k_proj and v_proj (views, no copies). Applied when the
// checkpoint holds model.word_embeddings.weight; other tensors pass through. corrupt, naming the
// tensor, for a query_key_value of another shape or a block-quantized one.
bool has_sarvam_layout(const std::map<std::string, RawTensor>& tensors);
Expected<std::map<std::string, RawTensor>> sarvam_layout_tensors(const ModelConfig& c,
                                                                 std::map<std::string, RawTensor> tensors);

}  // namespace brigade
