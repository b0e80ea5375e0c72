#include "models/vision_config.h"

#include <array>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "models/config_json.h"

namespace brigade {

using json = nlohmann::json;

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

namespace {

// The first of a field's names that the config has (transformers' attribute_map aliases:
// num_heads / num_attention_heads, depth / num_hidden_layers, in_channels / in_chans).
Status read_int_alias(const json& c, std::initializer_list<const char*> keys, int& out) {
  for (const char* key : keys)
    if (c.contains(key) && !c[key].is_null()) return read_int(c, key, out, false);
  return Status::ok();
}

// A list of block indices (fullatt_block_indexes, deepstack_visual_indexes), when present.
Status read_blocks(const json& c, const char* key, std::vector<int>& out) {
  const auto it = c.find(key);
  if (it == c.end() || it->is_null()) return Status::ok();
  if (!it->is_array())
    return corrupt(std::string("config.json: vision_config.") + key + " must be a list of block indices");
  out.clear();
  for (const json& b : *it) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > INT32_MAX)
      return corrupt(std::string("config.json: vision_config.") + key + " holds " + b.dump() +
                     "; block indices are integers >= 0");
    out.push_back(b.get<int>());
  }
  return Status::ok();
}

// Qwen2VLVisionConfig: embed_dim is the tower's width, hidden_size the merger's output.
Status read_qwen2_vl_tower(const json& c, VisionConfig& v) {
  v.n_layers = 32, v.hidden_size = 1280, v.out_hidden_size = 3584, v.n_heads = 16, v.hidden_act = "quick_gelu";
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"depth", "num_hidden_layers"}, v.n_layers));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "embed_dim", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.out_hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"num_heads", "num_attention_heads"}, v.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  float ratio = 4.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(c, "mlp_ratio", ratio));
  if (!(ratio > 0.0f)) return invalid_argument("config.json: vision_config.mlp_ratio must be positive");
  v.intermediate_size = static_cast<int>(static_cast<double>(v.hidden_size) * ratio);  // int(embed_dim * mlp_ratio)
  if (v.hidden_act != "quick_gelu")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act + "'; supported: quick_gelu");
  return Status::ok();
}

// Qwen2_5_VLVisionConfig.
Status read_qwen2_5_vl_tower(const json& c, VisionConfig& v) {
  v.n_layers = 32, v.hidden_size = 3584, v.intermediate_size = 3420, v.out_hidden_size = 3584, v.n_heads = 16;
  v.window_size = 112, v.fullatt_blocks = {7, 15, 23, 31}, v.hidden_act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"depth", "num_hidden_layers"}, v.n_layers));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "out_hidden_size", v.out_hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"num_heads", "num_attention_heads"}, v.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "window_size", v.window_size, false));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  BRIGADE_RETURN_IF_ERROR(read_blocks(c, "fullatt_block_indexes", v.fullatt_blocks));
  if (v.hidden_act != "silu")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act + "'; supported: silu");
  return Status::ok();
}

// The 2D rotary's theta: rope_parameters.rope_theta, else rope_theta, else v's; its rope_type
// must be axial (or default, which transformers makes axial).
Status read_axial_rope(const json& c, VisionConfig& v) {
  BRIGADE_RETURN_IF_ERROR(read_float(c, "rope_theta", v.rope_theta));
  const auto rope = c.find("rope_parameters");
  if (rope != c.end() && !rope->is_null()) {
    if (!rope->is_object()) return corrupt("config.json: vision_config.rope_parameters is not an object");
    BRIGADE_RETURN_IF_ERROR(read_float(*rope, "rope_theta", v.rope_theta));
    std::string type = "axial";
    BRIGADE_RETURN_IF_ERROR(read_string(*rope, "rope_type", type));
    if (type != "axial" && type != "default")
      return unsupported("config.json: vision_config.rope_parameters.rope_type '" + type + "'; supported: axial");
  }
  if (!(v.rope_theta > 0.0f))
    return invalid_argument("config.json: vision_config.rope_parameters.rope_theta must be positive");
  return Status::ok();
}

