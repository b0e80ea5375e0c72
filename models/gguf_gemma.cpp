#include "models/gguf_gemma.h"

#include "models/gguf_keys.h"

#include <cmath>

namespace brigade {
namespace {

// A float key, `fallback` when absent; corrupt unless finite and >= 0.
Status read_nonnegative(const GgufFile& g, const std::string& key, float fallback, float& out) {
  BRIGADE_ASSIGN_OR_RETURN(double v, g.get_number_or(key, fallback));
  if (!std::isfinite(v) || v < 0.0) return corrupt(g.path() + ": metadata '" + key + "' must be a number >= 0");
  out = static_cast<float>(v);
  return Status::ok();
}

}  // namespace

bool is_gguf_gemma(const std::string& gguf_arch) { return gguf_arch == "gemma2" || gguf_arch == "gemma3"; }

std::string gguf_gemma_layer_name(const std::string& suffix) {
  if (suffix == "post_attention_norm.weight") return "post_attention_layernorm.weight";
  if (suffix == "ffn_norm.weight") return "pre_feedforward_layernorm.weight";
  if (suffix == "post_ffw_norm.weight") return "post_feedforward_layernorm.weight";
  return "";
}

Status read_gguf_gemma(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  const bool gemma2 = gguf_arch == "gemma2";
  c.arch = gemma2 ? "gemma2" : "gemma3_text";
  if (const GgufValue* v = g.find(a + "attention.value_length"); v && v->integer != c.head_dim)
    return unsupported(g.path() + ": " + a + "attention.value_length " + std::to_string(v->integer) +
                       " differs from key_length " + std::to_string(c.head_dim) + "; brigade runs equal q/k and v heads");
  c.rope_style = RopeStyle::neox;
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.norm_offset = 0.0f;  // the converter stored 1 + w
  c.sandwich_norms = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.qk_norm = !gemma2;
  const bool is_27b = c.n_layers == (gemma2 ? 46 : 62);
  const double scalar = is_27b ? static_cast<double>(c.hidden_size / c.n_heads) : static_cast<double>(c.head_dim);
  c.attn_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  BRIGADE_RETURN_IF_ERROR(read_nonnegative(g, a + "attn_logit_softcapping", gemma2 ? 50.0f : 0.0f, c.attn_softcap));
  BRIGADE_RETURN_IF_ERROR(read_nonnegative(g, a + "final_logit_softcapping", gemma2 ? 30.0f : 0.0f, c.final_softcap));
  BRIGADE_ASSIGN_OR_RETURN(int64_t window, g.get_int_or(a + "attention.sliding_window", gemma2 ? 4096 : 0));
  if (window < 0 || window > INT32_MAX) return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window' is out of range");
  c.sliding_window = static_cast<int>(window);
  c.rope_local_theta = 0.0f;
  if (c.sliding_window == 0) {  // gemma3 without a window: every layer global, as llama.cpp's LLAMA_SWA_TYPE_NONE
    c.sliding_layers.clear();
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, gemma2 ? 2 : 6, c));
  if (!gemma2) {
    BRIGADE_ASSIGN_OR_RETURN(double local, g.get_number_or(a + "rope.freq_base_swa", 10000.0));
    if (!(local > 0.0) || !std::isfinite(local))
      return corrupt(g.path() + ": metadata '" + a + "rope.freq_base_swa' must be a positive number");
    c.rope_local_theta = static_cast<float>(local);
  }
  return Status::ok();
}

}  // namespace brigade
