#include "models/internvl_config.h"

#include <cmath>
#include <regex>
#include <string>
#include <utility>

#include "models/config_json.h"
#include "models/llama_variants_config.h"

namespace brigade {

using json = nlohmann::json;

namespace {

// The language model classes' defaults for the fields an InternVL text_config may leave out.
Expected<std::pair<json, const char*>> text_defaults(const std::string& type) {
  if (type == "qwen2")  // Qwen2Config
    return std::pair{json{{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
                          {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
                          {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                          {"hidden_act", "silu"}},
                     "Qwen2ForCausalLM"};
  if (type == "qwen3")  // Qwen3Config
    return std::pair{json{{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
                          {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
                          {"head_dim", 128}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6},
                          {"rope_theta", 10000.0}, {"hidden_act", "silu"}},
                     "Qwen3ForCausalLM"};
  if (type == "qwen3_moe") return std::pair{json::object(), "Qwen3MoeForCausalLM"};  // the -hf configs give it whole
  if (type == "llama")  // LlamaConfig
    return std::pair{json{{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008},
                          {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"max_position_embeddings", 2048},
                          {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"hidden_act", "silu"}},
                     "LlamaForCausalLM"};
  return unsupported("config.json: text_config.model_type '" + type +
                     "' of InternVLForConditionalGeneration is not supported; supported: qwen2, qwen3, qwen3_moe, llama");
}

Expected<json> remote_text_config(const json& j) {
  const auto it = j.find("llm_config");
  if (it == j.end() || !it->is_object()) return corrupt("config.json: InternVLChatModel without an llm_config object");
  json t = *it;
  const std::string arch = config_architecture(t);
  if (arch != "Qwen2ForCausalLM" && arch != "Qwen3ForCausalLM" && arch != "Qwen3MoeForCausalLM" &&
      arch != "LlamaForCausalLM" && arch != "InternLM2ForCausalLM")
    return unsupported("config.json: llm_config.architectures '" + arch +
                       "' of InternVLChatModel is not supported; supported: Qwen2ForCausalLM, Qwen3ForCausalLM, "
                       "Qwen3MoeForCausalLM, LlamaForCausalLM, InternLM2ForCausalLM");
  for (const char* key : {"torch_dtype", "dtype"})
    if (j.contains(key) && !t.contains(key)) t[key] = j[key];
  return t;
}

// An int, or a list of two equal ints (InternVLVisionConfig saves image_size / patch_size so).
Status read_square(const json& c, const char* key, int& out) {
  const auto it = c.find(key);
  if (it == c.end() || it->is_null()) return Status::ok();
  if (it->is_array()) {
    if (it->size() != 2 || !(*it)[0].is_number_integer() || (*it)[0] != (*it)[1])
      return unsupported(std::string("config.json: vision_config.") + key + " " + it->dump() +
                         " is not square; supported: an int or [n, n]");
    out = (*it)[0].get<int>();
    return Status::ok();
  }
  return read_int(c, key, out, false);
}

Status check_act(const std::string& field, const std::string& act) {
  if (act == "gelu" || act == "gelu_pytorch_tanh" || act == "quick_gelu") return Status::ok();
  return unsupported("config.json: " + field + " '" + act + "'; supported: gelu, gelu_pytorch_tanh, quick_gelu");
}

// vision_config: InternVLVisionConfig's fields and defaults (InternVisionConfig's names in the
// remote layout).
Status read_tower(const json& j, bool remote, VisionConfig& v) {
  const auto it = j.find("vision_config");
  if (it != j.end() && !it->is_null() && !it->is_object()) return corrupt("config.json: vision_config is not an object");
  const json c = it == j.end() || it->is_null() ? json::object() : *it;
  v.hidden_size = 1024, v.intermediate_size = 4096, v.n_layers = 24, v.n_heads = 16;
  v.image_size = 448, v.patch_size = 14, v.eps = 1e-6f, v.hidden_act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_hidden_layers", v.n_layers, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_attention_heads", v.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_square(c, "image_size", v.image_size));
  BRIGADE_RETURN_IF_ERROR(read_square(c, "patch_size", v.patch_size));
  BRIGADE_RETURN_IF_ERROR(read_float(c, "layer_norm_eps", v.eps));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  BRIGADE_RETURN_IF_ERROR(check_act("vision_config.hidden_act", v.hidden_act));
  std::string norm = "layer_norm";
  BRIGADE_RETURN_IF_ERROR(read_string(c, "norm_type", norm));
  if (norm != "layer_norm" && norm != "rms_norm")
    return unsupported("config.json: vision_config.norm_type '" + norm + "'; supported: layer_norm, rms_norm");
  v.rms_norm = norm == "rms_norm";
  v.qkv_bias = false, v.qk_norm = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(c, remote ? "qkv_bias" : "attention_bias", v.qkv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(c, remote ? "qk_normalization" : "use_qk_norm", v.qk_norm));
  bool absolute = true, mask = false, mean_pooling = true;
  int channels = 3;
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "use_absolute_position_embeddings", absolute));
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "use_mask_token", mask));
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "use_mean_pooling", mean_pooling));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_channels", channels, false));
  if (!absolute) return unsupported("config.json: vision_config.use_absolute_position_embeddings false; supported: true");
  if (mask) return unsupported("config.json: vision_config.use_mask_token true (masked image modeling); supported: false");
  if (channels != 3) return unsupported("config.json: vision_config.num_channels " + std::to_string(channels) + "; supported: 3");
  v.qk_eps = remote ? v.eps : 1e-6f;  // InternRMSNorm(eps=layer_norm_eps); InternVLVisionRMSNorm's default
  // InternVLVisionModel's final LayerNorm runs when use_mean_pooling is false (the remote
  // InternVisionModel has none); it shapes last_hidden_state, what feature layer -1 reads.
  v.final_norm = !remote && !mean_pooling;
  BRIGADE_RETURN_IF_ERROR(check_vit_sizes(v));
  return Status::ok();
}

