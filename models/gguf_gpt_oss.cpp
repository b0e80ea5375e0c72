#include "models/gguf_gpt_oss.h"

#include <cmath>
#include <map>

#include "models/gguf_keys.h"
#include "models/gguf_moe.h"

namespace brigade {
bool is_gguf_gpt_oss(const std::string& gguf_arch) { return gguf_arch == "gpt-oss"; }

std::string gguf_gpt_oss_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"attn_sinks.weight", "self_attn.sinks"},
      {"ffn_gate_inp.weight", "mlp.router.weight"},
      {"ffn_gate_inp.bias", "mlp.router.bias"},
      {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
      {"ffn_up_exps.weight", "mlp.experts.up_proj"},
      {"ffn_down_exps.weight", "mlp.experts.down_proj"},
      {"ffn_gate_exps.bias", "mlp.experts.gate_proj_bias"},
      {"ffn_up_exps.bias", "mlp.experts.up_proj_bias"},
      {"ffn_down_exps.bias", "mlp.experts.down_proj_bias"}};
  auto it = kNames.find(suffix);
  return it == kNames.end() ? "" : it->second;
}

Status read_gguf_gpt_oss(const GgufFile& g, ModelConfig& c) {
  const std::string a = "gpt-oss.";
  c.arch = "gpt_oss";
  c.rope_style = RopeStyle::neox;
  if (const GgufValue* v = g.find(a + "attention.value_length"); v && v->integer != c.head_dim)
    return unsupported(g.path() + ": " + a + "attention.value_length " + std::to_string(v->integer) +
                       " differs from key_length " + std::to_string(c.head_dim) + "; brigade runs equal q/k and v heads");
  // GptOssAttention: q/k/v/o biases and a sink logit per head.
  c.attention_bias = c.qkv_bias = c.o_bias = true;
  c.attn_sinks = true;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.sliding_window", 0, c.sliding_window));
  BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, 2, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_yarn(g, a, c));
  c.rope_scaling.truncate = false;  // the Hub's gpt-oss rope_scaling (gguf_gpt_oss.h)
  // GptOssMLP: every layer sparse, a biased router whose top k are softmaxed, biased experts with
  // the clamped SwiGLU.
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  c.norm_topk_prob = true;
  c.moe_biases = true;
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  c.swiglu_limit = 7.0f;
  c.swiglu_alpha = 1.702f;
  return Status::ok();
}

}  // namespace brigade