// Qwen3VLVisionConfig. The 2D rotary's theta is rope_parameters.rope_theta, else rope_theta,
// else 10000 (its rope_type must be axial, or default, which transformers makes axial).
Status read_qwen3_vl_tower(const json& c, VisionConfig& v) {
  v.n_layers = 27, v.hidden_size = 1152, v.intermediate_size = 4304, v.out_hidden_size = 3584, v.n_heads = 16;
  v.patch_size = 16, v.num_position_embeddings = 2304, v.deepstack_layers = {8, 16, 24};
  v.hidden_act = "gelu_pytorch_tanh";
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"depth", "num_hidden_layers"}, v.n_layers));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "out_hidden_size", v.out_hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"num_heads", "num_attention_heads"}, v.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_position_embeddings", v.num_position_embeddings, false));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  BRIGADE_RETURN_IF_ERROR(read_blocks(c, "deepstack_visual_indexes", v.deepstack_layers));
  BRIGADE_RETURN_IF_ERROR(read_axial_rope(c, v));
  if (v.hidden_act != "gelu_pytorch_tanh")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act + "'; supported: gelu_pytorch_tanh");
  return Status::ok();
}

Status check_qwen_tower(const VisionConfig& v, bool qwen2_vl) {
  const std::pair<const char*, int> sizes[] = {
      {"depth", v.n_layers}, {qwen2_vl ? "embed_dim" : "hidden_size", v.hidden_size},
      {qwen2_vl ? "embed_dim * mlp_ratio" : "intermediate_size", v.intermediate_size},
      {qwen2_vl ? "hidden_size" : "out_hidden_size", v.out_hidden_size}, {"num_heads", v.n_heads},
      {"patch_size", v.patch_size}, {"spatial_merge_size", v.merge}, {"temporal_patch_size", v.temporal_patch}};
  for (const auto& [name, value] : sizes)
    if (value <= 0)
      return invalid_argument(std::string("config.json: vision_config.") + name + " must be positive; got " +
                              std::to_string(value));
  if (v.hidden_size % v.n_heads != 0 || v.head_dim() % 4 != 0)
    return invalid_argument(std::string("config.json: vision_config.") + (qwen2_vl ? "embed_dim " : "hidden_size ") +
                            std::to_string(v.hidden_size) + " / num_heads " + std::to_string(v.n_heads) +
                            " must be a whole head_dim that is a multiple of 4 (the 2D rotary takes a quarter "
                            "per axis)");
  for (int b : v.fullatt_blocks)
    if (b >= v.n_layers)
      return invalid_argument("config.json: vision_config.fullatt_block_indexes holds " + std::to_string(b) +
                              "; the blocks are [0, depth = " + std::to_string(v.n_layers) + ")");
  if (v.kind == VisionKind::qwen2_5_vl && v.window_size < v.merge * v.patch_size)
    return invalid_argument("config.json: vision_config.window_size " + std::to_string(v.window_size) +
                            " is smaller than one merged token (spatial_merge_size * patch_size = " +
                            std::to_string(v.merge * v.patch_size) + " pixels)");
  return Status::ok();
}

// Qwen3-VL's position grid and DeepStack taps. The taps must increase: transformers collects the
// features in block order and the language model adds the k-th collected after its layer k,
// while tap k's merger is deepstack_merger_list[k] (the two orders agree only so).
Status check_qwen3_vl_tower(const VisionConfig& v) {
  const int n = v.num_position_embeddings, side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(n))));
  if (n <= 0 || side * side != n)
    return invalid_argument("config.json: vision_config.num_position_embeddings " + std::to_string(n) +
                            " must be a square (a side x side grid of learned position embeddings)");
  for (size_t k = 0; k < v.deepstack_layers.size(); ++k) {
    const int b = v.deepstack_layers[k];
    if (b >= v.n_layers || (k > 0 && b <= v.deepstack_layers[k - 1]))
      return invalid_argument("config.json: vision_config.deepstack_visual_indexes holds " + std::to_string(b) +
                              " at " + std::to_string(k) + "; they must be increasing blocks of [0, depth = " +
                              std::to_string(v.n_layers) + "), none repeated");
  }
  return Status::ok();
}

