#include "models/gguf_arcee.h"

#include <cmath>
#include <map>

#include "models/gguf_keys.h"
#include "models/gguf_moe.h"

namespace brigade {
namespace {

// afmoe (gguf_arcee.h).
Status read_afmoe(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "afmoe";
  c.qk_norm = c.attn_gate = c.sandwich_norms = true;
  c.embedding_multiplier = std::sqrt(static_cast<float>(c.hidden_size));
  BRIGADE_ASSIGN_OR_RETURN(const int64_t window, g.get_int_or(a + "attention.sliding_window", 0));  // 0: none
  if (window < 0 || window > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window' is out of range");
  c.sliding_window = static_cast<int>(window);
  c.sliding_layers.clear();
  if (c.sliding_window > 0) BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, 4, c));
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = (l + 1) % 4 == 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_shared_experts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_sigmoid_gating(g, a, c));
  return read_gguf_deepseek_routing(g, a, c);
}

}  // namespace

bool is_gguf_arcee(const std::string& gguf_arch) { return gguf_arch == "afmoe" || gguf_arch == "arcee"; }

Status read_gguf_arcee(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  c.qkv_bias = c.attention_bias = g.has_tensor("blk.0.attn_q.bias");
  c.o_bias = g.has_tensor("blk.0.attn_output.bias");
  if (gguf_arch == "afmoe") return read_afmoe(g, a, c);
  c.arch = "arcee";
  c.mlp_activation = MlpActivation::relu2;
  c.sliding_window = 0;
  return read_gguf_yarn(g, a, c);
}

std::string gguf_afmoe_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"attn_gate.weight", "self_attn.gate_proj.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight", "pre_mlp_layernorm.weight"},
      {"post_ffw_norm.weight", "post_mlp_layernorm.weight"},
      {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"}};
  if (auto it = kNames.find(suffix); it != kNames.end()) return it->second;
  return gguf_moe_layer_name(suffix, /*gated_shared_expert=*/false);  // router, experts, shared_experts
}

}  // namespace brigade
