// Internal to models/: the config.json fields of three hybrid sliding-window MoE decoders routed as
// DeepSeek-V3 routes (sigmoid scores, e_score_correction_bias shifting the selection, groups by
// their two best, renormalised with norm_topk_prob, times routed_scaling_factor; Kolibri-1 ranks
// the logits rather than the scores), read into
// ModelConfig by parse_hf_config (models/model_config.cpp, through read_llama_variant) for the
// Llama decoder (models/llama.h):
//   mimo_v2_flash (MiMoV2FlashForCausalLM, Xiaomi MiMo-V2-Flash; MiMoV2FlashConfig): the
//     "sliding_attention" layers of layer_types (absent: the Hub's hybrid_layer_pattern, 1 =
//     sliding; absent too: all but layer 0 and every 6th) attend within sliding_window tokens
//     (sliding_window_size + 1 where the Hub's field is given, as transformers and SGLang), over
//     swa_num_key_value_heads KV heads (absent: 2 x num_key_value_heads, as
//     MiMoV2FlashAttention builds them), each with a learned sink logit per query head
//     (self_attn.attention_sink_bias; transformers' sinks); the full layers over
//     num_key_value_heads, without sinks; q/k heads of head_dim, v heads of v_head_dim (<=
//     head_dim), the values times attention_value_scale (null: 1); RoPE (halves) over the first
//     int(head_dim * partial_rotary_factor) dims with rope_parameters' per-layer-type thetas
//     (absent: the Hub's rope_theta / swa_rope_theta, transformers' 5e6 / 1e4 defaults);
//     mlp_layer_types' "dense" layers a SwiGLU of intermediate_size (absent: layer 0), the others
//     n_routed_experts experts of moe_intermediate_size, no shared experts. The decoder runs
//     one KV head count and one head width for every layer, so ModelConfig::n_kv_heads is the
//     sliding layers' and n_kv_heads_full the full layers' (whose KV heads load repeated),
//     v_head_width the v heads' (zero-padded to head_dim at load: models/widened_attention.h).
//     The MTP layers the Hub's checkpoints store (model.mtp.*) are not loaded, as transformers
//     ignores them.
//   exaone_moe (ExaoneMoeForCausalLM, LG K-EXAONE; ExaoneMoeConfig): EXAONE 4's attention
//     (per-head q/k norms; with a sliding_window, RoPE on the sliding layers only: the full
//     layers have no positions) in OLMoE's pre-norm layer (input_layernorm,
//     post_attention_layernorm before the MLP); mlp_layer_types' "dense" layers (absent: the
//     first first_k_dense_replace) a SwiGLU of intermediate_size, the others num_experts experts
//     of moe_intermediate_size beside num_shared_experts shared ones of that width each.
//   kolibri1 (Kolibri1ForCausalLM, Aleph Alpha Kolibri-1; Kolibri1Config over Qwen3MoeConfig):
//     EXAONE 4's attention and windows (sliding_window 513 by default, required; layer_types by
//     default every fifth layer full, without RoPE) in GLM-4's four-norm layer (input_layernorm,
//     post_self_attn_layernorm, post_attention_layernorm before the MLP, post_mlp_layernorm);
//     every layer num_experts (num_local_experts) experts beside one ungated shared SwiGLU of
//     shared_expert_intermediate_size (mlp.shared_experts), the top num_experts_per_tok chosen by
//     the router logits plus e_score_correction_bias (not their sigmoid plus it:
//     MoeRouting::select_on_logits), weighted by the chosen logits' sigmoid, renormalised with
//     norm_topk_prob (false by default), no routed_scaling_factor.
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// Reads c.arch "mimo_v2_flash", "exaone_moe" or "kolibri1" (the common fields and RoPE read already):
// attention, layer types, RoPE by layer type and the experts, with the config classes' defaults.
// Refuses by name what transformers' implementation does not run or the decoder does not: a
// hidden_act other than silu, attention_bias, scoring_func other than sigmoid, topk_method other
// than noaux_tc, a rope_type other than default; for mimo_v2_flash also v_head_dim > head_dim,
// swa_head_dim / swa_v_head_dim / swa_num_attention_heads other than the full layers',
// swa_num_key_value_heads not a multiple of num_key_value_heads, add_full_attention_sink_bias
// true, add_swa_attention_sink_bias false, n_shared_experts, partial_rotary_factor differing by
// layer type.
Status read_mimo_exaone(const nlohmann::json& j, ModelConfig& c);

// Layer l's KV heads as stored: n_kv_heads_full on a full-attention layer where it is set, else
// n_kv_heads (mimo_v2_flash; every other architecture n_kv_heads).
int stored_kv_heads(const ModelConfig& c, int l);

}  // namespace brigade