// The image token and the ids around an image (keys: image, start, end; the values in v are
// the defaults): the top level's, else text_config's (where transformers 5 may keep them).
Status read_image_tokens(const json& j, const std::array<const char*, 3>& keys, VisionConfig& v) {
  const auto text = j.find("text_config");
  for (auto [key, out] : {std::pair{keys[0], &v.image_token}, {keys[1], &v.boi_token}, {keys[2], &v.eoi_token}}) {
    if (text != j.end() && text->is_object()) BRIGADE_RETURN_IF_ERROR(read_int(*text, key, *out, false));
    BRIGADE_RETURN_IF_ERROR(read_int(j, key, *out, false));
  }
  return Status::ok();
}

// image_token_id, vision_start_token_id and vision_end_token_id, Qwen2VLConfig's defaults.
Status read_qwen_tokens(const json& j, VisionConfig& v) {
  v.image_token = 151655, v.boi_token = 151652, v.eoi_token = 151653;
  return read_image_tokens(j, {"image_token_id", "vision_start_token_id", "vision_end_token_id"}, v);
}

}  // namespace

Expected<VisionConfig> read_qwen_vl_vision(const json& j, int text_vocab, VisionKind kind) {
  BRIGADE_CHECK(kind == VisionKind::qwen2_vl || kind == VisionKind::qwen2_5_vl || kind == VisionKind::qwen3_vl,
                "read_qwen_vl_vision reads a Qwen tower");
  const bool qwen2_vl = kind == VisionKind::qwen2_vl;
  VisionConfig v;
  v.kind = kind;
  v.eps = 1e-6f;  // the blocks' and the merger's norms
  v.patch_size = 14, v.merge = 2, v.temporal_patch = 2;
  const auto it = j.find("vision_config");
  const json c = it == j.end() || it->is_null() ? json::object() : *it;
  if (!c.is_object()) return corrupt("config.json: vision_config is not an object");
  BRIGADE_RETURN_IF_ERROR(qwen2_vl                          ? read_qwen2_vl_tower(c, v)
                          : kind == VisionKind::qwen2_5_vl ? read_qwen2_5_vl_tower(c, v)
                                                           : read_qwen3_vl_tower(c, v));
  int channels = 3;
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"in_channels", "in_chans"}, channels));
  if (channels != 3)
    return unsupported("config.json: vision_config.in_channels " + std::to_string(channels) + "; supported: 3");
  BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "spatial_merge_size", v.merge, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "temporal_patch_size", v.temporal_patch, false));
  BRIGADE_RETURN_IF_ERROR(check_qwen_tower(v, qwen2_vl));
  if (kind == VisionKind::qwen3_vl) BRIGADE_RETURN_IF_ERROR(check_qwen3_vl_tower(v));
  BRIGADE_RETURN_IF_ERROR(read_qwen_tokens(j, v));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_id " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  return v;
}

namespace {

// Mistral3Config's projector fields: the feature layer (the last block's output only), the
// projector's activation and biases.
Status read_mistral3_projector(const json& j, VisionConfig& v) {
  const auto layer = j.find("vision_feature_layer");
  if (layer != j.end() && !layer->is_null() &&
      !(layer->is_number_integer() && (layer->get<int64_t>() == -1 || layer->get<int64_t>() == v.n_layers)))
    return unsupported("config.json: vision_feature_layer " + layer->dump() + "; supported: -1 (the last block's "
                       "output, hidden_states[" + std::to_string(v.n_layers) + "])");
  std::string act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "projector_hidden_act", act));
  if (act != "gelu") return unsupported("config.json: projector_hidden_act '" + act + "'; supported: gelu");
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "multimodal_projector_bias", v.projector_bias));
  return Status::ok();
}

}  // namespace

