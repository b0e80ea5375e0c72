#include "models/gguf_mimo_exaone.h"

#include <cmath>
#include <map>

#include "models/gguf_keys.h"
#include "models/gguf_moe.h"
#include "models/llama_variants_config.h"

namespace brigade {
namespace {

// The layers before the MTP blocks, and which of them slide (attention.sliding_window_pattern
// spans every block, MTP ones included).
Status read_layers_and_window(const GgufFile& g, const std::string& a, int default_pattern, ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(const int64_t nextn, g.get_int_or(a + "nextn_predict_layers", 0));
  if (nextn < 0 || nextn >= c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "nextn_predict_layers' must be in [0, block_count)");
  if (!g.find(a + "attention.sliding_window"))
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window' is missing (llama.cpp requires it)");
  BRIGADE_ASSIGN_OR_RETURN(const int64_t window, g.get_int(a + "attention.sliding_window"));
  if (window < 1 || window > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window' must be in [1, 2^31)");
  c.sliding_window = static_cast<int>(window);
  BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, default_pattern, c));
  c.n_layers -= static_cast<int>(nextn);
  c.sliding_layers.resize(static_cast<size_t>(c.n_layers));
  return Status::ok();
}

// mimo2's head_count_kv: one count per block, the sliding blocks' one value and the full
// blocks' another (or the same).
Status read_mimo_kv_heads(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.head_count_kv";
  const GgufValue* v = g.find(key);
  if (v == nullptr || v->type != GgufType::array || v->numbers.size() < c.sliding_layers.size())
    return corrupt(g.path() + ": metadata '" + key + "' must hold one count per block");
  int counts[2] = {0, 0};  // full, sliding
  for (size_t l = 0; l < c.sliding_layers.size(); ++l) {
    const double n = v->numbers[l];
    if (!(n > 0.0) || n > INT32_MAX || n != std::floor(n))
      return corrupt(g.path() + ": metadata '" + key + "' holds a count that is not a whole number > 0");
    int& want = counts[c.sliding_layers[l] ? 1 : 0];
    if (want != 0 && want != static_cast<int>(n))
      return unsupported(g.path() + ": metadata '" + key + "' differs between layers of one kind (sliding or full); "
                         "mimo2 files are supported with one count per kind");
    want = static_cast<int>(n);
  }
  const int full = counts[0], sliding = counts[1];
  c.n_kv_heads = sliding > 0 ? sliding : full;
  if (full > 0 && sliding > 0 && sliding % full != 0)
    return unsupported(g.path() + ": metadata '" + key + "': the sliding layers' KV heads (" + std::to_string(sliding) +
                       ") must be a multiple of the full layers' (" + std::to_string(full) + ")");
  c.n_kv_heads_full = full > 0 && sliding > 0 && full != sliding ? full : 0;
  return Status::ok();
}

// The dense layers: those without a router (llama.cpp's mimo2 tells them so).
void read_dense_layers(const GgufFile& g, ModelConfig& c) {
  auto dense = [&](int l) { return !g.has_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight"); };
  c.decoder_sparse_step = 1;
  c.first_k_dense_replace = 0;
  while (c.first_k_dense_replace < c.n_layers && dense(c.first_k_dense_replace)) ++c.first_k_dense_replace;
  c.mlp_only_layers.clear();
  for (int l = c.first_k_dense_replace; l < c.n_layers; ++l)
    if (dense(l)) c.mlp_only_layers.push_back(l);
}

Status read_mimo2(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "mimo_v2_flash";
  BRIGADE_RETURN_IF_ERROR(read_layers_and_window(g, a, 0, c));
  if (!g.find(a + "attention.sliding_window_pattern"))
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window_pattern' is missing (llama.cpp requires it)");
  BRIGADE_RETURN_IF_ERROR(read_mimo_kv_heads(g, a, c));
  BRIGADE_ASSIGN_OR_RETURN(const int64_t v_width, g.get_int_or(a + "attention.value_length", c.head_dim));
  if (v_width < 1 || v_width > c.head_dim)
    return unsupported(g.path() + ": metadata '" + a + "attention.value_length' " + std::to_string(v_width) +
                       " is not supported; supported: 1 to key_length (" + std::to_string(c.head_dim) + ")");
  c.v_head_width = v_width == c.head_dim ? 0 : static_cast<int>(v_width);
  BRIGADE_ASSIGN_OR_RETURN(const double swa_theta, g.get_number_or(a + "rope.freq_base_swa", c.rope_theta));
  BRIGADE_ASSIGN_OR_RETURN(const double value_scale, g.get_number_or(a + "attention.value_scale", 1.0));
  if (!(swa_theta > 0.0) || !std::isfinite(swa_theta) || !std::isfinite(value_scale))
    return corrupt(g.path() + ": metadata '" + a + "rope.freq_base_swa' or 'attention.value_scale' is not a number");
  c.rope_local_theta = static_cast<float>(swa_theta);
  c.attn_value_scale = static_cast<float>(value_scale);
  for (int l = 0; l < c.n_layers; ++l) {
    const bool sinks = g.has_tensor("blk." + std::to_string(l) + ".attn_sinks.weight");
    if (sinks && c.layer_window(l) == 0)
      return unsupported(g.path() + ": attn_sinks on full-attention block " + std::to_string(l) +
                         " is not supported (MiMo-V2-Flash has them on its sliding layers only)");
    c.attn_sinks = c.attn_sinks || sinks;
  }
  c.sinks_sliding_only = c.attn_sinks;
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  read_dense_layers(g, c);
  BRIGADE_RETURN_IF_ERROR(read_gguf_sigmoid_gating(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_groups(g, a, c));
  c.moe_score_bias = g.has_tensor("blk." + std::to_string(c.first_k_dense_replace) + ".exp_probs_b.bias");
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 1.0f;
  return Status::ok();
}

Status read_exaone_moe(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "exaone_moe";
  c.qk_norm = true;
  BRIGADE_RETURN_IF_ERROR(read_layers_and_window(g, a, 4, c));
  nope_on_full_layers(c);  // llama.cpp's exaone-moe rotates its sliding layers only
  BRIGADE_RETURN_IF_ERROR(read_gguf_shared_experts(g, a, c));
  BRIGADE_ASSIGN_OR_RETURN(const int64_t shared_width,
                           g.get_int_or(a + "expert_shared_feed_forward_length", c.shared_width()));
  if (shared_width != c.shared_width())
    return unsupported(g.path() + ": metadata '" + a + "expert_shared_feed_forward_length' " + std::to_string(shared_width) +
                       " is not supported; supported: expert_shared_count x expert_feed_forward_length (" +
                       std::to_string(c.shared_width()) + ")");
  BRIGADE_RETURN_IF_ERROR(read_gguf_sigmoid_gating(g, a, c));
  return read_gguf_deepseek_routing(g, a, c);
}

}  // namespace

bool is_gguf_mimo_exaone(const std::string& gguf_arch) { return gguf_arch == "mimo2" || gguf_arch == "exaone-moe"; }

Status read_gguf_mimo_exaone(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  if (gguf_arch == "mimo2") return read_mimo2(g, a, c);
  return read_exaone_moe(g, a, c);
}

std::string gguf_mimo_exaone_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"attn_sinks.weight", "self_attn.attention_sink_bias"}, {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"}};
  if (auto it = kNames.find(suffix); it != kNames.end()) return it->second;
  return gguf_moe_layer_name(suffix, /*gated_shared_expert=*/false);  // router, experts, shared_experts
}

}  // namespace brigade
