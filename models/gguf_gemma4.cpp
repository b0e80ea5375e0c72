#include "models/gguf_gemma4.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/gemma3n_config.h"
#include "models/gguf_keys.h"
#include "models/gguf_moe.h"

namespace brigade {
namespace {

constexpr const char* kPrefix = "gemma4.";

// A per-layer key (one value, or one per layer) into out[n_layers], each in [lo, INT32_MAX];
// `fallback` when absent (< 0: required).
Status read_per_layer(const GgufFile& g, const std::string& key, int n_layers, int64_t lo, int64_t fallback,
                      std::vector<int>& out) {
  const GgufValue* v = g.find(key);
  if (v == nullptr && fallback < 0) return corrupt(g.path() + ": metadata '" + key + "' is missing");
  std::vector<double> values;
  if (v == nullptr) values.assign(static_cast<size_t>(n_layers), static_cast<double>(fallback));
  else if (v->type == GgufType::array) values = v->numbers;
  else {
    BRIGADE_ASSIGN_OR_RETURN(int64_t n, g.get_int(key));
    values.assign(static_cast<size_t>(n_layers), static_cast<double>(n));
  }
  if (values.size() != static_cast<size_t>(n_layers))
    return corrupt(g.path() + ": metadata '" + key + "' must hold one value or one per block (" +
                   std::to_string(n_layers) + ")");
  out.clear();
  for (double n : values) {
    if (!(n >= static_cast<double>(lo)) || n > INT32_MAX || n != std::floor(n))
      return corrupt(g.path() + ": metadata '" + key + "' holds a value that is not a whole number >= " +
                     std::to_string(lo));
    out.push_back(static_cast<int>(n));
  }
  return Status::ok();
}

// The one value `per_layer` holds for the layers of a type (sliding or full); unsupported naming
// the key when they differ, as the decoder has one shape per layer type.
Status one_per_type(const GgufFile& g, const std::string& key, const std::vector<int>& per_layer,
                    const ModelConfig& c, bool sliding, int& out) {
  out = -1;
  for (size_t l = 0; l < per_layer.size(); ++l) {
    if (c.sliding_layers[l] != sliding) continue;
    if (out >= 0 && per_layer[l] != out)
      return unsupported(g.path() + ": metadata '" + key + "' gives " + (sliding ? "sliding" : "full") +
                         " layers different values; gemma4 supports one shape per layer type");
    out = per_layer[l];
  }
  return Status::ok();
}

// An int key that must equal `want` (its counterpart), unsupported naming both otherwise.
Status check_equal(const GgufFile& g, const std::string& key, const std::string& other, int want) {
  BRIGADE_ASSIGN_OR_RETURN(int64_t v, g.get_int_or(key, want));
  if (v != want)
    return unsupported(g.path() + ": metadata '" + key + "' (" + std::to_string(v) + ") differs from '" + other +
                       "' (" + std::to_string(want) + "); gemma4 runs value heads as wide as key heads (llama.cpp "
                       "requires it too)");
  return Status::ok();
}

// The tensors llama.cpp's gemma4 may load that this reader does not map: refused by name.
Status refuse_unmapped_layouts(const GgufFile& g) {
  for (const auto& t : g.tensors()) {
    for (const char* suffix : {".attn_qkv.weight", ".ffn_gate_exps.weight", ".ffn_up_exps.weight"})
      if (t.name.ends_with(suffix))
        return unsupported(g.path() + ": tensor '" + t.name + "' is not supported for gemma4; brigade reads the "
                           "converter's layout (attn_q / attn_k / attn_v apart, experts as ffn_gate_up_exps)");
  }
  return Status::ok();
}

// attention_k_eq_v from the attn_v tensors (llama.cpp takes V from attn_k where a layer has
// none): none in every full layer that writes K/V, present in every sliding one.
Status read_k_eq_v(const GgufFile& g, ModelConfig& c) {
  int full_with_v = 0, full_without_v = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.gemma4.shares_kv(l)) continue;
    const std::string v = "blk." + std::to_string(l) + ".attn_v.weight";
    const bool has = g.has_tensor(v);
    if (c.sliding_layers[static_cast<size_t>(l)]) {
      if (!has)
        return unsupported(g.path() + ": tensor '" + v + "' is missing: a sliding layer taking V from attn_k is not "
                           "supported for gemma4 (attention_k_eq_v is the full layers')");
    } else {
      (has ? full_with_v : full_without_v) += 1;
    }
  }
  if (full_with_v > 0 && full_without_v > 0)
    return unsupported(g.path() + ": some full layers have attn_v and some not; gemma4 supports attention_k_eq_v on "
                       "all full layers or none");
  c.gemma4.k_eq_v = full_without_v > 0;
  return Status::ok();
}

}  // namespace

bool is_gguf_gemma4(const std::string& gguf_arch) { return gguf_arch == "gemma4"; }

