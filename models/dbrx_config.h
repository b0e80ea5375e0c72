// Internal to models/: Databricks' DBRX (DbrxForCausalLM, dbrx-base / dbrx-instruct; transformers'
// DbrxConfig) as the Llama decoder runs it (models/llama.h):
//   - config.json's own names (d_model, n_heads, n_layers, max_seq_len; attn_config.kv_n_heads,
//     clip_qkv, rope_theta; ffn_config.ffn_hidden_size, moe_num_experts, moe_top_k,
//     moe_normalize_expert_weights, ffn_act_fn) copied under the common ones first
//     (apply_dbrx_config_names), DbrxConfig's defaults where absent;
//   - pre-norm layers of LayerNorms without bias (norm_1, norm_2, norm_f; eps 1e-5, nn.LayerNorm's),
//     one fused Wqkv without bias whose output is clamped to +-clip_qkv (ModelConfig::clip_qkv),
//     RoPE of halves with attn_config.rope_theta (the trained base: transformers 5's DbrxConfig
//     drops it for rope_parameters' default 10000; vLLM and transformers 4 read it, and so does
//     brigade), out_proj without bias;
//   - every layer's MLP moe_num_experts SwiGLU experts of ffn_hidden_size, softmax routing, the top
//     moe_top_k weights divided by their L1 norm (moe_normalize_expert_weights 1; null: not
//     renormalised; another p is refused), no shared expert; untied.
// The tensors (dbrx_tensors) keep their bytes: Wqkv's rows split into q/k/v views, experts.mlp.w1 /
// v1 [E * F, hidden] into each expert's gate_proj / up_proj views, w2 [E * F, hidden] (each
// expert's down_proj transposed) seen as the stack [E, F, hidden] that moe_block reads transposed.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

// Whether config.json is DBRX's (architectures[0] DbrxForCausalLM, or model_type dbrx without one).
bool is_dbrx(const nlohmann::json& j);

// For a DBRX config.json: its sizes under the common names (hidden_size, num_attention_heads,
// num_hidden_layers, max_position_embeddings, num_key_value_heads, intermediate_size,
// rope_theta), DbrxConfig's defaults where its fields are absent; attn_config.rope_theta also
// replaces rope_parameters' (above). Any other config is left unchanged.
void apply_dbrx_config_names(nlohmann::json& j);

// What DBRX adds to the Llama decoder's config (c.arch "dbrx", the common fields read): the
// LayerNorms, clip_qkv, the experts and their routing. Refuses by name: an ffn_act_fn other than
// silu, moe_normalize_expert_weights other than 1 or null, tie_word_embeddings, a quantized
// checkpoint (its scales would not follow the tensors' split), a non-positive clip_qkv.
Status read_dbrx(const nlohmann::json& j, ModelConfig& c);

// A DBRX checkpoint's tensors under the Llama decoder's names (above); corrupt, naming the tensor,
// when a fused tensor's shape does not match the config.
Expected<std::map<std::string, RawTensor>> dbrx_tensors(const ModelConfig& c, std::map<std::string, RawTensor> tensors);

}  // namespace brigade