// downsample_ratio r: the pixel shuffle merges (1 / r) x (1 / r) patches into one token.
Status read_merge(const json& j, VisionConfig& v) {
  float ratio = 0.5f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "downsample_ratio", ratio));
  const float inv = ratio > 0.0f ? 1.0f / ratio : 0.0f;
  const int m = static_cast<int>(std::lround(inv));
  if (!(ratio > 0.0f) || m < 1 || std::fabs(inv - static_cast<float>(m)) > 1e-4f || v.patches_per_side() % m != 0)
    return unsupported("config.json: downsample_ratio " + std::to_string(ratio) + " must be 1 / m for a whole m dividing the " +
                       std::to_string(v.patches_per_side()) + " patches of a tile's side (0.5 in every checkpoint)");
  v.merge = m;
  return Status::ok();
}

// vision_feature_layer / select_layer: an index into the tower's hidden states (0 = the
// embeddings, k = after layer k), made non-negative.
Status read_feature_layer(const json& j, bool remote, VisionConfig& v) {
  const char* key = remote ? "select_layer" : "vision_feature_layer";
  int layer = -1;
  const auto it = j.find(key);
  if (it != j.end() && it->is_array()) {
    if (it->size() != 1 || !it->front().is_number_integer())
      return unsupported(std::string("config.json: ") + key + " " + it->dump() + "; supported: one layer");
    layer = it->front().get<int>();
  } else {
    BRIGADE_RETURN_IF_ERROR(read_int(j, key, layer, false));
  }
  const int n = v.n_layers;
  if (layer < -(n + 1) || layer > n)
    return invalid_argument(std::string("config.json: ") + key + " " + std::to_string(layer) + " is outside the tower's " +
                            std::to_string(n + 1) + " hidden states [" + std::to_string(-(n + 1)) + ", " +
                            std::to_string(n) + "]");
  // Only -1 reads last_hidden_state, after the final norm; another index reads hidden_states.
  if (layer != -1) v.final_norm = false;
  v.feature_layers = {layer < 0 ? n + 1 + layer : layer};
  return Status::ok();
}

}  // namespace

bool is_internvl(const json& j) { return config_names_class(j, {"InternVLForConditionalGeneration"}, {"internvl"}); }
bool is_internvl_chat(const json& j) { return config_names_class(j, {"InternVLChatModel"}, {"internvl_chat"}); }

Expected<json> internvl_text_config(const json& j) {
  if (is_internvl_chat(j)) return remote_text_config(j);
  const auto it = j.find("text_config");
  if (it != j.end() && !it->is_null() && !it->is_object()) return corrupt("config.json: text_config is not an object");
  const json text = it == j.end() || it->is_null() ? json::object() : *it;
  std::string type = "qwen2";
  BRIGADE_RETURN_IF_ERROR(read_string(text, "model_type", type));
  BRIGADE_ASSIGN_OR_RETURN(auto defaults, text_defaults(type));
  json wrapper = j;
  wrapper["text_config"] = text;
  return wrapped_text_config(wrapper, "InternVLForConditionalGeneration", std::move(defaults.first), type.c_str(),
                             defaults.second, /*tie=*/true);
}

