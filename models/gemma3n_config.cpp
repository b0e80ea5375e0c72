#include "models/gemma3n_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "models/config_json.h"

namespace brigade {

using json = nlohmann::json;

namespace {

bool is_multimodal(const json& j) {
  const std::string a = config_architecture(j);
  return a == "Gemma3nForConditionalGeneration" || (a.empty() && config_model_type(j) == "gemma3n");
}

// Gemma3nTextConfig's defaults (transformers) under the fields config.json gives.
json with_text_defaults(const json& t) {
  json d = {{"vocab_size", 262400},        {"hidden_size", 2048},
            {"intermediate_size", 16384},  {"num_hidden_layers", 35},
            {"num_attention_heads", 8},    {"num_key_value_heads", 2},
            {"head_dim", 256},             {"max_position_embeddings", 32768},
            {"rms_norm_eps", 1e-6},        {"pad_token_id", 0},
            {"eos_token_id", 1},           {"bos_token_id", 2},
            {"sliding_window", 512},       {"final_logit_softcapping", 30.0},
            {"hidden_activation", "gelu_pytorch_tanh"}, {"tie_word_embeddings", true},
            {"vocab_size_per_layer_input", 262144},     {"hidden_size_per_layer_input", 256},
            {"altup_active_idx", 0},       {"altup_correct_scale", true},
            {"altup_num_inputs", 4},       {"num_kv_shared_layers", 15},
            {"laurel_rank", 64}};
  for (auto& [key, value] : t.items())
    if (!value.is_null() || !d.contains(key)) d[key] = value;
  return d;
}

// A per-layer list (intermediate_size, activation_sparsity_pattern): one value for every layer,
// or a list of n_layers values.
template <class T>
Expected<std::vector<T>> per_layer(const json& t, const char* key, int n_layers) {
  const json& v = t.at(key);
  if (v.is_number()) return std::vector<T>(static_cast<size_t>(n_layers), v.get<T>());
  if (!v.is_array() || v.size() != static_cast<size_t>(n_layers))
    return invalid_argument(std::string("config.json: ") + key + " must be a number or list one value per layer (" +
                            std::to_string(n_layers) + ")");
  std::vector<T> out;
  for (const json& e : v) {
    if (!e.is_number()) return corrupt(std::string("config.json: ") + key + " must hold numbers");
    out.push_back(e.get<T>());
  }
  return out;
}

Status check_positive(const char* key, int v) {
  if (v <= 0) return invalid_argument(std::string("config.json: ") + key + " must be > 0 (got " + std::to_string(v) + ")");
  return Status::ok();
}

// The Gemma 3n fields of a text config (defaults filled) into c.gemma3n.
Status read_gemma3n_fields(const json& t, ModelConfig& c) {
  ModelConfig::Gemma3nFields& g = c.gemma3n;
  BRIGADE_RETURN_IF_ERROR(read_int(t, "altup_num_inputs", g.altup_inputs, true));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "altup_active_idx", g.altup_active, true));
  BRIGADE_RETURN_IF_ERROR(read_bool(t, "altup_correct_scale", g.altup_correct_scale));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "laurel_rank", g.laurel_rank, true));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "hidden_size_per_layer_input", g.per_layer_dim, true));
  BRIGADE_RETURN_IF_ERROR(read_int(t, "vocab_size_per_layer_input", g.per_layer_vocab, true));
  BRIGADE_RETURN_IF_ERROR(check_positive("altup_num_inputs", g.altup_inputs));
  BRIGADE_RETURN_IF_ERROR(check_positive("laurel_rank", g.laurel_rank));
  BRIGADE_RETURN_IF_ERROR(check_positive("hidden_size_per_layer_input", g.per_layer_dim));
  BRIGADE_RETURN_IF_ERROR(check_positive("vocab_size_per_layer_input", g.per_layer_vocab));
  if (g.altup_active < 0 || g.altup_active >= g.altup_inputs)
    return invalid_argument("config.json: altup_active_idx must be in [0, altup_num_inputs) (got " +
                            std::to_string(g.altup_active) + ")");
  BRIGADE_ASSIGN_OR_RETURN(g.intermediate, per_layer<int>(t, "intermediate_size", c.n_layers));
  for (int w : g.intermediate) BRIGADE_RETURN_IF_ERROR(check_positive("intermediate_size", w));
  c.intermediate_size = *std::max_element(g.intermediate.begin(), g.intermediate.end());
  if (!t.contains("activation_sparsity_pattern") || t["activation_sparsity_pattern"].is_null()) {
    const int sparse = c.n_layers > 10 ? 10 : 0;  // Gemma3nTextConfig's default
    g.sparsity.assign(static_cast<size_t>(c.n_layers), 0.0f);
    std::fill_n(g.sparsity.begin(), sparse, 0.95f);
  } else {
    BRIGADE_ASSIGN_OR_RETURN(g.sparsity, per_layer<float>(t, "activation_sparsity_pattern", c.n_layers));
  }
  for (float s : g.sparsity)
    if (!(s >= 0.0f && s < 1.0f))
      return invalid_argument("config.json: activation_sparsity_pattern values must be in [0, 1) (got " +
                              std::to_string(s) + ")");
  int n_shared = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(t, "num_kv_shared_layers", n_shared, true));
  BRIGADE_ASSIGN_OR_RETURN(g.kv_layer, shared_kv_layers(c, n_shared));
  return Status::ok();
}

