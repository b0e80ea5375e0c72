#include "models/gguf_glm4moe.h"

#include <cmath>
#include <map>

#include "models/gguf_moe.h"

namespace brigade {

bool is_gguf_glm4moe(const std::string& gguf_arch) { return gguf_arch == "glm4moe"; }

std::string gguf_glm4moe_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate_inp.weight", "mlp.gate.weight"},
      {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
      {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
      {"ffn_up_exps.weight", "mlp.experts.up_proj"},
      {"ffn_down_exps.weight", "mlp.experts.down_proj"},
      {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
      {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
      {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
      // The MTP layer's own tensors (its decoder layer's are named as any layer's).
      {"nextn.eh_proj.weight", "eh_proj.weight"},
      {"nextn.enorm.weight", "enorm.weight"},
      {"nextn.hnorm.weight", "hnorm.weight"},
      {"nextn.shared_head_norm.weight", "shared_head.norm.weight"}};
  auto it = kNames.find(suffix);
  return it == kNames.end() ? "" : it->second;
}

Status read_gguf_glm4moe(const GgufFile& g, ModelConfig& c) {
  const std::string a = "glm4moe.";
  c.arch = "glm4_moe";
  c.rope_style = RopeStyle::neox;
  if (const GgufValue* v = g.find(a + "attention.value_length"); v && v->integer != c.head_dim)
    return unsupported(g.path() + ": " + a + "attention.value_length " + std::to_string(v->integer) +
                       " differs from key_length " + std::to_string(c.head_dim) + "; brigade runs equal q/k and v heads");
  // block_count counts the MTP layers, which follow the model's own.
  BRIGADE_ASSIGN_OR_RETURN(int64_t nextn, g.get_int_or(a + "nextn_predict_layers", 0));
  if (nextn < 0 || nextn >= c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "nextn_predict_layers' (" + std::to_string(nextn) +
                   ") must be in [0, block_count = " + std::to_string(c.n_layers) + ")");
  c.n_layers -= static_cast<int>(nextn);
  c.n_mtp_layers = static_cast<int>(nextn);
  // Glm4MoeAttention: q/k/v biases (attention_bias) and q/k norms (use_qk_norm) where stored.
  c.qkv_bias = c.attention_bias = g.has_tensor("blk.0.attn_q.bias");
  c.qk_norm = g.has_tensor("blk.0.attn_q_norm.weight");
  BRIGADE_RETURN_IF_ERROR(read_gguf_shared_experts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_sigmoid_gating(g, a, c));
  c.moe_score_bias = true;
  c.n_group = c.topk_group = 1;
  c.moe_group_score = MoeGroupScore::none;
  BRIGADE_ASSIGN_OR_RETURN(double scale, g.get_number_or(a + "expert_weights_scale", 1.0));
  if (!std::isfinite(scale) || scale <= 0.0)
    return corrupt(g.path() + ": metadata '" + a + "expert_weights_scale' must be a positive number");
  c.routed_scaling_factor = static_cast<float>(scale);
  BRIGADE_ASSIGN_OR_RETURN(int64_t norm, g.get_int_or(a + "expert_weights_norm", 0));
  c.norm_topk_prob = norm != 0;
  return Status::ok();
}

}  // namespace brigade
