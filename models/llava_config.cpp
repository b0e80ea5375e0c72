#include "models/llava_config.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/config_json.h"
#include "models/llama_variants_config.h"

namespace brigade {

using json = nlohmann::json;

namespace {

// The language model classes' defaults for the fields a LLaVA text_config may leave out
// (llava-1.5's gives only model_type, vocab, context and eps).
Expected<std::pair<json, const char*>> text_defaults(const std::string& type) {
  if (type == "llama")  // LlamaConfig
    return std::pair{json{{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008},
                           {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"max_position_embeddings", 2048},
                           {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"hidden_act", "silu"},
                           {"bos_token_id", 1}, {"eos_token_id", 2}},
                     "LlamaForCausalLM"};
  if (type == "mistral")  // MistralConfig
    return std::pair{json{{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336},
                           {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                           {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                           {"sliding_window", 4096}, {"hidden_act", "silu"}, {"bos_token_id", 1}, {"eos_token_id", 2}},
                     "MistralForCausalLM"};
  if (type == "qwen2")  // Qwen2Config
    return std::pair{json{{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
                           {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
                           {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                           {"hidden_act", "silu"}},
                     "Qwen2ForCausalLM"};
  return unsupported("config.json: text_config.model_type '" + type +
                     "' of LlavaForConditionalGeneration is not supported; supported: llama, mistral, qwen2");
}

Status check_act(const std::string& field, const std::string& act) {
  if (act == "gelu" || act == "gelu_pytorch_tanh" || act == "quick_gelu") return Status::ok();
  return unsupported("config.json: " + field + " '" + act + "'; supported: gelu, gelu_pytorch_tanh, quick_gelu");
}

// vision_config's tower (CLIPVisionConfig or SiglipVisionConfig).
Status read_tower(const json& j, VisionConfig& v) {
  const auto it = j.find("vision_config");
  const bool absent = it == j.end() || it->is_null();
  if (!absent && !it->is_object()) return corrupt("config.json: vision_config is not an object");
  const json c = absent ? json::object() : *it;
  const bool onevision = is_llava_onevision(j);
  const std::string type = config_model_type(c, onevision ? "siglip_vision_model" : "clip_vision_model");
  if (type != "clip_vision_model" && type != "siglip_vision_model")
    return unsupported("config.json: vision_config.model_type '" + type +
                       "' of LlavaForConditionalGeneration is not supported; supported: clip_vision_model, "
                       "siglip_vision_model");
  v.class_token = type == "clip_vision_model";
  if (onevision && absent)  // LlavaOnevisionConfig's vision_config: SigLIP so400m/14 at 384 pixels
    v.hidden_size = 1152, v.intermediate_size = 4304, v.n_layers = 26, v.n_heads = 16, v.image_size = 384,
    v.patch_size = 14;
  else if (absent)  // LlavaConfig's vision_config: CLIP ViT-L/14 at 336 pixels
    v.hidden_size = 1024, v.intermediate_size = 4096, v.n_layers = 24, v.n_heads = 16, v.image_size = 336,
    v.patch_size = 14;
  else if (v.class_token)  // CLIPVisionConfig
    v.hidden_size = 768, v.intermediate_size = 3072, v.n_layers = 12, v.n_heads = 12, v.image_size = 224,
    v.patch_size = 32;
  else  // SiglipVisionConfig
    v.hidden_size = 768, v.intermediate_size = 3072, v.n_layers = 12, v.n_heads = 12, v.image_size = 224,
    v.patch_size = 16;
  v.eps = v.class_token ? 1e-5f : 1e-6f;
  v.hidden_act = v.class_token ? "quick_gelu" : "gelu_pytorch_tanh";
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_hidden_layers", v.n_layers, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_attention_heads", v.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "image_size", v.image_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
  BRIGADE_RETURN_IF_ERROR(read_float(c, "layer_norm_eps", v.eps));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  BRIGADE_RETURN_IF_ERROR(check_act("vision_config.hidden_act", v.hidden_act));
  int channels = 3;
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_channels", channels, false));
  if (channels != 3)
    return unsupported("config.json: vision_config.num_channels " + std::to_string(channels) + "; supported: 3");
  BRIGADE_RETURN_IF_ERROR(check_vit_sizes(v, /*partial_patches=*/true));  // Conv2d's stride drops the rest
  return Status::ok();
}

// vision_feature_layer (an int or a list) as hidden_states indices in [0, n_layers].
Status read_feature_layers(const json& j, VisionConfig& v) {
  std::vector<int64_t> raw = {is_llava_onevision(j) ? -1 : -2};
  const auto it = j.find("vision_feature_layer");
  if (it != j.end() && !it->is_null()) {
    raw.clear();
    if (it->is_number_integer()) raw.push_back(it->get<int64_t>());
    else if (it->is_array() && !it->empty())
      for (const json& e : *it) {
        if (!e.is_number_integer()) return corrupt("config.json: vision_feature_layer holds " + e.dump() + ", not an int");
        raw.push_back(e.get<int64_t>());
      }
    else return corrupt("config.json: vision_feature_layer must be an int or a non-empty list of ints");
  }
  const int64_t n = v.n_layers;
  for (int64_t l : raw) {
    if (l < -(n + 1) || l > n)
      return invalid_argument("config.json: vision_feature_layer " + std::to_string(l) + " is outside the tower's " +
                              std::to_string(n + 1) + " hidden states [" + std::to_string(-(n + 1)) + ", " +
                              std::to_string(n) + "]");
    v.feature_layers.push_back(static_cast<int>(l < 0 ? n + 1 + l : l));
  }
  return Status::ok();
}

// LLaVA-NeXT's image_grid_pinpoints (LlavaNextConfig's five llava-v1.6 ones when absent;
// LlavaOnevisionConfig's 36, 1x1 to 6x6 tiles of 384 pixels): each a [height, width] of whole
// tiles. The features of a tile must be its patches' grid, which only CLIP under "default" (the
// class row dropped) and SigLIP under "full" give. LLaVA-OneVision also reads
// vision_aspect_ratio ("anyres_max_N", LlavaOnevisionConfig's anyres_max_9).
Status read_pinpoints(const json& j, VisionConfig& v) {
  const bool onevision = is_llava_onevision(j);
  const char* arch = onevision ? "LlavaOnevisionForConditionalGeneration" : "LlavaNextForConditionalGeneration";
  if (v.extra_tokens != 0)
    return unsupported(std::string("config.json: vision_feature_select_strategy '") +
                       (v.class_token ? "full" : "default") + "' with a " + (v.class_token ? "CLIP" : "SigLIP") +
                       " tower gives a tile " + std::to_string(v.n_patches() + v.extra_tokens) +
                       " features, not its " + std::to_string(v.n_patches()) + " patches, which " + arch +
                       " lays out in rows; supported: CLIP with default, SigLIP with full");
  v.anyres.tile = v.image_size;
  v.anyres.side = v.patches_per_side();
  const auto it = j.find("image_grid_pinpoints");
  if (it == j.end() || it->is_null()) {
    v.anyres.pinpoints = default_llava_pinpoints(onevision);
  } else {
    if (!it->is_array() || it->empty())
      return corrupt("config.json: image_grid_pinpoints must be a non-empty list of [height, width]");
    for (const json& p : *it) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
        return corrupt("config.json: image_grid_pinpoints holds " + p.dump() + ", not a [height, width] of ints");
      v.anyres.pinpoints.push_back({p[0].get<int>(), p[1].get<int>()});
    }
  }
  constexpr int kMaxTiles = 64;  // llava-v1.6's largest pinpoint is 4 tiles, OneVision's anyres_max_9 36
  for (const auto& [h, w] : v.anyres.pinpoints)
    if (h <= 0 || w <= 0 || h % v.image_size != 0 || w % v.image_size != 0 ||
        int64_t{h / v.image_size} * (w / v.image_size) > kMaxTiles)
      return unsupported("config.json: image_grid_pinpoints [" + std::to_string(h) + ", " + std::to_string(w) +
                         "] is not a grid of at most " + std::to_string(kMaxTiles) + " whole tiles of the tower's " +
                         std::to_string(v.image_size) + " pixels");
  if (!onevision) return Status::ok();
  // LlavaOnevisionModel.pack_image_features: int(vision_aspect_ratio.strip("anyres_max_")).
  std::string aspect = "anyres_max_9";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "vision_aspect_ratio", aspect));
  const std::string prefix = "anyres_max_";
  const std::string n = aspect.starts_with(prefix) ? aspect.substr(prefix.size()) : "";
  const bool digits =
      !n.empty() && n.size() <= 4 && std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  v.anyres.max_area = digits ? std::stoi(n) : 0;
  if (v.anyres.max_area <= 0)
    return unsupported("config.json: vision_aspect_ratio '" + aspect +
                       "'; supported: anyres_max_N for a positive N (LLaVA-OneVision's anyres_max_9)");
  if (!anyres_resize_keeps_rows(v.anyres))
    return unsupported("config.json: vision_aspect_ratio " + aspect +
                       " resizes some image's features to no rows or columns under these image_grid_pinpoints");
  return Status::ok();
}

}  // namespace

std::vector<std::array<int, 2>> default_llava_pinpoints(bool onevision) {
  if (!onevision) return {{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}};
  std::vector<std::array<int, 2>> out;
  for (int h = 1; h <= 6; ++h)
    for (int w = 1; w <= 6; ++w) out.push_back({384 * h, 384 * w});
  return out;
}

bool is_llava_onevision(const json& j) {
  return config_names_class(j, {"LlavaOnevisionForConditionalGeneration"}, {"llava_onevision"});
}

bool is_llava_next(const json& j) {
  return config_names_class(j, {"LlavaNextForConditionalGeneration"}, {"llava_next"}) || is_llava_onevision(j);
}

bool is_llava(const json& j) {
  return config_names_class(j, {"LlavaForConditionalGeneration"}, {"llava"}) || is_llava_next(j);
}

Expected<json> llava_text_config(const json& j) {
  const auto it = j.find("text_config");
  if (it != j.end() && !it->is_null() && !it->is_object()) return corrupt("config.json: text_config is not an object");
  const json text = it == j.end() || it->is_null() ? json::object() : *it;
  const std::string type = config_model_type(text, is_llava_onevision(j) ? "qwen2" : "llama");
  BRIGADE_ASSIGN_OR_RETURN(auto defaults, text_defaults(type));
  json wrapper = j;
  wrapper["text_config"] = text;
  BRIGADE_ASSIGN_OR_RETURN(json t, wrapped_text_config(wrapper, "LlavaForConditionalGeneration",
                                                       std::move(defaults.first), type.c_str(), defaults.second, false));
  // LlavaConfig: tied when the top level says so, or when text_config does.
  bool tie = false, text_tie = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "tie_word_embeddings", tie));
  BRIGADE_RETURN_IF_ERROR(read_bool(text, "tie_word_embeddings", text_tie));
  t["tie_word_embeddings"] = tie || text_tie;
  return t;
}

Expected<VisionConfig> read_llava_vision(const json& j, int text_vocab) {
  VisionConfig v;
  v.kind = VisionKind::llava;
  v.merge = 1, v.temporal_patch = 1;
  BRIGADE_RETURN_IF_ERROR(read_tower(j, v));
  BRIGADE_RETURN_IF_ERROR(read_feature_layers(j, v));
  const bool onevision = is_llava_onevision(j);
  std::string strategy = onevision ? "full" : "default";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "vision_feature_select_strategy", strategy));
  if (strategy != "default" && strategy != "full")
    return unsupported("config.json: vision_feature_select_strategy '" + strategy + "'; supported: default, full");
  // "default" drops the first row (CLIP's class token; SigLIP's first patch, as transformers does).
  v.extra_tokens = (v.class_token ? 1 : 0) - (strategy == "default" ? 1 : 0);
  v.projector_act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "projector_hidden_act", v.projector_act));
  BRIGADE_RETURN_IF_ERROR(check_act("projector_hidden_act", v.projector_act));
  v.projector_bias = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "multimodal_projector_bias", v.projector_bias));
  v.image_token = onevision ? 151646 : 32000;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_index", v.image_token, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_id", v.image_token, false));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_index " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  v.out_hidden_size = 0;
  if (is_llava_next(j)) BRIGADE_RETURN_IF_ERROR(read_pinpoints(j, v));
  return v;
}

}  // namespace brigade
