#include "models/llama_variants_config.h"

#include <cmath>

#include "models/config_json.h"
#include "models/gemma_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// The sliding layers of OLMo 3 and EXAONE 4: layer_types, or without it EXAONE's
// sliding_window_pattern as a string of L (local) and G (global) repeating over the layers, or
// an integer n (every n-th layer global), as read_layer_types reads it.
Status read_sliding_layers(const json& j, ModelConfig& c, int default_pattern) {
  auto pattern = j.find("sliding_window_pattern");
  if (j.contains("layer_types") || pattern == j.end() || !pattern->is_string())
    return read_layer_types(j, c, default_pattern);
  const std::string p = pattern->get<std::string>();
  if (p.empty() || p.find_first_not_of("LG") != std::string::npos)
    return invalid_argument("config.json: sliding_window_pattern '" + p + "' must be letters L (sliding) and G (full)");
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (size_t l = 0; l < c.sliding_layers.size(); ++l) c.sliding_layers[l] = p[l % p.size()] == 'L';
  return Status::ok();
}

Status read_olmo(const json& j, ModelConfig& c) {
  c.qkv_bias = c.o_bias = c.attention_bias;  // Olmo2Attention: attention_bias on q/k/v and o
  c.qk_norm = c.qk_norm_whole = true;
  c.post_norms = true;
  if (c.arch == "olmo2") {
    c.sliding_window = 0;
    return Status::ok();
  }
  // OLMo 3: Olmo3Config's window (4096) and layer types (every 4th layer full) when absent; the
  // sliding layers rotate unscaled (a flat rope_scaling is the full layers'), or as
  // transformers 5's rope_parameters {"full_attention": ..., "sliding_attention": ...} say.
  c.sliding_window = 4096;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 4));
  c.rope_local_theta = c.rope_theta;
  return read_rope_by_layer_type(j, c);
}

Status read_exaone4(const json& j, ModelConfig& c) {
  c.qk_norm = true;  // Exaone4Attention: per-head q/k norms, no biases
  c.post_norms = true;
  c.sliding_window = 4096;  // Exaone4Config's default; null = every layer full, all with RoPE
  if (auto it = j.find("sliding_window"); it != j.end() && it->is_null()) {
    c.sliding_window = 0;
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (c.sliding_window <= 0) return invalid_argument("config.json: sliding_window must be > 0 or null");
  BRIGADE_RETURN_IF_ERROR(read_sliding_layers(j, c, 4));
  // With a window, the full-attention layers have no positions ("global NoPE").
  c.nope_layers.assign(c.sliding_layers.size(), false);
  for (size_t l = 0; l < c.sliding_layers.size(); ++l) c.nope_layers[l] = !c.sliding_layers[l];
  return Status::ok();
}

}  // namespace

std::string llama_variant_arch(const std::string& class_name, const std::string& model_type) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"Olmo2ForCausalLM", "olmo2"},       {"Olmo3ForCausalLM", "olmo3"},
      {"Exaone4ForCausalLM", "exaone4"},   {"Glm4ForCausalLM", "glm4"},
      {"SeedOssForCausalLM", "seed_oss"},  {"Ernie4_5ForCausalLM", "ernie4_5"},
      {"HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"}, {"OlmoeForCausalLM", "olmoe"},
      {"ApertusForCausalLM", "apertus"},          {"Ernie4_5_MoeForCausalLM", "ernie4_5_moe"}};
  for (const auto& [cls, type] : kNames)
    if (class_name == cls || (class_name.empty() && model_type == type)) return type;
  return {};
}

bool is_llama_variant(const std::string& arch) { return !llama_variant_arch("", arch).empty(); }

bool is_mistral3(const json& j) {
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty() && (*a)[0].is_string())
    return (*a)[0].get<std::string>() == "Mistral3ForConditionalGeneration";
  auto t = j.find("model_type");
  return t != j.end() && t->is_string() && t->get<std::string>() == "mistral3";
}

Expected<json> mistral3_text_config(const json& j) {
  auto it = j.find("text_config");
  if (it == j.end() || !it->is_object())
    return corrupt("config.json: Mistral3ForConditionalGeneration without a text_config object; brigade serves its "
                   "language model (text_config) text-only");
  // Mistral3Config's text_config defaults (Mistral Small 3.1's shape), which configs may leave out.
  json t = {{"head_dim", 128},        {"hidden_size", 5120},        {"intermediate_size", 32768},
            {"max_position_embeddings", 131072}, {"num_attention_heads", 32}, {"num_hidden_layers", 40},
            {"num_key_value_heads", 8}, {"rms_norm_eps", 1e-5},      {"rope_theta", 1000000000.0},
            {"sliding_window", nullptr}, {"vocab_size", 131072},     {"model_type", "mistral"}};
  t.update(*it);
  const std::string type = t["model_type"].is_string() ? t["model_type"].get<std::string>() : std::string();
  if (type != "mistral")
    return unsupported("config.json: text_config.model_type '" + type + "' of Mistral3ForConditionalGeneration is not "
                       "supported; supported: mistral");
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype"})
    if (j.contains(key) && !it->contains(key)) t[key] = j[key];
  t["tie_word_embeddings"] = true;  // Mistral3Config's default, the top level's when it says
  if (auto tie = j.find("tie_word_embeddings"); tie != j.end() && tie->is_boolean()) t["tie_word_embeddings"] = *tie;
  t["architectures"] = json::array({"MistralForCausalLM"});
  return t;
}

