// Internal to models/: THUDM / Zhipu's remote-code ChatGLM checkpoints (ChatGLMModel,
// ChatGLMForConditionalGeneration: chatglm2-6b, chatglm3-6b, glm-4-9b-chat, glm-4-9b; ChatGLMConfig),
// run as GlmForCausalLM (arch "glm", which transformers' convert_glm_weights_to_hf.py makes of
// them: the same layers, renamed): RMSNorm pre-norm layers, one query_key_value with q/k/v biases
// (add_qkv_bias), q, k, v rows one after the other; multi-query attention over
// multi_query_group_num KV heads; RoPE of adjacent pairs over the first half of each head with base
// 10000 * rope_ratio; dense_h_to_4h holding gate|up (SwiGLU), dense_4h_to_h; a final RMSNorm and
// an untied output_layer.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "models/raw_tensor.h"

namespace brigade {

// Whether config.json is ChatGLM's (architectures[0] ChatGLMModel or ChatGLMForConditionalGeneration,
// or model_type chatglm without architectures).
bool is_chatglm(const nlohmann::json& j);

// For a ChatGLM config.json: its fields under GlmConfig's names (num_layers as num_hidden_layers,
// kv_channels as head_dim, multi_query_group_num as num_key_value_heads under
// multi_query_attention, ffn_hidden_size as intermediate_size, padded_vocab_size as vocab_size,
// layernorm_epsilon as rms_norm_eps, seq_length as max_position_embeddings, 10000 * rope_ratio as
// rope_theta, add_qkv_bias as attention_bias, partial_rotary_factor 0.5), ChatGLMConfig's defaults
// where absent, and architectures GlmForCausalLM. Refuses, naming the field, what the layers above
// do not compute: rmsnorm false, apply_residual_connection_post_layernorm, post_layer_norm false,
// add_bias_linear, a prefix encoder (pre_seq_len), ChatGLM's own quantized weights (quantization_bit),
// GLM-4V's vision_config. Any other config is left unchanged.
Status apply_chatglm_config(nlohmann::json& j);

// A ChatGLM checkpoint's tensors under GlmForCausalLM's names (model.embed_tokens,
// self_attn.{q,k,v,o}_proj, input_layernorm, post_attention_layernorm, mlp.gate_up_proj,
// mlp.down_proj, model.norm, lm_head); query_key_value's weight and bias split into q/k/v views of
// their rows; rotary_pos_emb.inv_freq (a buffer) dropped. A GlmForCausalLM checkpoint's names
// pass through. corrupt, naming the tensor, when query_key_value's rows are not heads * head_dim +
// 2 * kv_heads * head_dim.
Expected<std::map<std::string, RawTensor>> chatglm_tensors(int64_t q_rows, int64_t kv_rows,
                                                           std::map<std::string, RawTensor> tensors);

}  // namespace brigade