// Gemma3nTextConfig's default layer_types: every fifth layer full, the others sliding.
json default_layer_types(int n_layers) {
  json types = json::array();
  for (int l = 0; l < n_layers; ++l) types.push_back((l + 1) % 5 == 0 ? "full_attention" : "sliding_attention");
  return types;
}

}  // namespace

Expected<std::vector<int>> shared_kv_layers(const ModelConfig& c, int n_shared) {
  const int n = c.n_layers, first = n - n_shared;
  if (n_shared < 0 || first < 1)
    return invalid_argument("config.json: num_kv_shared_layers must be in [0, num_hidden_layers) (got " +
                            std::to_string(n_shared) + " of " + std::to_string(n) + ")");
  std::vector<int> kv(static_cast<size_t>(n));
  for (int l = 0; l < n; ++l) {
    kv[static_cast<size_t>(l)] = l;
    if (l < first) continue;
    const bool sliding = c.layer_window(l) > 0;
    int src = first - 1;
    while (src >= 0 && (c.layer_window(src) > 0) != sliding) --src;
    if (src < 0)
      return invalid_argument(std::string("config.json: layer ") + std::to_string(l) + " shares the K/V of an earlier " +
                              (sliding ? "sliding_attention" : "full_attention") +
                              " layer (num_kv_shared_layers), but no layer before the shared ones has that type");
    kv[static_cast<size_t>(l)] = src;
  }
  return kv;
}

bool is_gemma3n(const json& j) {
  const std::string a = config_architecture(j);
  if (a == "Gemma3nForCausalLM" || a == "Gemma3nForConditionalGeneration") return true;
  const std::string m = config_model_type(j);
  return a.empty() && (m == "gemma3n_text" || m == "gemma3n");
}

Expected<ModelConfig> read_gemma3n_config(const json& j) {
  const bool multimodal = is_multimodal(j);
  json text = j;
  if (multimodal) {
    BRIGADE_ASSIGN_OR_RETURN(text, text_config_with_ids(j, "Gemma3nForConditionalGeneration",
                                                        "Gemma3nForCausalLM (model_type gemma3n_text)"));
  }
  const json t = with_text_defaults(text);
  std::string act;
  BRIGADE_RETURN_IF_ERROR(read_string(t, "hidden_activation", act));
  if (act != "gelu_pytorch_tanh")
    return unsupported("config.json: hidden_activation '" + act + "' is not supported for gemma3n; supported: "
                       "gelu_pytorch_tanh");
  bool bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(t, "attention_bias", bias));
  if (bias) return unsupported("config.json: attention_bias = true is not supported for gemma3n; set it to false");
  int n_layers = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(t, "num_hidden_layers", n_layers, true));
  BRIGADE_RETURN_IF_ERROR(check_positive("num_hidden_layers", n_layers));
  // The Gemma 3 fields through Gemma 3's reader, then what Gemma 3n does differently.
  json g3 = t;
  g3["architectures"] = json::array({"Gemma3ForCausalLM"});
  g3["model_type"] = "gemma3_text";
  g3["intermediate_size"] = 1;  // per layer in c.gemma3n.intermediate
  if (!g3.contains("layer_types") || g3["layer_types"].is_null()) g3["layer_types"] = default_layer_types(n_layers);
  g3.erase("query_pre_attn_scalar");
  BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(g3.dump()));
  c.arch = "gemma3n_text";
  c.norm_offset = 0.0f;  // Gemma3nRMSNorm scales by w
  c.attn_scale = 1.0f;   // Gemma3nTextAttention's scaling
  BRIGADE_RETURN_IF_ERROR(read_gemma3n_fields(t, c));
  if (multimodal) {
    c.multimodal_text = true;
    int vision = 262144, audio = 262272;  // Gemma3nVisionConfig's and Gemma3nAudioConfig's vocab_offset
    if (auto v = j.find("vision_config"); v != j.end() && v->is_object())
      BRIGADE_RETURN_IF_ERROR(read_int(*v, "vocab_offset", vision, false));
    if (auto a = j.find("audio_config"); a != j.end() && a->is_object())
      BRIGADE_RETURN_IF_ERROR(read_int(*a, "vocab_offset", audio, false));
    c.gemma3n.text_vocab_end = std::clamp(std::min(vision, audio), 1, c.vocab_size);
    c.vision_off = "Gemma 3n's vision (MobileNet-V5) and audio (Conformer) towers and their embedders are not "
                   "run; its language model serves text";
  }
  return c;
}

}  // namespace brigade
