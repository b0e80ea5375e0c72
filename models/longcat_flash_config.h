// Internal to models/: the config.json of Meituan's LongCat-Flash (LongcatFlashForCausalLM; its
// layers: models/longcat_flash.h) read into ModelConfig: DeepSeek-V3's MLA fields, its own names
// of the layer count and MLP widths, and the routing over real and zero-computation experts.
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// architectures[0] LongcatFlashForCausalLM, or model_type longcat_flash.
bool is_longcat_flash(const nlohmann::json& j);

// arch "longcat_flash", as transformers' LongcatFlashConfig reads it (its defaults for absent
// fields: LongCat-Flash-Chat's sizes, rope_theta 1e7, rms_norm_eps 1e-5): n_layers is num_layers
// (each layer holds two MLA blocks, so the model has 2 num_layers attention blocks: the KV pool's
// layers), intermediate_size ffn_hidden_size (the two dense MLPs), moe_intermediate_size
// expert_ffn_hidden_size, n_experts_per_tok moe_topk, n_zero_experts zero_expert_num; the router
// a softmax over the n_routed_experts + zero_expert_num logits, the selection bias
// (e_score_correction_bias), no renormalisation, times routed_scaling_factor; MLA as DeepSeek-V3's
// with interleaved RoPE over qk_rope_head_dim. Refused by name, each where transformers would not
// run it or runs something else than the field says: q_lora_rank null or 0, hidden_act other
// than silu, head_dim (the RoPE width transformers takes) other than qk_rope_head_dim, qk_head_dim
// other than qk_nope_head_dim + qk_rope_head_dim, attention_bias, router_bias (transformers' router
// ignores the bias it builds), mla_scale_q_lora / mla_scale_kv_lora false (transformers always
// scales), zero_expert_type other than identity, attention_method other than MLA, num_nextn_predict_layers > 0.
Expected<ModelConfig> read_longcat_flash_config(const nlohmann::json& j);

}  // namespace brigade