std::string gguf_gemma4_name(const std::string& n) {
  if (n == "per_layer_token_embd.weight") return "model.embed_tokens_per_layer.weight";
  if (n == "per_layer_model_proj.weight") return "model.per_layer_model_projection.weight";
  if (n == "per_layer_proj_norm.weight") return "model.per_layer_projection_norm.weight";
  if (!n.starts_with("blk.")) return "";
  const size_t dot = n.find('.', 4);
  if (dot == std::string::npos || dot == 4 || n.find_first_not_of("0123456789", 4) != dot) return "";
  static const std::map<std::string, std::string> kLayer = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"layer_output_scale.weight", "layer_scalar"},
      {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
      {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
      {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
      {"ffn_gate_inp.weight", "router.proj.weight"},
      {"ffn_gate_inp.scale", "router.scale"},
      {"ffn_down_exps.scale", "router.per_expert_scale"},
      {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
      {"ffn_down_exps.weight", "experts.down_proj"},
      {"inp_gate.weight", "per_layer_input_gate.weight"},
      {"proj.weight", "per_layer_projection.weight"},
      {"post_norm.weight", "post_per_layer_input_norm.weight"}};
  auto it = kLayer.find(n.substr(dot + 1));
  return it == kLayer.end() ? "" : "model.layers." + n.substr(4, dot - 4) + "." + it->second;
}

Status read_gguf_gemma4(const GgufFile& g, ModelConfig& c) {
  const std::string a = kPrefix;
  c.arch = "gemma4_text";
  BRIGADE_RETURN_IF_ERROR(refuse_unmapped_layouts(g));
  // The Gemma 3 fields gemma4_config.cpp sets, as llama.cpp's graph fixes them.
  c.rope_style = RopeStyle::neox;
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.norm_offset = 0.0f;
  c.sandwich_norms = true;
  c.qk_norm = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.attn_scale = 1.0f;
  c.attn_softcap = 0.0f;
  BRIGADE_ASSIGN_OR_RETURN(double cap, g.get_number_or(a + "final_logit_softcapping", 0.0));
  if (!std::isfinite(cap) || cap < 0.0)
    return corrupt(g.path() + ": metadata '" + a + "final_logit_softcapping' must be a number >= 0");
  c.final_softcap = static_cast<float>(cap);
  // Which layers slide (required, as llama.cpp's get_arr), and the window.
  if (!g.find(a + "attention.sliding_window_pattern"))
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window_pattern' is missing");
  BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, 6, c));
  if (c.sliding_layers.size() != static_cast<size_t>(c.n_layers))
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window_pattern' must give every block a type");
  BRIGADE_ASSIGN_OR_RETURN(int64_t window, g.get_int(a + "attention.sliding_window"));
  if (window <= 0 || window > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window' is out of range");
  c.sliding_window = static_cast<int>(window);
  // The two geometries: key_length and the full layers' KV heads, key_length_swa and the sliding ones'.
  auto& g4 = c.gemma4;
  g4.full_head_dim = c.head_dim;  // attention.key_length (the common reader's)
  BRIGADE_RETURN_IF_ERROR(check_equal(g, a + "attention.value_length", a + "attention.key_length", g4.full_head_dim));
  int swa_hd = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.key_length_swa", g4.full_head_dim, swa_hd));
  BRIGADE_RETURN_IF_ERROR(check_equal(g, a + "attention.value_length_swa", a + "attention.key_length_swa", swa_hd));
  if (swa_hd % 2 != 0 || g4.full_head_dim % 2 != 0)
    return corrupt(g.path() + ": metadata '" + a + "attention.key_length' / 'key_length_swa' must be even");
  c.head_dim = swa_hd;
  std::vector<int> kv;
  BRIGADE_RETURN_IF_ERROR(read_per_layer(g, a + "attention.head_count_kv", c.n_layers, 1, c.n_heads, kv));
  int swa_kv = -1, full_kv = -1;
  BRIGADE_RETURN_IF_ERROR(one_per_type(g, a + "attention.head_count_kv", kv, c, true, swa_kv));
  BRIGADE_RETURN_IF_ERROR(one_per_type(g, a + "attention.head_count_kv", kv, c, false, full_kv));
  c.n_kv_heads = swa_kv > 0 ? swa_kv : full_kv;
  g4.full_kv_heads = full_kv > 0 ? full_kv : swa_kv;
  for (int h : {c.n_kv_heads, g4.full_kv_heads})
    if (c.n_heads % h != 0)
      return corrupt(g.path() + ": metadata '" + a + "attention.head_count' (" + std::to_string(c.n_heads) +
                     ") is not a multiple of head_count_kv " + std::to_string(h));
  // RoPE: the sliding layers' whole heads at freq_base_swa (llama.cpp: freq_base when absent);
  // the full layers' at freq_base, rope_freqs.weight giving the pairs rotated (read with the tensors).
  BRIGADE_ASSIGN_OR_RETURN(int64_t n_rot_swa, g.get_int_or(a + "rope.dimension_count_swa", swa_hd));
  if (n_rot_swa != swa_hd)
    return unsupported(g.path() + ": metadata '" + a + "rope.dimension_count_swa' (" + std::to_string(n_rot_swa) +
                       ") differs from key_length_swa (" + std::to_string(swa_hd) + "); gemma4's sliding layers "
                       "rotate whole heads here");
  BRIGADE_ASSIGN_OR_RETURN(double local, g.get_number_or(a + "rope.freq_base_swa", c.rope_theta));
  if (!(local > 0.0) || !std::isfinite(local))
    return corrupt(g.path() + ": metadata '" + a + "rope.freq_base_swa' must be a positive number");
  c.rope_local_theta = static_cast<float>(local);
  g4.full_rope_partial = 0.0f;  // set from rope_freqs.weight (finish_gguf_gemma4 requires it)
  g4.full_rope_factor = 1.0f;
  // K/V sharing, the per-layer MLP widths, per-layer inputs.
  BRIGADE_ASSIGN_OR_RETURN(int64_t shared, g.get_int_or(a + "attention.shared_kv_layers", 0));
  if (shared < 0 || shared >= c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "attention.shared_kv_layers' must be in [0, block_count)");
  BRIGADE_ASSIGN_OR_RETURN(g4.kv_layer, shared_kv_layers(c, static_cast<int>(shared)));
  BRIGADE_RETURN_IF_ERROR(read_per_layer(g, a + "feed_forward_length", c.n_layers, 1, -1, g4.intermediate));
  c.intermediate_size = *std::max_element(g4.intermediate.begin(), g4.intermediate.end());
  BRIGADE_ASSIGN_OR_RETURN(int64_t per_layer, g.get_int_or(a + "embedding_length_per_layer_input", 0));
  if (per_layer < 0 || per_layer > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "embedding_length_per_layer_input' is out of range");
  g4.per_layer_dim = static_cast<int>(per_layer);
  BRIGADE_RETURN_IF_ERROR(read_k_eq_v(g, c));
  // The MoE block beside the dense MLP (expert_count > 0).
  BRIGADE_ASSIGN_OR_RETURN(g4.moe, gguf_has_experts(g, "gemma4"));
  if (g4.moe) {
    BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
    std::vector<int> widths;
    BRIGADE_RETURN_IF_ERROR(read_per_layer(g, a + "expert_feed_forward_length", c.n_layers, 1, -1, widths));
    if (std::any_of(widths.begin(), widths.end(), [&](int w) { return w != widths[0]; }))
      return unsupported(g.path() + ": metadata '" + a + "expert_feed_forward_length' differs per block; gemma4's "
                         "experts are one width in every layer");
    c.moe_intermediate_size = widths[0];
    c.norm_topk_prob = true;  // Gemma4TextRouter renormalises the top-k (llama.cpp's gemma4 graph too)
  }
  return Status::ok();
}

Status read_gguf_gemma4_rope_freqs(const GgufFile& g, const RawTensor& t, ModelConfig& c) {
  const int64_t half = c.gemma4.full_head_dim / 2;
  if (t.shape.size() != 1 || t.shape[0] != half)
    return corrupt(g.path() + ": tensor 'rope_freqs.weight' has shape " + t.shape_string() + "; expected [" +
                   std::to_string(half) + "] (the full layers' key_length / 2)");
  std::vector<float> f(static_cast<size_t>(half));
  t.dequantize(0, half, f.data());
  // The converter's proportional RoPE: one factor over the rotated pairs, then 1e30 (frequency 0).
  constexpr float kUnrotated = 1e29f;
  const float first = f[0];
  int64_t rotated = 0;
  while (rotated < half && f[static_cast<size_t>(rotated)] == first && first < kUnrotated) ++rotated;
  const bool rest_off = std::all_of(f.begin() + rotated, f.end(), [&](float x) { return x >= kUnrotated; });
  if (!(first > 0.0f) || !std::isfinite(first) || rotated == 0 || !rest_off)
    return unsupported(g.path() + ": tensor 'rope_freqs.weight' is not one factor over the first pairs then 1e30 "
                       "(llama.cpp's converter's proportional RoPE); gemma4 supports that form only");
  float partial = static_cast<float>(rotated) / static_cast<float>(half);
  // (the decoder rotates static_cast<size_t>(partial * head_dim / 2) pairs)
  while (static_cast<int64_t>(partial * static_cast<float>(half)) < rotated) partial = std::nextafter(partial, 2.0f);
  c.gemma4.full_rope_partial = partial;
  c.gemma4.full_rope_factor = first;
  return Status::ok();
}

Status finish_gguf_gemma4(const GgufFile& g, const std::map<std::string, RawTensor>& tensors, ModelConfig& c) {
  if (!(c.gemma4.full_rope_partial > 0.0f))
    return corrupt(g.path() + ": tensor 'rope_freqs.weight' is missing (the full layers' RoPE; llama.cpp requires "
                   "it for gemma4)");
  if (c.gemma4.per_layer_dim > 0) {
    auto it = tensors.find("model.embed_tokens_per_layer.weight");
    if (it == tensors.end() || it->second.shape.size() != 2)
      return corrupt(g.path() + ": tensor 'per_layer_token_embd.weight' (2-D) is missing");
    c.gemma4.per_layer_vocab = static_cast<int>(it->second.shape[0]);
  }
  return Status::ok();
}

}  // namespace brigade
