#include "models/aya_vision_config.h"

#include <string>
#include <utility>

#include "models/config_json.h"
#include "models/idefics3_config.h"

namespace brigade {

using json = nlohmann::json;

bool is_aya_vision(const json& j) {
  return config_names_class(j, {"AyaVisionForConditionalGeneration"}, {"aya_vision"});
}

Expected<json> aya_vision_text_config(const json& j) {
  const auto it = j.find("text_config");
  if (it != j.end() && !it->is_null() && !it->is_object()) return corrupt("config.json: text_config is not an object");
  const json text = it == j.end() || it->is_null() ? json::object() : *it;
  const std::string type = config_model_type(text, "cohere2");
  if (type != "cohere2" && type != "cohere")
    return unsupported("config.json: text_config.model_type '" + type +
                       "' of AyaVisionForConditionalGeneration is not supported; supported: cohere2, cohere");
  // Cohere2Config's and CohereConfig's defaults for the sizes (the rest are read with theirs).
  json t = {{"vocab_size", 256000}, {"hidden_size", 8192},  {"intermediate_size", 22528},
            {"num_hidden_layers", 40}, {"num_attention_heads", 64}, {"max_position_embeddings", 8192},
            {"layer_norm_eps", 1e-5}, {"hidden_act", "silu"}, {"pad_token_id", 0}, {"bos_token_id", 5},
            {"eos_token_id", 255001}};
  t.update(text);
  t["model_type"] = type;
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype"})
    if (j.contains(key) && !text.contains(key)) t[key] = j[key];
  t["tie_word_embeddings"] = true;  // AyaVisionConfig's default; transformers ties by the top level
  if (const auto top = j.find("tie_word_embeddings"); top != j.end() && top->is_boolean()) t["tie_word_embeddings"] = *top;
  t["architectures"] = json::array({type == "cohere2" ? "Cohere2ForCausalLM" : "CohereForCausalLM"});
  return t;
}

Expected<VisionConfig> read_aya_vision(const json& j, int text_vocab, int text_hidden) {
  VisionConfig v;
  v.kind = VisionKind::aya_vision;
  v.hidden_size = 1152, v.intermediate_size = 4304, v.n_layers = 26, v.n_heads = 14;
  v.image_size = 384, v.patch_size = 14, v.eps = 1e-6f, v.hidden_act = "gelu_pytorch_tanh";
  BRIGADE_RETURN_IF_ERROR(read_siglip_vision_config(j, v));
  std::string strategy = "full";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "vision_feature_select_strategy", strategy));
  if (strategy != "full")
    return unsupported("config.json: vision_feature_select_strategy '" + strategy +
                       "'; supported: full (default drops a patch, and the pixel shuffle needs a square of them)");
  int layer = -1;
  if (const auto l = j.find("vision_feature_layer"); l != j.end() && l->is_array())
    return unsupported("config.json: vision_feature_layer " + l->dump() + "; supported: one layer");
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vision_feature_layer", layer, false));
  const int n = v.n_layers;
  if (layer < -(n + 1) || layer > n)
    return invalid_argument("config.json: vision_feature_layer " + std::to_string(layer) + " is outside the tower's " +
                            std::to_string(n + 1) + " hidden states [" + std::to_string(-(n + 1)) + ", " +
                            std::to_string(n) + "]");
  v.feature_layers = {layer < 0 ? n + 1 + layer : layer};  // hidden_states[k]: after k layers, before post_layernorm
  v.final_norm = false;
  v.merge = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "downsample_factor", v.merge, false));
  if (v.merge < 1 || v.patches_per_side() % v.merge != 0)
    return unsupported("config.json: downsample_factor " + std::to_string(v.merge) + " must divide the " +
                       std::to_string(v.patches_per_side()) + " patches of a tile's side (vision_config.image_size / patch_size)");
  v.projector_eps = 1e-6f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "adapter_layer_norm_eps", v.projector_eps));
  v.merger_intermediate = text_hidden;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "alignment_intermediate_size", v.merger_intermediate, false));
  if (v.merger_intermediate <= 0 || v.merger_intermediate % 2 != 0)
    return invalid_argument("config.json: alignment_intermediate_size " + std::to_string(v.merger_intermediate) +
                            " must be positive and even (its SwiGLU halves)");
  v.image_token = 255036;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_index", v.image_token, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_id", v.image_token, false));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_index " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  return v;
}

Status check_aya_vision_processor(const std::string& model_path, int tile_tokens) {
  BRIGADE_ASSIGN_OR_RETURN(const std::optional<ProcessorConfigFile> found, read_processor_config_file(model_path));
  if (!found) return Status::ok();
  const std::string& file = found->file;
  const json& j = found->root;
  int img_size = 364, patch = 28, downsample = 1;
  for (auto [key, out] : {std::pair{"img_size", &img_size}, {"patch_size", &patch}, {"downsample_factor", &downsample}}) {
    if (Status st = read_int(j, key, *out, false); !st.is_ok()) return corrupt(file + ": " + st.message());
    if (*out <= 0) return corrupt(file + ": " + key + " must be positive");
  }
  const int64_t side = img_size / (int64_t{patch} * downsample), tokens = side * side;
  if (tokens != tile_tokens)
    return invalid_argument(file + ": img_size " + std::to_string(img_size) + ", patch_size " +
                            std::to_string(patch) + " and downsample_factor " + std::to_string(downsample) + " make " +
                            std::to_string(tokens) + " tokens a tile; the vision tower makes " +
                            std::to_string(tile_tokens));
  return Status::ok();
}

}  // namespace brigade
