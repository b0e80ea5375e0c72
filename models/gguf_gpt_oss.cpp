#include "models/gguf_gpt_oss.h"

#include <cmath>
#include <map>

#include "models/gguf_gemma.h"
#include "models/gguf_moe.h"

namespace brigade {
namespace {

// A positive finite float key, `fallback` when absent.
Status read_positive(const GgufFile& g, const std::string& key, double fallback, float& out) {
  BRIGADE_ASSIGN_OR_RETURN(double v, g.get_number_or(key, fallback));
  if (!std::isfinite(v) || v <= 0.0) return corrupt(g.path() + ": metadata '" + key + "' must be a positive number");
  out = static_cast<float>(v);
  return Status::ok();
}

}  // namespace

// rope.scaling: none, or YaRN as the converter writes the Hub's rope_scaling (and llama.cpp's
// defaults for the keys it leaves out: the original context is context_length, beta 32 / 1).
Status read_gguf_yarn(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const GgufValue* type = g.find(a + "rope.scaling.type");
  if (!type || type->str == "none") return Status::ok();
  if (type->str != "yarn")
    return unsupported(g.path() + ": " + a + "rope.scaling.type '" + type->str + "' is not supported for this architecture; "
                       "supported: none, yarn");
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::yarn;
  if (!g.find(a + "rope.scaling.factor")) return corrupt(g.path() + ": metadata '" + a + "rope.scaling.factor' is missing");
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.factor", 1.0, s.factor));
  BRIGADE_ASSIGN_OR_RETURN(int64_t original, g.get_int_or(a + "rope.scaling.original_context_length", c.max_position));
  if (original <= 0 || original > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.original_context_length' is out of range");
  s.original_max_position = static_cast<int>(original);
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.yarn_beta_fast", 32.0, s.beta_fast));
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.yarn_beta_slow", 1.0, s.beta_slow));
  if (!(s.beta_fast > s.beta_slow))
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.yarn_beta_fast' must be greater than yarn_beta_slow");
  float ext = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.yarn_ext_factor", 1.0, ext));
  if (ext != 1.0f)
    return unsupported(g.path() + ": metadata '" + a + "rope.scaling.yarn_ext_factor' " + std::to_string(ext) +
                       ": only YaRN's full ramp (1) is supported");
  // llama.cpp multiplies YaRN's magnitude correction by rope.scaling.attn_factor; transformers'
  // attention_factor replaces the correction, so it is the product.
  if (g.find(a + "rope.scaling.attn_factor")) {
    float attn = 1.0f;
    BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.attn_factor", 1.0, attn));
    s.attention_factor = yarn_mscale(s.factor, 1.0f) * attn;
  }
  return Status::ok();
}

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
