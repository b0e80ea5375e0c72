#include "models/gemma4_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/config_json.h"
#include "models/gemma3n_config.h"
#include "models/gemma4_vision.h"

namespace brigade {

using json = nlohmann::json;

namespace {

bool is_multimodal(const json& j) {
  const std::string a = config_architecture(j);
  return a == "Gemma4ForConditionalGeneration" || (a.empty() && config_model_type(j) == "gemma4");
}

// Gemma4TextConfig's defaults (transformers 5.25) under the fields config.json gives.
json with_text_defaults(const json& t) {
  json d = {{"vocab_size", 262144},        {"hidden_size", 2304},
            {"intermediate_size", 9216},   {"num_hidden_layers", 30},
            {"num_attention_heads", 8},    {"num_key_value_heads", 4},
            {"head_dim", 256},             {"max_position_embeddings", 131072},
            {"rms_norm_eps", 1e-6},        {"pad_token_id", 0},
            {"eos_token_id", 1},           {"bos_token_id", 2},
            {"sliding_window", 512},       {"hidden_activation", "gelu_pytorch_tanh"},
            {"tie_word_embeddings", true}, {"vocab_size_per_layer_input", 262144},
            {"hidden_size_per_layer_input", 256}, {"num_kv_shared_layers", 0},
            {"global_head_dim", 512}};
  for (auto& [key, value] : t.items())
    if (!value.is_null() || !d.contains(key)) d[key] = value;
  return d;
}

// Gemma4TextConfig's default layer_types: every sixth layer full (5:1); the last layer is full
// whatever config.json says (transformers forces it, with a warning).
Status read_gemma4_layer_types(const json& t, int n_layers, std::vector<bool>& sliding) {
  sliding.assign(static_cast<size_t>(n_layers), false);
  auto it = t.find("layer_types");
  if (it == t.end() || it->is_null()) {
    for (int l = 0; l < n_layers; ++l) sliding[static_cast<size_t>(l)] = (l + 1) % 6 != 0;
  } else {
    if (!it->is_array() || it->size() != static_cast<size_t>(n_layers))
      return invalid_argument("config.json: layer_types must list one type per layer (num_hidden_layers = " +
                              std::to_string(n_layers) + ")");
    for (size_t l = 0; l < it->size(); ++l) {
      const json& e = (*it)[l];
      const std::string name = e.is_string() ? e.get<std::string>() : std::string();
      if (name == "sliding_attention") sliding[l] = true;
      else if (name != "full_attention")
        return unsupported("config.json: layer_types[" + std::to_string(l) + "] = " + e.dump() +
                           " is not supported for gemma4; supported: sliding_attention, full_attention");
    }
  }
  sliding.back() = false;
  return Status::ok();
}

// The two layer types' RoPE (rope_parameters by layer type; Gemma4TextConfig's default when
// absent): "default" on the sliding layers; "default" or "proportional" on the full ones.
Status read_rope(const json& t, ModelConfig& c) {
  c.rope_local_theta = 10000.0f;
  c.rope_theta = 1000000.0f;
  c.gemma4.full_rope_partial = 0.25f;
  auto it = t.find("rope_parameters");
  if (it == t.end() || it->is_null()) return Status::ok();
  if (!it->is_object() || !it->contains("full_attention") || !it->contains("sliding_attention"))
    return unsupported("config.json: rope_parameters must hold a full_attention and a sliding_attention object for "
                       "gemma4");
  for (const char* type : {"full_attention", "sliding_attention"}) {
    const json& p = (*it)[type];
    const std::string where = std::string("config.json: rope_parameters.") + type;
    if (!p.is_object()) return corrupt(where + " must be an object");
    const bool full = std::string(type) == "full_attention";
    std::string rope_type = "default";
    BRIGADE_RETURN_IF_ERROR(read_string(p, "rope_type", rope_type));
    if (rope_type != "default" && !(full && rope_type == "proportional"))
      return unsupported(where + ": rope_type '" + rope_type + "' is not supported for gemma4; supported: default" +
                         (full ? ", proportional" : ""));
    for (auto& [key, value] : p.items())
      if (key != "rope_type" && key != "rope_theta" && key != "partial_rotary_factor" && key != "factor")
        return unsupported(where + ": " + key + " is not supported for gemma4; supported: rope_type, rope_theta" +
                           (full ? ", partial_rotary_factor, factor" : ""));
    BRIGADE_RETURN_IF_ERROR(read_float(p, "rope_theta", full ? c.rope_theta : c.rope_local_theta));
    if (!full && (p.contains("partial_rotary_factor") || p.contains("factor")))
      return unsupported(where + ": partial_rotary_factor and factor are not supported on the sliding layers");
    if (!full) continue;
    float partial = 1.0f, factor = 1.0f;
    if (rope_type == "proportional") {
      BRIGADE_RETURN_IF_ERROR(read_float(p, "partial_rotary_factor", partial));
      BRIGADE_RETURN_IF_ERROR(read_float(p, "factor", factor));
    } else if (p.contains("partial_rotary_factor") || p.contains("factor")) {
      return unsupported(where + ": partial_rotary_factor and factor go with rope_type proportional");
    }
    if (!(partial > 0.0f && partial <= 1.0f) || !(factor > 0.0f) || !std::isfinite(factor))
      return invalid_argument(where + ": partial_rotary_factor must be in (0, 1] and factor > 0");
    c.gemma4.full_rope_partial = partial;
    c.gemma4.full_rope_factor = factor;
  }
  return Status::ok();
}

// The full layers' geometry: global_head_dim and (with attention_k_eq_v) num_global_key_value_heads
// as Gemma4TextConfig.__post_init__ derives per_layer_config, or the per_layer_config that
// save_pretrained writes (layer index -> head_dim / num_key_value_heads overrides), which must
// give every layer of a type the same shape.
Status read_geometry(const json& t, ModelConfig& c) {
  auto& g = c.gemma4;
  auto it = t.find("per_layer_config");
  if (it == t.end() || it->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_int(t, "global_head_dim", g.full_head_dim, true));
    g.full_kv_heads = c.n_kv_heads;
    if (g.k_eq_v) BRIGADE_RETURN_IF_ERROR(read_int(t, "num_global_key_value_heads", g.full_kv_heads, false));
    return Status::ok();
  }
  if (!it->is_object()) return corrupt("config.json: per_layer_config must be an object");
  int full_hd = -1, full_kv = -1;
  for (int l = 0; l < c.n_layers; ++l) {
    int hd = c.head_dim, kv = c.n_kv_heads;
    if (auto o = it->find(std::to_string(l)); o != it->end()) {
      if (!o->is_object()) return corrupt("config.json: per_layer_config." + std::to_string(l) + " must be an object");
      for (auto& [key, value] : o->items())
        if (key != "head_dim" && key != "num_key_value_heads")
          return unsupported("config.json: per_layer_config." + std::to_string(l) + "." + key +
                             " is not supported for gemma4; supported: head_dim, num_key_value_heads");
      BRIGADE_RETURN_IF_ERROR(read_int(*o, "head_dim", hd, false));
      BRIGADE_RETURN_IF_ERROR(read_int(*o, "num_key_value_heads", kv, false));
    }
    const bool sliding = c.sliding_layers[static_cast<size_t>(l)];
    if (sliding && (hd != c.head_dim || kv != c.n_kv_heads))
      return unsupported("config.json: per_layer_config." + std::to_string(l) + " gives a sliding_attention layer its "
                         "own shape; gemma4 supports one shape per layer type (head_dim, num_key_value_heads)");
    if (sliding) continue;
    if (full_hd >= 0 && (hd != full_hd || kv != full_kv))
      return unsupported("config.json: per_layer_config gives full_attention layers different shapes; gemma4 "
                         "supports one shape per layer type");
    full_hd = hd, full_kv = kv;
  }
  g.full_head_dim = full_hd;
  g.full_kv_heads = full_kv;
  return Status::ok();
}

Status check_positive(const char* key, int v) {
  if (v <= 0) return invalid_argument(std::string("config.json: ") + key + " must be > 0 (got " + std::to_string(v) + ")");
  return Status::ok();
}

// What Gemma 4 has that this decoder does not build, by field.
Status refuse_unbuilt(const json& t) {
  std::string act;
  BRIGADE_RETURN_IF_ERROR(read_string(t, "hidden_activation", act));
  if (act != "gelu_pytorch_tanh")
    return unsupported("config.json: hidden_activation '" + act + "' is not supported for gemma4; supported: "
                       "gelu_pytorch_tanh");
  bool bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(t, "attention_bias", bias));
  if (bias) return unsupported("config.json: attention_bias = true is not supported for gemma4; set it to false");
  // "vision" changes only the mask of a prompt with images (Gemma4Model: the sliding layers' image
  // rows see their whole image), which the vision tower's path builds (VisionConfig::bidirectional).
  if (auto b = t.find("use_bidirectional_attention"); b != t.end() && !b->is_null() && *b != "vision")
    return unsupported("config.json: use_bidirectional_attention = " + b->dump() + " is not supported for gemma4 "
                       "(brigade's attention is causal but within images); supported: null, \"vision\"");
  return Status::ok();
}

