#include "models/vision_config.h"

#include <cmath>
#include <string>

#include "models/config_json.h"

namespace brigade {

int VisionConfig::tokens_per_side() const {
  return static_cast<int>(std::lround(std::sqrt(static_cast<double>(tokens_per_image))));
}

Expected<VisionConfig> read_gemma3_vision(const nlohmann::json& j, int text_vocab) {
  // SiglipVisionConfig's defaults; the Hub's Gemma 3 configs give the 400M tower's sizes.
  VisionConfig v;
  v.hidden_size = 768, v.intermediate_size = 3072, v.n_layers = 12, v.n_heads = 12, v.image_size = 224, v.patch_size = 16;
  int tokens = 256, image = 262144, boi = 255999, eoi = 256000;  // Gemma3Config's defaults
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mm_tokens_per_image", tokens, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_index", image, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "boi_token_index", boi, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "eoi_token_index", eoi, false));
  const auto it = j.find("vision_config");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_object()) return corrupt("config.json: vision_config is not an object");
    const nlohmann::json& c = *it;
    BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
    BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
    BRIGADE_RETURN_IF_ERROR(read_int(c, "num_hidden_layers", v.n_layers, false));
    BRIGADE_RETURN_IF_ERROR(read_int(c, "num_attention_heads", v.n_heads, false));
    BRIGADE_RETURN_IF_ERROR(read_int(c, "image_size", v.image_size, false));
    BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
    BRIGADE_RETURN_IF_ERROR(read_float(c, "layer_norm_eps", v.eps));
    int channels = 3;
    BRIGADE_RETURN_IF_ERROR(read_int(c, "num_channels", channels, false));
    if (channels != 3) return unsupported("config.json: vision_config.num_channels " + std::to_string(channels) + "; supported: 3");
    std::string act = "gelu_pytorch_tanh";
    BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", act));
    if (act != "gelu_pytorch_tanh")
      return unsupported("config.json: vision_config.hidden_act '" + act + "'; supported: gelu_pytorch_tanh");
  }
  v.tokens_per_image = tokens;
  v.image_token = image;
  v.boi_token = boi;
  v.eoi_token = eoi;
  if (v.hidden_size <= 0 || v.intermediate_size <= 0 || v.n_layers <= 0 || v.n_heads <= 0 || v.image_size <= 0 ||
      v.patch_size <= 0 || !(v.eps > 0.0f))
    return invalid_argument("config.json: vision_config's sizes, layer and head counts and layer_norm_eps must be positive");
  if (v.hidden_size % v.n_heads != 0)
    return invalid_argument("config.json: vision_config.hidden_size " + std::to_string(v.hidden_size) +
                            " is not a multiple of num_attention_heads " + std::to_string(v.n_heads));
  if (v.image_size % v.patch_size != 0)
    return invalid_argument("config.json: vision_config.image_size " + std::to_string(v.image_size) +
                            " is not a multiple of patch_size " + std::to_string(v.patch_size));
  const int side = v.tokens_per_side();
  if (tokens <= 0 || side * side != tokens || v.patches_per_side() % side != 0)
    return invalid_argument("config.json: mm_tokens_per_image " + std::to_string(tokens) +
                            " must be a square whose side divides the " + std::to_string(v.patches_per_side()) +
                            " patches per side (image_size / patch_size)");
  if (image < 0 || image >= text_vocab)
    return unsupported("config.json: image_token_index " + std::to_string(image) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  return v;
}

}  // namespace brigade