Expected<VisionConfig> read_pixtral_vision(const json& j, int text_vocab, int text_hidden, float text_eps) {
  VisionConfig v;  // PixtralVisionConfig's defaults as Mistral3Config overrides them
  v.kind = VisionKind::pixtral;
  v.eps = 1e-5f;  // PixtralRMSNorm(eps=1e-5) in ln_pre and every block
  v.n_layers = 24, v.hidden_size = 1024, v.intermediate_size = 4096, v.n_heads = 16, v.patch_size = 14;
  v.hidden_act = "gelu", v.merge = 2, v.out_hidden_size = text_hidden, v.projector_eps = text_eps;
  const auto it = j.find("vision_config");
  const json c = it == j.end() || it->is_null() ? json::object() : *it;
  if (!c.is_object()) return corrupt("config.json: vision_config is not an object");
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_hidden_layers", v.n_layers, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_attention_heads", v.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "spatial_merge_size", v.merge, false));
  BRIGADE_RETURN_IF_ERROR(read_axial_rope(c, v));
  int channels = 3, head_dim = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_channels", channels, false));
  if (channels != 3)
    return unsupported("config.json: vision_config.num_channels " + std::to_string(channels) + "; supported: 3");
  // PixtralMLP gates with ACT2FN[hidden_act]; the real checkpoints say silu (the class default,
  // gelu, is what a config without the field gets, and is refused here).
  if (v.hidden_act != "silu")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act + "'; supported: silu");
  const std::pair<const char*, int> sizes[] = {{"num_hidden_layers", v.n_layers}, {"hidden_size", v.hidden_size},
                                               {"intermediate_size", v.intermediate_size},
                                               {"num_attention_heads", v.n_heads}, {"patch_size", v.patch_size}};
  for (const auto& [name, value] : sizes)
    if (value <= 0)
      return invalid_argument(std::string("config.json: vision_config.") + name + " must be positive; got " +
                              std::to_string(value));
  if (v.merge <= 0) return invalid_argument("config.json: spatial_merge_size must be positive");
  if (v.hidden_size % v.n_heads != 0 || v.head_dim() % 4 != 0)
    return invalid_argument("config.json: vision_config.hidden_size " + std::to_string(v.hidden_size) +
                            " / num_attention_heads " + std::to_string(v.n_heads) +
                            " must be a whole head_dim that is a multiple of 4 (the 2D rotary takes a quarter per axis)");
  BRIGADE_RETURN_IF_ERROR(read_int(c, "head_dim", head_dim, false));
  if (head_dim != 0 && head_dim != v.head_dim())  // PixtralVisionConfig sets it to hidden / heads
    return invalid_argument("config.json: vision_config.head_dim " + std::to_string(head_dim) +
                            " differs from hidden_size / num_attention_heads = " + std::to_string(v.head_dim()));
  BRIGADE_RETURN_IF_ERROR(read_mistral3_projector(j, v));
  v.image_token = 10;  // Mistral3Config.image_token_index ([IMG] in tekken)
  v.image_break_token = 12, v.eoi_token = 13;  // tekken's [IMG_BREAK], [IMG_END]
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_index", v.image_token, false));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_index " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  return v;
}

