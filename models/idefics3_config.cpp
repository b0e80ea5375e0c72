#include "models/idefics3_config.h"

#include <filesystem>
#include <string>
#include <utility>

#include "models/config_json.h"
#include "models/llama_variants_config.h"
#include "models/mapped_file.h"

namespace brigade {

using json = nlohmann::json;

namespace {

const json& object_or_empty(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const auto it = j.find(key);
  return it == j.end() || !it->is_object() ? kEmpty : *it;
}

}  // namespace

bool is_idefics3(const json& j) {
  return config_names_class(j, {"Idefics3ForConditionalGeneration", "SmolVLMForConditionalGeneration"},
                            {"idefics3", "smolvlm"});
}

Expected<json> idefics3_text_config(const json& j) {
  const auto it = j.find("text_config");
  if (it != j.end() && !it->is_null() && !it->is_object()) return corrupt("config.json: text_config is not an object");
  json wrapper = j;
  if (it == j.end() || it->is_null()) wrapper["text_config"] = json::object();
  // LlamaConfig's defaults, with the rms_norm_eps both wrappers give their sub-config.
  json defaults = {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008},
                   {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"max_position_embeddings", 2048},
                   {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"hidden_act", "silu"}};
  const char* wrapper_name = config_model_type(j) == "smolvlm" ? "SmolVLMForConditionalGeneration"
                                                        : "Idefics3ForConditionalGeneration";
  return wrapped_text_config(wrapper, wrapper_name, std::move(defaults), "llama", "LlamaForCausalLM", /*tie=*/false);
}

Status read_siglip_vision_config(const json& j, VisionConfig& v) {
  if (const auto it = j.find("vision_config"); it != j.end() && !it->is_null() && !it->is_object())
    return corrupt("config.json: vision_config is not an object");
  const json& c = object_or_empty(j, "vision_config");
  v.temporal_patch = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_hidden_layers", v.n_layers, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_attention_heads", v.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "image_size", v.image_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
  BRIGADE_RETURN_IF_ERROR(read_float(c, "layer_norm_eps", v.eps));
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_act", v.hidden_act));
  if (v.hidden_act != "gelu" && v.hidden_act != "gelu_pytorch_tanh" && v.hidden_act != "quick_gelu")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act +
                       "'; supported: gelu, gelu_pytorch_tanh, quick_gelu");
  int channels = 3;
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_channels", channels, false));
  if (channels != 3) return unsupported("config.json: vision_config.num_channels " + std::to_string(channels) + "; supported: 3");
  return check_vit_sizes(v, /*partial_patches=*/true);
}

Expected<VisionConfig> read_idefics3_vision(const json& j, int text_vocab) {
  VisionConfig v;
  v.kind = VisionKind::idefics3;
  v.hidden_size = 1152, v.intermediate_size = 3072, v.n_layers = 12, v.n_heads = 16;
  v.image_size = 224, v.patch_size = 32, v.eps = 1e-6f, v.hidden_act = "gelu_pytorch_tanh";
  BRIGADE_RETURN_IF_ERROR(read_siglip_vision_config(j, v));
  v.merge = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "scale_factor", v.merge, false));
  if (v.merge < 1 || v.patches_per_side() % v.merge != 0)
    return unsupported("config.json: scale_factor " + std::to_string(v.merge) + " must divide the " +
                       std::to_string(v.patches_per_side()) + " patches of a tile's side (vision_config.image_size / patch_size)");
  v.image_token = 128257;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_id", v.image_token, false));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_id " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  v.final_norm = true;  // post_layernorm shapes last_hidden_state, what the connector reads
  return v;
}

Expected<std::optional<ProcessorConfigFile>> read_processor_config_file(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
  const fs::path file = dir / "processor_config.json";
  if (!fs::exists(file, ec)) return std::optional<ProcessorConfigFile>();
  BRIGADE_ASSIGN_OR_RETURN(const std::string text, read_text_file(file.string()));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(file.string() + ": not a JSON object");
  return std::optional<ProcessorConfigFile>(ProcessorConfigFile{file.string(), std::move(j)});
}

Status check_idefics3_image_seq_len(const std::string& model_path, int tile_tokens) {
  BRIGADE_ASSIGN_OR_RETURN(const std::optional<ProcessorConfigFile> found, read_processor_config_file(model_path));
  if (!found) return Status::ok();
  const std::string& file = found->file;
  const auto it = found->root.find("image_seq_len");
  if (it == found->root.end() || it->is_null()) return Status::ok();
  if (!it->is_number_integer()) return corrupt(file + ": image_seq_len must be an integer");
  if (it->get<int64_t>() != tile_tokens)
    return invalid_argument(file + ": image_seq_len " + it->dump() + " is not the vision tower's " +
                            std::to_string(tile_tokens) +
                            " tokens a tile ((vision_config.image_size / patch_size / scale_factor)^2)");
  return Status::ok();
}

std::map<std::string, RawTensor> idefics3_tensors(std::map<std::string, RawTensor> tensors) {
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : tensors) {
    std::string to;
    for (const auto& [prefix, as] : {std::pair{"model.text_model.", "model."}, {"model.vision_model.", "vision_model."},
                                     {"model.connector.", "connector."}})
      if (to.empty() && name.starts_with(prefix)) to = as + name.substr(std::string(prefix).size());
    if (name == "lm_head.weight") to = name;
    if (to.empty()) continue;
    if (to == "vision_model.embeddings.patch_embedding.weight" && t.shape.size() == 4)
      t.shape = {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};
    t.name = to;
    out.emplace(to, std::move(t));
  }
  return out;
}

}  // namespace brigade
