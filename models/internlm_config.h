// Internal to models/: Shanghai AI Lab's InternLM 2 and 3 (remote-code checkpoints, run by the Llama
// decoder, models/llama.h):
//   internlm2 (InternLM2ForCausalLM: internlm2-chat-1_8b / 7b / 20b, internlm2_5-1_8b / 7b / 20b-chat,
//     and the language model of InternVL 2 / 2.5 checkpoints built on them; InternLM2Config):
//     Llama's pre-norm RMSNorm layers, RoPE of halves (rotate_half) with dynamic / linear
//     rope_scaling, SwiGLU, untied output; `bias` (true by default, false in every released
//     checkpoint) gives both attention projections biases. Its own names: model.tok_embeddings,
//     layers.N.attention_norm / attention.wqkv / attention.wo / ffn_norm / feed_forward.w1 (gate),
//     w3 (up), w2 (down), model.norm, output. attention.wqkv fuses q, k and v per KV group: rows
//     [groups, q_per_kv + 2, head_dim] (q_per_kv query heads, then that group's k head and v
//     head), taken apart at open (internlm2_tensors).
//   internlm3 (InternLM3ForCausalLM: internlm3-8b-instruct; InternLM3Config): the Llama layout
//     and names, q/k/v biases with qkv_bias, o_proj's and the MLP's with bias, its own head_dim.
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

// What InternLM 2 or 3 adds to the Llama decoder's config (c.arch "internlm2" or "internlm3", the
// common fields read): the biases above, no sliding window. Refuses by name a quantization_config
// for internlm2 (packed or scaled wqkv would not follow the per-group split) and a hidden_act other
// than silu.
Status read_internlm(const nlohmann::json& j, ModelConfig& c);

// An internlm2 checkpoint's tensors under the Llama decoder's names (model.embed_tokens,
// self_attn.{q,k,v,o}_proj, input_layernorm, post_attention_layernorm, mlp.{gate,up,down}_proj,
// lm_head), under the language model's prefix when it has one (InternVLChatModel's
// language_model.); others are passed through. wqkv's weight and bias are split into q_proj,
// k_proj and v_proj: rows copied into `arena`, which the caller keeps alive as long as the
// tensors (models/checkpoint.h), unless one group holds every head (then views). corrupt, naming
// the tensor, when wqkv's shape does not fit the config.
Expected<std::map<std::string, RawTensor>> internlm2_tensors(const ModelConfig& c,
                                                             std::map<std::string, RawTensor> tensors,
                                                             std::vector<std::vector<uint8_t>>& arena);

}  // namespace brigade
