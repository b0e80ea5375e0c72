#include "models/paligemma_config.h"

#include <string>
#include <utility>

#include "models/config_json.h"
#include "models/idefics3_config.h"
#include "models/llama_variants_config.h"

namespace brigade {

using json = nlohmann::json;

bool is_paligemma(const json& j) { return config_names_class(j, {"PaliGemmaForConditionalGeneration"}, {"paligemma"}); }

Expected<json> paligemma_text_config(const json& j) {
  const auto it = j.find("text_config");
  if (it != j.end() && !it->is_null() && !it->is_object()) return corrupt("config.json: text_config is not an object");
  const bool absent = it == j.end() || it->is_null();
  json text = absent ? json::object() : *it;
  const std::string type = config_model_type(text, "gemma");
  json defaults;
  const char* text_class = nullptr;
  if (type == "gemma") {  // GemmaConfig
    defaults = {{"vocab_size", 256000}, {"hidden_size", 3072}, {"intermediate_size", 24576},
                {"num_hidden_layers", 28}, {"num_attention_heads", 16}, {"num_key_value_heads", 16},
                {"head_dim", 256}, {"max_position_embeddings", 8192}, {"rms_norm_eps", 1e-6},
                {"rope_theta", 10000.0}};
    text_class = "GemmaForCausalLM";
  } else if (type == "gemma2") {  // Gemma2Config (read_gemma reads its softcaps, window and layer types)
    defaults = {{"vocab_size", 256000}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                {"head_dim", 256}, {"max_position_embeddings", 8192}, {"rms_norm_eps", 1e-6},
                {"rope_theta", 10000.0}};
    text_class = "Gemma2ForCausalLM";
  } else {
    return unsupported("config.json: text_config.model_type '" + type +
                       "' of PaliGemmaForConditionalGeneration is not supported; supported: gemma, gemma2");
  }
  if (absent)  // PaliGemmaConfig's text_config defaults (PaliGemma 1's 3B)
    defaults.update(json{{"hidden_size", 2048}, {"num_hidden_layers", 18}, {"intermediate_size", 16384},
                         {"num_attention_heads", 8}, {"num_key_value_heads", 1}, {"vocab_size", 257152}});
  text.erase("use_bidirectional_attention");
  json wrapper = j;
  wrapper["text_config"] = std::move(text);
  return wrapped_text_config(wrapper, "PaliGemmaForConditionalGeneration", std::move(defaults), type.c_str(), text_class,
                             /*tie=*/true);
}

Expected<VisionConfig> read_paligemma_vision(const json& j, int text_vocab, int text_hidden) {
  VisionConfig v;
  v.kind = VisionKind::paligemma;
  v.eps = 1e-6f, v.hidden_act = "gelu_pytorch_tanh";
  const auto it = j.find("vision_config");
  if (it == j.end() || it->is_null())  // PaliGemmaConfig's tower (SigLIP so400m/14 at 224 pixels, its MLP 4096)
    v.hidden_size = 1152, v.intermediate_size = 4096, v.n_layers = 27, v.n_heads = 16, v.image_size = 224, v.patch_size = 14;
  else  // SiglipVisionConfig's defaults for what vision_config leaves out
    v.hidden_size = 768, v.intermediate_size = 3072, v.n_layers = 12, v.n_heads = 12, v.image_size = 224, v.patch_size = 16;
  BRIGADE_RETURN_IF_ERROR(read_siglip_vision_config(j, v));
  if (v.hidden_act != "gelu_pytorch_tanh")
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act +
                       "' of PaliGemmaForConditionalGeneration; supported: gelu_pytorch_tanh");
  if (v.image_size % v.patch_size != 0)
    return invalid_argument("config.json: vision_config.image_size " + std::to_string(v.image_size) +
                            " is not a multiple of patch_size " + std::to_string(v.patch_size));
  v.tokens_per_image = v.n_patches();
  v.temporal_patch = 0;
  int projection = 2048;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "projection_dim", projection, false));
  if (projection != text_hidden)
    return invalid_argument("config.json: projection_dim " + std::to_string(projection) +
                            " is not the language model's hidden_size " + std::to_string(text_hidden));
  v.image_token = 256000;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_index", v.image_token, false));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return unsupported("config.json: image_token_index " + std::to_string(v.image_token) +
                       " lies outside the text vocabulary of " + std::to_string(text_vocab));
  return v;
}

}  // namespace brigade
