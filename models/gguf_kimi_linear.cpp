#include "models/gguf_kimi_linear.h"

#include <cmath>
#include <vector>

#include "models/gguf_deepseek2.h"
#include "models/gguf_moe.h"

namespace brigade {

bool is_gguf_kimi_linear(const std::string& gguf_arch) { return gguf_arch == "kimi-linear"; }

namespace {

// Which blocks are KDA: attention.head_count_kv, one count per block, 0 for KDA.
Status read_kda_blocks(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.head_count_kv";
  const GgufValue* v = g.find(key);
  if (v == nullptr || v->type != GgufType::array || v->numbers.size() != static_cast<size_t>(c.n_layers))
    return corrupt(g.path() + ": metadata '" + key + "' must hold one count per block (" + std::to_string(c.n_layers) +
                   "): 0 for the KDA blocks");
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (size_t l = 0; l < v->numbers.size(); ++l) c.ssm_layers[l] = v->numbers[l] == 0.0;
  return Status::ok();
}

Status read_mla(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.kv_lora_rank", 0, c.kv_lora_rank));
  BRIGADE_ASSIGN_OR_RETURN(int64_t q_lora, g.get_int_or(a + "attention.q_lora_rank", 0));
  if (q_lora < 0 || q_lora > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "attention.q_lora_rank' is out of range");
  c.q_lora_rank = static_cast<int>(q_lora);
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "rope.dimension_count", 0, c.qk_rope_head_dim));
  int dk = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.key_length_mla", 0, dk));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.value_length_mla", 0, c.v_head_dim));
  if (dk <= c.qk_rope_head_dim)
    return corrupt(g.path() + ": metadata '" + a + "attention.key_length_mla' (" + std::to_string(dk) + ") must exceed '" +
                   a + "rope.dimension_count' (" + std::to_string(c.qk_rope_head_dim) + "): each head is nope + rope");
  c.qk_nope_head_dim = dk - c.qk_rope_head_dim;
  c.head_dim = c.qk_rope_head_dim;
  c.rotary_dim = 0;
  c.n_kv_heads = c.n_heads;
  c.nope = true;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  c.mla_norm_eps = c.rms_eps;  // llama.cpp's latent norms take layer_norm_rms_epsilon
  return Status::ok();
}

}  // namespace

Status read_gguf_kimi_linear(const GgufFile& g, ModelConfig& c) {
  const std::string a = "kimi-linear.";
  c.arch = "kimi_linear";
  BRIGADE_RETURN_IF_ERROR(read_kda_blocks(g, a, c));
  int head_dim = 0, kernel = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "kda.head_dim", 0, head_dim));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.conv_kernel", 0, kernel));
  c.ssm.kda = true;
  c.ssm.conv_bias = false;
  c.ssm.layout = SsmLayout{.n_heads = c.n_heads, .head_dim = head_dim, .n_groups = c.n_heads, .state_size = head_dim,
                           .conv_kernel = kernel};
  BRIGADE_RETURN_IF_ERROR(read_mla(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_shared_experts(g, a, c));
  if (!g.find(a + "expert_gating_func"))
    return corrupt(g.path() + ": metadata '" + a + "expert_gating_func' is missing (llama.cpp's kimi-linear requires it)");
  BRIGADE_ASSIGN_OR_RETURN(int64_t gating, g.get_int(a + "expert_gating_func"));
  if (gating != 2)
    return unsupported(g.path() + ": metadata '" + a + "expert_gating_func' " + std::to_string(gating) +
                       " is not supported for kimi-linear; supported: 2 (sigmoid)");
  c.moe_scoring = MoeScoring::sigmoid;
  BRIGADE_RETURN_IF_ERROR(read_gguf_deepseek_routing(g, a, c));
  c.norm_topk_prob = true;  // llama.cpp's kimi-linear graph renormalises always
  return Status::ok();
}

std::string gguf_kimi_linear_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"ssm_conv1d_q.weight", "self_attn.q_conv1d.weight"}, {"ssm_conv1d_k.weight", "self_attn.k_conv1d.weight"},
      {"ssm_conv1d_v.weight", "self_attn.v_conv1d.weight"}, {"ssm_f_a.weight", "self_attn.f_a_proj.weight"},
      {"ssm_f_b.weight", "self_attn.f_b_proj.weight"},      {"ssm_beta.weight", "self_attn.b_proj.weight"},
      {"ssm_a", "self_attn.A_log"},                         {"ssm_dt.bias", "self_attn.dt_bias"},
      {"ssm_g_a.weight", "self_attn.g_a_proj.weight"},      {"ssm_g_b.weight", "self_attn.g_b_proj.weight"},
      {"ssm_norm.weight", "self_attn.o_norm.weight"},       {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},         {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},              {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (auto it = kNames.find(suffix); it != kNames.end()) return it->second;
  return gguf_deepseek2_layer_name(suffix);  // MLA, router, experts, shared experts
}

Status finish_gguf_kimi_linear(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c) {
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.ssm_layers[static_cast<size_t>(l)]) continue;
    for (const char* part : {"k_b_proj", "v_b_proj"}) {  // per head blocks of rows
      auto it = tensors.find("model.layers." + std::to_string(l) + ".self_attn." + part + ".weight");
      if (it == tensors.end()) continue;  // (kv_b_proj whole, or missing: the load names it)
      if (it->second.shape.size() != 3)
        return corrupt(g.path() + ": tensor 'blk." + std::to_string(l) + ".attn_" + part[0] + "_b.weight' has shape " +
                       it->second.shape_string() + "; expected 3 dimensions [heads, rows, cols]");
      it->second.shape = {it->second.shape[0] * it->second.shape[1], it->second.shape[2]};
    }
  }
  if (c.n_experts > 0) return check_gguf_moe_tensors(g, c);
  return Status::ok();
}

}  // namespace brigade
