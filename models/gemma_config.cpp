#include "models/gemma_config.h"

#include <cmath>

#include "models/config_json.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// A softcapping field: null or absent = none (0); else a positive number.
Status read_softcap(const json& j, const char* key, float& out) {
  BRIGADE_RETURN_IF_ERROR(read_float(j, key, out));
  if (!(out >= 0.0f) || !std::isfinite(out))
    return invalid_argument(std::string("config.json: ") + key + " must be a positive number or null");
  return Status::ok();
}

// Gemma 3's two RoPEs: the global layers' rope_theta and rope_scaling (read by parse_hf_config
// from the flat fields), the local layers' rope_local_base_freq unscaled, or as transformers 5's
// rope_parameters by layer type say.
Status read_gemma3_rope(const json& j, ModelConfig& c) {
  if (!j.contains("rope_theta")) c.rope_theta = 1000000.0f;  // Gemma3TextConfig's default
  c.rope_local_theta = 10000.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "rope_local_base_freq", c.rope_local_theta));
  return read_rope_by_layer_type(j, c);
}

}  // namespace

Status read_layer_types(const json& j, ModelConfig& c, int default_pattern) {
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) {
    int pattern = default_pattern;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window_pattern", pattern, false));
    if (pattern < 1) return invalid_argument("config.json: sliding_window_pattern must be >= 1");
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = (l + 1) % pattern != 0;
    return Status::ok();
  }
  if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
    return invalid_argument("config.json: layer_types must list one type per layer (num_hidden_layers = " +
                            std::to_string(c.n_layers) + ")");
  for (size_t l = 0; l < it->size(); ++l) {
    const json& t = (*it)[l];
    const std::string name = t.is_string() ? t.get<std::string>() : std::string();
    if (name == "sliding_attention") c.sliding_layers[l] = true;
    else if (name != "full_attention")
      return unsupported("config.json: layer_types[" + std::to_string(l) + "] = " + t.dump() +
                         " is not supported; supported: sliding_attention, full_attention");
  }
  return Status::ok();
}

Status read_window_or_null(const json& j, ModelConfig& c, int fallback) {
  c.sliding_window = fallback;
  if (auto it = j.find("sliding_window"); it != j.end() && it->is_null()) c.sliding_window = 0;
  else BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (c.sliding_window < 0) return invalid_argument("config.json: sliding_window must be >= 0 or null");
  return Status::ok();
}

Status read_rope_by_layer_type(const json& j, ModelConfig& c) {
  auto it = j.find("rope_parameters");
  if (it == j.end() || !it->is_object() || !it->contains("full_attention")) return Status::ok();
  for (const char* type : {"full_attention", "sliding_attention"}) {
    auto p = it->find(type);
    if (p == it->end()) continue;
    if (!p->is_object()) return corrupt(std::string("config.json: rope_parameters.") + type + " must be an object");
    const std::string where = std::string("config.json: rope_parameters.") + type;
    BRIGADE_ASSIGN_OR_RETURN(RopeScaling s, parse_rope_scaling(p->dump(), where));
    const bool full = std::string(type) == "full_attention";
    BRIGADE_RETURN_IF_ERROR(read_float(*p, "rope_theta", full ? c.rope_theta : c.rope_local_theta));
    if (full) c.rope_scaling = s;
    else if (s.type != RopeScalingType::none)
      return unsupported(where + ": rope_type '" + rope_scaling_name(s.type) +
                         "' is not supported for the sliding layers; supported: default");
  }
  return Status::ok();
}

bool is_gemma(const std::string& arch) { return arch == "gemma2" || arch == "gemma3_text" || arch == "vaultgemma"; }

bool is_gemma3_multimodal(const json& j) {
  return config_names_class(j, {"Gemma3ForConditionalGeneration"}, {"gemma3"});
}

Expected<json> gemma3_text_config(const json& j) {
  auto it = j.find("text_config");
  if (it == j.end() || !it->is_object())
    return unsupported("config.json: Gemma3ForConditionalGeneration without a text_config object; brigade runs "
                       "its language model (text_config) or the text-only Gemma3ForCausalLM (model_type gemma3_text)");
  // Gemma3TextConfig's defaults (transformers), which the Hub's configs rely on.
  json t = {{"vocab_size", 262208},      {"hidden_size", 2304},         {"intermediate_size", 9216},
            {"num_hidden_layers", 26},   {"num_attention_heads", 8},    {"num_key_value_heads", 4},
            {"head_dim", 256},           {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6},
            {"query_pre_attn_scalar", 256}, {"sliding_window", 4096},   {"bos_token_id", 2},
            {"eos_token_id", 1}};
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype"})
    if (j.contains(key) && !it->contains(key)) t[key] = j[key];
  t.update(*it);
  t["architectures"] = json::array({"Gemma3ForCausalLM"});
  t["model_type"] = "gemma3_text";
  return t;
}

