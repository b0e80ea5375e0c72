// Internal to models/: the config.json fields of Arcee's models, read into ModelConfig by
// parse_hf_config (models/model_config.cpp) for the Llama decoder (models/llama.h):
//   afmoe (AfmoeForCausalLM, Arcee Trinity Nano / Mini / Large; AfmoeConfig): per-head q/k norms,
//     an output gate (sigmoid(self_attn.gate_proj · x) times the attention output before o_proj:
//     ModelConfig::attn_gate), sliding_window on the "sliding_attention" layers of layer_types
//     (without it all but every global_attn_every_n_layers-th layer), which alone have RoPE;
//     Gemma's four norms under AFMoE's names (input_layernorm, post_attention_layernorm on the
//     attention output, pre_mlp_layernorm, post_mlp_layernorm); the embeddings times
//     sqrt(hidden_size) with mup_enabled; layers [0, num_dense_layers) a dense SwiGLU, the others
//     num_experts experts of moe_intermediate_size, the top num_experts_per_tok of their sigmoid
//     scores chosen with mlp.expert_bias, renormalised and times route_scale, beside
//     num_shared_experts shared experts (read_afmoe_moe);
//   arcee (ArceeForCausalLM, Arcee AFM-4.5B; ArceeConfig): Llama's layer with an ungated MLP,
//     down_proj(relu(up_proj(x))^2) (MlpActivation::relu2; hidden_act relu2).
#pragma once

#include <nlohmann/json.hpp>

#include "models/model_config.h"

namespace brigade {

// The attention, norms and MLP activation (c.arch "afmoe" or "arcee", the common fields and the
// RoPE read already). Refuses by name what the decoder does not run: hidden_act other than silu
// (afmoe) or relu2 (arcee), attention_bias, a null sliding_window with sliding layers.
Status read_arcee_family(const nlohmann::json& j, ModelConfig& c);

// AFMoE's experts and routing (AfmoeConfig's defaults where absent: 64 experts, 6 per token, 2
// shared, num_dense_layers 1, route_scale 1). transformers' AfmoeTokenChoiceRouter always
// renormalises and has no expert groups: the Hub configs' route_norm, score_func, n_group and
// topk_group are ignored, as transformers ignores them.
Status read_afmoe_moe(const nlohmann::json& j, ModelConfig& c);

}  // namespace brigade
