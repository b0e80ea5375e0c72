#include "models/mimo_exaone_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "models/config_json.h"
#include "models/deepseek_config.h"
#include "models/gemma_config.h"
#include "models/llama_variants_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

Status refuse(const ModelConfig& c, const std::string& what) {
  return unsupported("config.json: " + what + " is not supported for " + c.arch);
}

Status require_silu(const json& j, const ModelConfig& c) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return refuse(c, "hidden_act '" + act + "' (supported: silu)");
  if (c.attention_bias) return refuse(c, "attention_bias = true");
  return Status::ok();
}

// DeepseekV3TopkRouter's rule over `experts_key` experts (MiMoV2FlashTopkRouter's,
// ExaoneMoeTopkRouter's), with the config classes' defaults.
Status read_routing(const json& j, ModelConfig& c, const char* experts_key, int experts, int k, int inter, float scale) {
  c.n_experts = experts;
  c.n_experts_per_tok = k;
  c.moe_intermediate_size = inter;
  c.n_group = c.topk_group = 1;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = scale;  // MiMo's Hub config stores null: 1
  BRIGADE_RETURN_IF_ERROR(read_int(j, experts_key, c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "n_group", c.n_group, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "topk_group", c.topk_group, false));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "routed_scaling_factor", c.routed_scaling_factor));
  std::string scoring, method;
  BRIGADE_RETURN_IF_ERROR(read_string(j, "scoring_func", scoring));
  BRIGADE_RETURN_IF_ERROR(read_string(j, "topk_method", method));
  if (!scoring.empty() && scoring != "sigmoid") return refuse(c, "scoring_func '" + scoring + "' (supported: sigmoid)");
  if (!method.empty() && method != "noaux_tc") return refuse(c, "topk_method '" + method + "' (supported: noaux_tc)");
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_score_bias = true;
  c.moe_group_score = c.n_group > 1 ? MoeGroupScore::top2_sum : MoeGroupScore::none;
  return Status::ok();
}

// The sliding layers: layer_types, else the Hub's hybrid_layer_pattern (1 = sliding), else
// MiMoV2FlashConfig's rule (full attention on layer 0 and every 6th).
Status read_mimo_layer_types(const json& j, ModelConfig& c) {
  if (j.contains("layer_types") && !j["layer_types"].is_null()) return read_layer_types(j, c, 1);
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  auto it = j.find("hybrid_layer_pattern");
  if (it == j.end() || it->is_null()) {
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = l != 0 && (l + 1) % 6 != 0;
    return Status::ok();
  }
  if (!it->is_array() || it->size() != c.sliding_layers.size())
    return corrupt("config.json: hybrid_layer_pattern must list 0 (full) or 1 (sliding) per layer (" +
                   std::to_string(c.n_layers) + ")");
  for (size_t l = 0; l < it->size(); ++l) {
    const json& v = (*it)[l];
    if (v != 0 && v != 1) return corrupt("config.json: hybrid_layer_pattern[" + std::to_string(l) + "] must be 0 or 1");
    c.sliding_layers[l] = v == 1;
  }
  return Status::ok();
}