// The MoE block's fields (enable_moe_block): every layer runs its experts beside the dense MLP.
Status read_moe(const json& t, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_bool(t, "enable_moe_block", c.gemma4.moe));
  if (!c.gemma4.moe) return Status::ok();
  BRIGADE_RETURN_IF_ERROR(read_int(t, "num_experts", c.n_experts, true));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "top_k_experts", c.n_experts_per_tok, true));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "moe_intermediate_size", c.moe_intermediate_size, true));
  BRIGADE_RETURN_IF_ERROR(check_positive("moe_intermediate_size", c.moe_intermediate_size));
  if (c.n_experts < 1 || c.n_experts_per_tok < 1 || c.n_experts_per_tok > c.n_experts)
    return invalid_argument("config.json: gemma4's MoE block needs num_experts >= 1 and top_k_experts in [1, "
                            "num_experts] (got " + std::to_string(c.n_experts) + " and " +
                            std::to_string(c.n_experts_per_tok) + ")");
  c.norm_topk_prob = true;  // Gemma4TextRouter renormalises the top-k
  return Status::ok();
}

// The Gemma 4 fields of a text config (defaults filled) into c.gemma4.
Status read_gemma4_fields(const json& t, ModelConfig& c) {
  auto& g = c.gemma4;
  BRIGADE_RETURN_IF_ERROR(read_bool(t, "attention_k_eq_v", g.k_eq_v));
  BRIGADE_RETURN_IF_ERROR(read_geometry(t, c));
  BRIGADE_RETURN_IF_ERROR(check_positive("global_head_dim", g.full_head_dim));
  BRIGADE_RETURN_IF_ERROR(check_positive("num_global_key_value_heads", g.full_kv_heads));
  if (c.n_heads % g.full_kv_heads != 0)
    return invalid_argument("config.json: num_attention_heads (" + std::to_string(c.n_heads) +
                            ") must be a multiple of the full layers' KV heads (" + std::to_string(g.full_kv_heads) + ")");
  if (g.full_head_dim % 2 != 0) return invalid_argument("config.json: global_head_dim must be even");
  BRIGADE_RETURN_IF_ERROR(read_rope(t, c));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "hidden_size_per_layer_input", g.per_layer_dim, true));
  if (g.per_layer_dim < 0) return invalid_argument("config.json: hidden_size_per_layer_input must be >= 0");
  if (g.per_layer_dim > 0) {
    BRIGADE_RETURN_IF_ERROR(read_int(t, "vocab_size_per_layer_input", g.per_layer_vocab, true));
    BRIGADE_RETURN_IF_ERROR(check_positive("vocab_size_per_layer_input", g.per_layer_vocab));
  }
  int n_shared = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(t, "num_kv_shared_layers", n_shared, true));
  BRIGADE_ASSIGN_OR_RETURN(g.kv_layer, shared_kv_layers(c, n_shared));
  bool double_wide = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(t, "use_double_wide_mlp", double_wide));
  g.intermediate.assign(static_cast<size_t>(c.n_layers), c.intermediate_size);
  for (int l = 0; l < c.n_layers; ++l)
    if (double_wide && g.shares_kv(l)) g.intermediate[static_cast<size_t>(l)] *= 2;
  c.intermediate_size = *std::max_element(g.intermediate.begin(), g.intermediate.end());
  return read_moe(t, c);
}

}  // namespace