std::map<std::string, RawTensor> gemma3_tensors(std::map<std::string, RawTensor> tensors) {
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : tensors) {
    std::string to;
    auto strip = [&](std::initializer_list<const char*> prefixes, const std::string& as) {
      for (const char* prefix : prefixes)
        if (to.empty() && name.starts_with(prefix)) to = as + name.substr(std::string(prefix).size());
    };
    strip({"language_model.model.", "model.language_model."}, "model.");
    strip({"vision_tower.vision_model.", "model.vision_tower.vision_model.", "model.vision_tower.", "vision_tower."},
          "vision_tower.");
    strip({"model.multi_modal_projector.", "multi_modal_projector."}, "multi_modal_projector.");
    strip({"model.embed_vision."}, "embed_vision.");  // Gemma 4's multimodal embedder
    if (name == "language_model.lm_head.weight" || name == "lm_head.weight") to = "lm_head.weight";
    if (name == "image_newline" || name == "model.image_newline") to = "image_newline";  // LLaVA-NeXT's
    if (to.empty()) continue;
    // The patch embedding, a convolution [hidden, 3, p, p], is a matrix over c-major patches; the
    // projection [vision hidden, text hidden] multiplies as x · W, so it loads transposed
    // (WeightLoader::stacked_transposed, one matrix).
    if ((to == "vision_tower.embeddings.patch_embedding.weight" || to == "vision_tower.patch_conv.weight") &&
        t.shape.size() == 4)  // Gemma 3's SigLIP, Mistral 3's Pixtral
      t.shape = {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};
    if (to == "vision_tower.patch_embedder.position_embedding_table" && t.shape.size() == 3)  // Gemma 4's x and y tables
      t.shape = {t.shape[0] * t.shape[1], t.shape[2]};
    if (to == "multi_modal_projector.mm_input_projection_weight" && t.shape.size() == 2)
      t.shape.insert(t.shape.begin(), 1);
    t.name = to;
    out.emplace(to, std::move(t));
  }
  return out;
}

Status read_gemma(const json& j, ModelConfig& c) {
  if (c.attention_bias)
    return unsupported("config.json: attention_bias = true is not supported for " + c.arch + "; set it to false");
  std::string act = "gelu_pytorch_tanh";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_activation", act));
  if (act != "gelu_pytorch_tanh")
    return unsupported("config.json: hidden_activation '" + act + "' is not supported for " + c.arch +
                       "; supported: gelu_pytorch_tanh");
  bool bidirectional = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bidirectional_attention", bidirectional));
  if (bidirectional)
    return unsupported("config.json: use_bidirectional_attention = true (an embedding model) is not supported; "
                       "brigade runs causal decoders");
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.norm_offset = 1.0f;
  // VaultGemma: Gemma 2 without the post-attention and post-feedforward norms (input_layernorm
  // and pre_feedforward_layernorm before each block, as Llama's two).
  c.sandwich_norms = c.arch != "vaultgemma";
  c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.qk_norm = c.arch == "gemma3_text";
  float query_pre_attn_scalar = 256.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "query_pre_attn_scalar", query_pre_attn_scalar));
  if (!(query_pre_attn_scalar > 0.0f) || !std::isfinite(query_pre_attn_scalar))
    return invalid_argument("config.json: query_pre_attn_scalar must be a positive number");
  c.attn_scale = static_cast<float>(std::pow(static_cast<double>(query_pre_attn_scalar), -0.5));
  const bool gemma2 = c.arch == "gemma2" || c.arch == "vaultgemma";  // VaultGemmaConfig is Gemma2Config
  // Absent fields take the config classes' defaults (null = none).
  c.attn_softcap = !j.contains("attn_logit_softcapping") && gemma2 ? 50.0f : 0.0f;
  c.final_softcap = !j.contains("final_logit_softcapping") && gemma2 ? 30.0f : 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_softcap(j, "attn_logit_softcapping", c.attn_softcap));
  BRIGADE_RETURN_IF_ERROR(read_softcap(j, "final_logit_softcapping", c.final_softcap));
  c.sliding_window = 4096;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, gemma2 ? 2 : 6));
  if (!gemma2) BRIGADE_RETURN_IF_ERROR(read_gemma3_rope(j, c));
  return Status::ok();
}

}  // namespace brigade