// RoPE by layer type: transformers 5's rope_parameters {"full_attention": ..., "sliding_attention":
// ...} (each default, with its theta and partial_rotary_factor), else the Hub's rope_theta,
// swa_rope_theta and partial_rotary_factor; MiMoV2FlashConfig's 5e6, 1e4 and 0.334 when absent.
Status read_mimo_rope(const json& j, ModelConfig& c) {
  c.rope_theta = 5e6f;
  c.rope_local_theta = 1e4f;
  float partial = 0.334f;
  auto rope = j.find("rope_parameters");
  if (rope != j.end() && rope->is_object() && rope->contains("full_attention")) {
    float partials[2] = {0.334f, 0.334f};
    int i = 0;
    for (const char* type : {"full_attention", "sliding_attention"}) {
      auto p = rope->find(type);
      if (p == rope->end() || !p->is_object())
        return corrupt(std::string("config.json: rope_parameters.") + type + " must be an object");
      std::string kind = "default";
      BRIGADE_RETURN_IF_ERROR(read_string(*p, "rope_type", kind));
      if (kind != "default") return refuse(c, std::string("rope_parameters.") + type + ".rope_type '" + kind + "' (supported: default)");
      BRIGADE_RETURN_IF_ERROR(read_float(*p, "rope_theta", i == 0 ? c.rope_theta : c.rope_local_theta));
      BRIGADE_RETURN_IF_ERROR(read_float(*p, "partial_rotary_factor", partials[i++]));
    }
    if (partials[0] != partials[1]) return refuse(c, "partial_rotary_factor differing by layer type");
    partial = partials[0];
  } else {
    if (c.rope_scaling.type != RopeScalingType::none) return refuse(c, "RoPE scaling (supported: default)");
    BRIGADE_RETURN_IF_ERROR(read_float(j, "rope_theta", c.rope_theta));
    BRIGADE_RETURN_IF_ERROR(read_float(j, "swa_rope_theta", c.rope_local_theta));
    BRIGADE_RETURN_IF_ERROR(read_float(j, "partial_rotary_factor", partial));
  }
  c.rope_scaling = RopeScaling{};
  if (!(partial > 0.0f && partial <= 1.0f))
    return invalid_argument("config.json: partial_rotary_factor must be in (0, 1] (got " + std::to_string(partial) + ")");
  c.rotary_dim = static_cast<int>(static_cast<float>(c.head_dim) * partial);  // int(head_dim * factor)
  if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
    return invalid_argument("config.json: int(head_dim * partial_rotary_factor) must be even and >= 2 (got " +
                            std::to_string(c.rotary_dim) + ")");
  if (!(c.rope_theta > 0.0f) || !(c.rope_local_theta > 0.0f))
    return invalid_argument("config.json: the rope thetas must be positive numbers");
  return Status::ok();
}

// The Hub's swa_* fields must match the full layers' (as llama.cpp's converter asserts).
Status check_swa_shape(const json& j, const ModelConfig& c, const char* key, int want) {
  int v = want;
  BRIGADE_RETURN_IF_ERROR(read_int(j, key, v, false));
  if (v != want) return refuse(c, std::string(key) + " = " + std::to_string(v) + " (the full layers' is " + std::to_string(want) + ")");
  return Status::ok();
}

Status read_mimo_attention(const json& j, ModelConfig& c) {
  if (!j.contains("head_dim")) c.head_dim = 192;  // MiMoV2FlashConfig's
  int v_head_dim = 128;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "v_head_dim", v_head_dim, false));
  if (v_head_dim < 1 || v_head_dim > c.head_dim)
    return refuse(c, "v_head_dim = " + std::to_string(v_head_dim) + " (supported: 1 to head_dim = " +
                         std::to_string(c.head_dim) + ")");
  BRIGADE_RETURN_IF_ERROR(check_swa_shape(j, c, "swa_head_dim", c.head_dim));
  BRIGADE_RETURN_IF_ERROR(check_swa_shape(j, c, "swa_v_head_dim", v_head_dim));
  BRIGADE_RETURN_IF_ERROR(check_swa_shape(j, c, "swa_num_attention_heads", c.n_heads));
  bool full_sinks = false, swa_sinks = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "add_full_attention_sink_bias", full_sinks));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "add_swa_attention_sink_bias", swa_sinks));
  if (full_sinks) return refuse(c, "add_full_attention_sink_bias = true (MiMoV2FlashAttention has sinks on sliding layers only)");
  if (!swa_sinks) return refuse(c, "add_swa_attention_sink_bias = false (MiMoV2FlashAttention always has them)");
  c.v_head_width = v_head_dim == c.head_dim ? 0 : v_head_dim;
  c.attn_value_scale = 0.707f;
  if (auto it = j.find("attention_value_scale"); it != j.end() && it->is_null()) c.attn_value_scale = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "attention_value_scale", c.attn_value_scale));
  if (!std::isfinite(c.attn_value_scale)) return invalid_argument("config.json: attention_value_scale must be a number");
  c.attn_sinks = c.sinks_sliding_only = true;
  BRIGADE_RETURN_IF_ERROR(read_mimo_layer_types(j, c));
  c.sliding_window = 129;  // MiMoV2FlashConfig's
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (int size = 0; j.contains("sliding_window_size") && !j["sliding_window_size"].is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window_size", size, true));
    c.sliding_window = size + 1;  // the tokens before the query, and the query
  }
  if (c.sliding_window < 1) return invalid_argument("config.json: sliding_window must be >= 1");
  // One KV head count for every layer: the sliding layers'; the full layers' repeat to it.
  const int full_kv = c.n_kv_heads;
  int swa_kv = 2 * full_kv;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "swa_num_key_value_heads", swa_kv, false));
  if (swa_kv < 1 || swa_kv % full_kv != 0)
    return refuse(c, "swa_num_key_value_heads = " + std::to_string(swa_kv) + " (supported: a multiple of "
                         "num_key_value_heads = " + std::to_string(full_kv) + ")");
  bool any_sliding = false, any_full = false;
  for (bool s : c.sliding_layers) (s ? any_sliding : any_full) = true;
  if (any_sliding) c.n_kv_heads = swa_kv;
  c.n_kv_heads_full = any_sliding && any_full && swa_kv != full_kv ? full_kv : 0;
  return read_mimo_rope(j, c);
}