Expected<double> read_ntk_alpha(const json& scaling) {
  auto alpha = scaling.find("alpha");
  if (alpha == scaling.end() || alpha->is_null()) return 0.0;
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (auto t = scaling.find(key); t != scaling.end() && t->is_string()) type = t->get<std::string>();
  if (type != "dynamic") return 0.0;
  if (!alpha->is_number() || !(alpha->get<double>() > 0.0) || !std::isfinite(alpha->get<double>()))
    return invalid_argument("config.json: rope scaling 'alpha' must be a positive number");
  return alpha->get<double>();
}

Status stretch_rope_base(double alpha, ModelConfig& c) {
  if (c.head_dim <= 2) return invalid_argument("config.json: NTK-alpha RoPE needs head_dim > 2");
  const double d = c.head_dim;
  c.rope_theta = static_cast<float>(static_cast<double>(c.rope_theta) * std::pow(alpha, d / (d - 2.0)));
  return Status::ok();
}

namespace {

// Apertus: per-head q/k norms, q/k/v/o biases with attention_bias, the ungated xIELU MLP
// (hidden_act xielu, ApertusConfig's default; another is refused by name), and without any RoPE
// field ApertusConfig's default: llama3 scaling x8 over 8192 positions on base 1.2e7.
Status read_apertus(const json& j, ModelConfig& c) {
  std::string act = "xielu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "xielu")
    return unsupported("config.json: hidden_act '" + act + "' is not supported for apertus; supported: xielu");
  c.mlp_activation = MlpActivation::xielu;
  c.qk_norm = true;
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.sliding_window = 0;
  if (j.contains("rope_theta") || j.contains("rope_scaling") || j.contains("rope_parameters")) return Status::ok();
  c.rope_theta = 12000000.0f;
  c.rope_scaling.type = RopeScalingType::llama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position = 8192;
  return Status::ok();
}

}  // namespace

Status read_llama_variant(const json& j, ModelConfig& c) {
  if (c.arch == "apertus") return read_apertus(j, c);
  if (c.arch == "olmo2" || c.arch == "olmo3") return read_olmo(j, c);
  if (c.arch == "olmoe") {  // OlmoeAttention: pre-norm layers, OLMo 2's whole-projection q/k norms
    if (auto clip = j.find("clip_qkv"); clip != j.end() && !clip->is_null())
      return unsupported("config.json: clip_qkv (clamping q, k and v) is not supported for olmoe; OLMoE's released "
                         "checkpoints have it null");
    c.qkv_bias = c.o_bias = c.attention_bias;
    c.qk_norm = c.qk_norm_whole = true;
    c.sliding_window = 0;
    return Status::ok();
  }
  if (c.arch == "exaone4") return read_exaone4(j, c);
  c.sliding_window = 0;  // none of the others slides
  if (c.arch == "glm4") {  // Glm4Attention: q/k/v biases (attention_bias, true by default), o without
    c.attention_bias = true;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
    c.qkv_bias = c.attention_bias;
    c.sandwich_norms = true;
    c.rope_style = RopeStyle::interleaved;
    return Status::ok();
  }
  if (c.arch == "seed_oss") {  // SeedOssAttention: q/k/v (attention_bias, true by default) and o biases apart
    c.attention_bias = true;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
    c.qkv_bias = c.attention_bias;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_out_bias", c.o_bias));
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
    return Status::ok();
  }
  if (c.arch == "ernie4_5" || c.arch == "ernie4_5_moe") {  // use_bias on q/k/v, o and the MLP; RoPE of adjacent pairs
    bool bias = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bias", bias));
    if (bias && c.arch == "ernie4_5_moe")  // Ernie4_5_MoeMLP's shared experts would carry them too
      return unsupported("config.json: use_bias = true is not supported for ernie4_5_moe (biased shared experts); "
                         "ERNIE 4.5's MoE checkpoints have it false");
    c.qkv_bias = c.o_bias = c.mlp_bias = bias;
    c.rope_style = RopeStyle::interleaved;
    return Status::ok();
  }
  // hunyuan_v1_dense: q/k/v and o biases (attention_bias); per-head norms after RoPE.
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.qk_norm = c.qk_norm_after_rope = true;
  return Status::ok();
}

}  // namespace brigade