Expected<VisionConfig> read_internvl_vision(const json& j, int text_vocab) {
  const bool remote = is_internvl_chat(j);
  VisionConfig v;
  v.kind = VisionKind::internvl;
  v.class_token = true;
  v.temporal_patch = 1;
  BRIGADE_RETURN_IF_ERROR(read_tower(j, remote, v));
  BRIGADE_RETURN_IF_ERROR(read_merge(j, v));
  BRIGADE_RETURN_IF_ERROR(read_feature_layer(j, remote, v));
  if (remote) {
    std::string ps = "v2";
    BRIGADE_RETURN_IF_ERROR(read_string(j, "ps_version", ps));
    if (ps != "v2")
      return unsupported("config.json: ps_version '" + ps + "' (the pixel shuffle without its last transpose); "
                         "supported: v2");
    const auto l = j.find("llm_config");
    const std::string llm = l != j.end() && l->is_object() ? config_architecture(*l) : std::string();
    v.image_token = llm.starts_with("Qwen") ? 151667 : 92546;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "img_context_token_id", v.image_token, false));
  } else {
    std::string strategy = "default";
    BRIGADE_RETURN_IF_ERROR(read_string(j, "vision_feature_select_strategy", strategy));
    if (strategy != "default")
      return unsupported("config.json: vision_feature_select_strategy '" + strategy +
                         "'; supported: default (the class token dropped)");
    v.image_token = 151667;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_id", v.image_token, false));
  }
  v.projector_act = "gelu";
  if (!remote) BRIGADE_RETURN_IF_ERROR(read_string(j, "projector_hidden_act", v.projector_act));
  BRIGADE_RETURN_IF_ERROR(check_act("projector_hidden_act", v.projector_act));
  v.projector_eps = 1e-5f;  // nn.LayerNorm's default: the projector's norm takes no eps from the config
  v.projector_bias = true;
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported(std::string("config.json: ") + (remote ? "the <IMG_CONTEXT> id " : "image_token_id ") +
                       std::to_string(v.image_token) + " lies outside the text vocabulary of " +
                       std::to_string(text_vocab) + (remote ? " (set img_context_token_id to the tokenizer's id)" : ""));
  return v;
}

std::map<std::string, RawTensor> internvl_tensors(std::map<std::string, RawTensor> tensors) {
  // The remote layout's vision names, as transformers' converter renames them (in its order).
  static const std::pair<std::regex, const char*> kVision[] = {
      {std::regex(R"(\.layers\.)"), ".layer."},
      {std::regex("class_embedding"), "cls_token"},
      {std::regex(R"(position_embedding\b)"), "position_embeddings"},
      {std::regex(R"(patch_embedding\.)"), "patch_embeddings.projection."},
      {std::regex(R"(\.ls(\d+)$)"), ".lambda_$1"},
      {std::regex(R"(attn\.proj\.)"), "attention.projection_layer."},
      {std::regex(R"(\.attn\.)"), ".attention."},
      {std::regex(R"(\.norm1\.)"), ".layernorm_before."},
      {std::regex(R"(\.norm2\.)"), ".layernorm_after."},
  };
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : tensors) {
    std::string to;
    auto strip = [&](std::initializer_list<const char*> prefixes, const std::string& as) {
      for (const char* prefix : prefixes)
        if (to.empty() && name.starts_with(prefix)) to = as + name.substr(std::string(prefix).size());
    };
    strip({"model.language_model.", "language_model.model."}, "model.");
    strip({"model.vision_tower."}, "vision_tower.");
    strip({"model.multi_modal_projector."}, "multi_modal_projector.");
    if (to.empty() && name.starts_with("vision_model.")) {
      to = "vision_tower." + name.substr(std::string("vision_model.").size());
      for (const auto& [from, as] : kVision) to = std::regex_replace(to, from, as);
    }
    strip({"mlp1.0."}, "multi_modal_projector.layer_norm.");
    strip({"mlp1.1."}, "multi_modal_projector.linear_1.");
    strip({"mlp1.3."}, "multi_modal_projector.linear_2.");
    if (name == "language_model.lm_head.weight" || name == "lm_head.weight") to = "lm_head.weight";
    if (to.empty()) continue;
    if (to == "vision_tower.embeddings.patch_embeddings.projection.weight" && t.shape.size() == 4)
      t.shape = {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};
    // The class token [1, 1, h] and the position table [1, n, h] as the vector and matrix they are.
    if (to == "vision_tower.embeddings.cls_token" || to == "vision_tower.embeddings.position_embeddings")
      while (t.shape.size() > 1 && t.shape.front() == 1 && !(t.shape.size() == 2 && to.ends_with("position_embeddings")))
        t.shape.erase(t.shape.begin());
    t.name = to;
    out.emplace(to, std::move(t));
  }
  return out;
}

}  // namespace brigade