Status read_mimo(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_silu(j, c));
  BRIGADE_RETURN_IF_ERROR(read_mimo_attention(j, c));
  if (auto it = j.find("n_shared_experts"); it != j.end() && !it->is_null() && *it != 0)
    return refuse(c, "n_shared_experts (MiMoV2FlashMoE has no shared experts)");
  BRIGADE_RETURN_IF_ERROR(read_routing(j, c, "n_routed_experts", 256, 8, 2048, 1.0f));
  return read_dense_mlp_layers(j, c, 1);
}

// ExaoneMoeConfig: EXAONE 4's attention and windows (sliding_window null: every layer full, all
// with RoPE), DeepSeek-V3's routing beside shared experts.
Status read_exaone_moe(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_silu(j, c));
  c.qk_norm = true;
  c.sliding_window = 4096;
  if (auto it = j.find("sliding_window"); it != j.end() && it->is_null()) {
    c.sliding_window = 0;
  } else {
    BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
    if (c.sliding_window <= 0) return invalid_argument("config.json: sliding_window must be > 0 or null");
    BRIGADE_RETURN_IF_ERROR(read_exaone_sliding_layers(j, c));
    nope_on_full_layers(c);  // "global NoPE"
  }
  c.n_shared_experts = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_shared_experts", c.n_shared_experts, false));
  if (c.n_shared_experts < 0) return invalid_argument("config.json: num_shared_experts must be >= 0");
  BRIGADE_RETURN_IF_ERROR(read_routing(j, c, "num_experts", 64, 8, 1024, 2.5f));
  int first_dense = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "first_k_dense_replace", first_dense, false));
  return read_dense_mlp_layers(j, c, first_dense);
}

}  // namespace

// Kolibri1Config (over Qwen3MoeConfig): EXAONE 4's attention and windows (513 by default; null is
// refused: transformers' Kolibri1Model always builds the sliding mask, and fails without one;
// layer_types absent: every fifth layer full, without RoPE) in
// GLM-4's four-norm layer, every layer sparse: num_experts experts (saved as num_local_experts)
// of moe_intermediate_size beside one ungated shared SwiGLU of shared_expert_intermediate_size,
// the top num_experts_per_tok of the router logits plus e_score_correction_bias, each weighted by
// its logit's sigmoid (renormalised with norm_topk_prob, false by default), no scaling factor.
Status read_kolibri1(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_silu(j, c));
  c.qk_norm = true;
  c.sandwich_norms = true;
  BRIGADE_RETURN_IF_ERROR(read_required_window(j, c, 513));
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 5));
  nope_on_full_layers(c);  // "global NoPE"
  BRIGADE_RETURN_IF_ERROR(read_experts_beside_shared(j, c, 384, 6, 512, 512));
  c.norm_topk_prob = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  c.n_group = c.topk_group = 1;
  c.routed_scaling_factor = 1.0f;
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_score_bias = c.moe_select_on_logits = true;
  c.moe_group_score = MoeGroupScore::none;
  return Status::ok();
}

Status read_mimo_exaone(const json& j, ModelConfig& c) {
  if (c.arch == "mimo_v2_flash") return read_mimo(j, c);
  if (c.arch == "kolibri1") return read_kolibri1(j, c);
  return read_exaone_moe(j, c);
}

int stored_kv_heads(const ModelConfig& c, int l) {
  return c.n_kv_heads_full > 0 && c.layer_window(l) == 0 ? c.n_kv_heads_full : c.n_kv_heads;
}

}  // namespace brigade