bool is_gemma4(const json& j) {
  const std::string a = config_architecture(j);
  if (a == "Gemma4ForCausalLM" || a == "Gemma4ForConditionalGeneration") return true;
  const std::string m = config_model_type(j);
  return a.empty() && (m == "gemma4_text" || m == "gemma4");
}

Expected<ModelConfig> read_gemma4_config(const json& j) {
  const bool multimodal = is_multimodal(j);
  json text = j;
  if (multimodal) {
    BRIGADE_ASSIGN_OR_RETURN(text, text_config_with_ids(j, "Gemma4ForConditionalGeneration",
                                                        "Gemma4ForCausalLM (model_type gemma4_text)"));
  }
  const json t = with_text_defaults(text);
  BRIGADE_RETURN_IF_ERROR(refuse_unbuilt(t));
  int n_layers = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(t, "num_hidden_layers", n_layers, true));
  BRIGADE_RETURN_IF_ERROR(check_positive("num_hidden_layers", n_layers));
  std::vector<bool> sliding;
  BRIGADE_RETURN_IF_ERROR(read_gemma4_layer_types(t, n_layers, sliding));
  // The Gemma 3 fields through Gemma 3's reader (the sliding layers' geometry), then what Gemma 4
  // does differently.
  json g3 = t;
  g3["architectures"] = json::array({"Gemma3ForCausalLM"});
  g3["model_type"] = "gemma3_text";
  json types = json::array();
  for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
  g3["layer_types"] = types;
  for (const char* key : {"query_pre_attn_scalar", "rope_parameters", "rope_scaling", "per_layer_config", "num_experts",
                          "top_k_experts", "moe_intermediate_size", "enable_moe_block", "attn_logit_softcapping",
                          "use_bidirectional_attention"})
    g3.erase(key);
  BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(g3.dump()));
  c.arch = "gemma4_text";
  c.norm_offset = 0.0f;  // Gemma4RMSNorm scales by w
  c.attn_scale = 1.0f;   // Gemma4TextAttention's scaling
  c.attn_softcap = 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_gemma4_fields(t, c));
  if (multimodal) {
    c.multimodal_text = true;
    BRIGADE_ASSIGN_OR_RETURN(c.vision, read_gemma4_vision(j, c.vocab_size));
    if (c.vision.present()) {
      c.vision.out_hidden_size = c.hidden_size;
      c.vision.bidirectional = t.value("use_bidirectional_attention", json()) == "vision";
    } else {
      c.vision_off = "the checkpoint has no vision_config (Gemma 4's language model alone); it serves text";
    }
    // Gemma4Config's placeholder ids (its defaults), which the towers' features replace.
    int image = 258880, video = 258884, audio = 258881;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_id", image, false));
    BRIGADE_RETURN_IF_ERROR(read_int(j, "video_token_id", video, false));
    BRIGADE_RETURN_IF_ERROR(read_int(j, "audio_token_id", audio, false));
    c.gemma4.tower_tokens = {image, video, audio};
    BRIGADE_RETURN_IF_ERROR(read_int(t, "pad_token_id", c.gemma4.pad_token, false));
    if (c.gemma4.pad_token < 0 || c.gemma4.pad_token >= c.vocab_size)
      return invalid_argument("config.json: text_config.pad_token_id " + std::to_string(c.gemma4.pad_token) +
                              " is outside the vocabulary (Gemma 4 embeds it at image placeholders)");
  }
  return c;
}

}  // namespace brigade