Expected<VisionConfig> read_glm4v_vision(const json& j, int text_vocab, bool moe) {
  VisionConfig v;  // Glm4vVisionConfig's defaults (GLM-4.1V-9B's tower)
  v.kind = VisionKind::glm4v;
  v.n_layers = 24, v.hidden_size = 1536, v.n_heads = 12, v.merger_intermediate = 13696, v.out_hidden_size = 4096;
  v.patch_size = 14, v.merge = 2, v.temporal_patch = 2, v.eps = 1e-5f, v.hidden_act = "silu", v.qkv_bias = false;
  v.projector_eps = 1e-5f;  // Glm4vVisionPatchMerger's LayerNorm(dim): torch's default eps
  int image_size = 336, channels = 3;
  const auto it = j.find("vision_config");
  const json c = it == j.end() || it->is_null() ? json::object() : *it;
  if (!c.is_object()) return corrupt("config.json: vision_config is not an object");
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"depth", "num_hidden_layers"}, v.n_layers));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"num_heads", "num_attention_heads"}, v.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.merger_intermediate, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "out_hidden_size", v.out_hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "image_size", image_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "spatial_merge_size", v.merge, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "temporal_patch_size", v.temporal_patch, false));
  BRIGADE_RETURN_IF_ERROR(read_int_alias(c, {"in_channels", "in_chans"}, channels));
  BRIGADE_RETURN_IF_ERROR(read_float(c, "rms_norm_eps", v.eps));
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "attention_bias", v.qkv_bias));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  BRIGADE_RETURN_IF_ERROR(read_axial_rope(c, v));
  if (v.hidden_act != "silu")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act + "'; supported: silu");
  if (channels != 3)
    return unsupported("config.json: vision_config.in_channels " + std::to_string(channels) + "; supported: 3");
  v.intermediate_size = v.out_hidden_size;  // Glm4VisionMlp is out_hidden_size wide
  BRIGADE_RETURN_IF_ERROR(check_qwen_tower(v, false));
  if (v.merger_intermediate <= 0 || !(v.eps > 0.0f))
    return invalid_argument("config.json: vision_config.intermediate_size and rms_norm_eps must be positive");
  if (image_size <= 0 || image_size % v.patch_size != 0)
    return invalid_argument("config.json: vision_config.image_size " + std::to_string(image_size) +
                            " must be a positive multiple of patch_size " + std::to_string(v.patch_size) +
                            " (a square grid of learned position embeddings)");
  v.num_position_embeddings = (image_size / v.patch_size) * (image_size / v.patch_size);
  v.image_token = moe ? 151363 : 151343, v.boi_token = 151339, v.eoi_token = 151340;  // Glm4v(Moe)Config's
  BRIGADE_RETURN_IF_ERROR(read_image_tokens(j, {"image_token_id", "image_start_token_id", "image_end_token_id"}, v));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_id " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  return v;
}

Status check_vit_sizes(const VisionConfig& v, bool partial_patches) {
  const std::pair<const char*, int> sizes[] = {{"hidden_size", v.hidden_size}, {"intermediate_size", v.intermediate_size},
                                               {"num_hidden_layers", v.n_layers}, {"num_attention_heads", v.n_heads},
                                               {"image_size", v.image_size}, {"patch_size", v.patch_size}};
  for (const auto& [name, value] : sizes)
    if (value <= 0)
      return invalid_argument(std::string("config.json: vision_config.") + name + " must be positive; got " +
                              std::to_string(value));
  if (v.hidden_size % v.n_heads != 0)
    return invalid_argument("config.json: vision_config.hidden_size " + std::to_string(v.hidden_size) +
                            " is not a whole number of num_attention_heads " + std::to_string(v.n_heads));
  if (partial_patches ? v.image_size < v.patch_size : v.image_size % v.patch_size != 0)
    return invalid_argument("config.json: vision_config.image_size " + std::to_string(v.image_size) +
                            (partial_patches ? " is smaller than one patch of " : " is not whole patches of ") +
                            std::to_string(v.patch_size));
  if (!(v.eps > 0.0f)) return invalid_argument("config.json: vision_config.layer_norm_eps must be positive");
  return Status::ok();
}

}  // namespace brigade
