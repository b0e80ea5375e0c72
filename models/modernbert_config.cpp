#include "models/modernbert_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include "models/bert_config.h"
#include "models/config_json.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 3> kArchitectures = {"ModernBertModel", "ModernBertForMaskedLM",
                                                            "ModernBertForSequenceClassification"};

std::string supported_architectures() {
  std::string s;
  for (std::string_view a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

// The RoPE base of one layer type: rope_parameters[type] (transformers 5's layout) or the older
// top-level key (global_rope_theta / local_rope_theta); rope_type default only.
Status read_rope_theta(const json& j, const char* type, const char* old_key, float& theta) {
  if (auto it = j.find("rope_parameters"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return corrupt("config.json: rope_parameters must be an object");
    if (auto p = it->find(type); p != it->end() && !p->is_null()) {
      const std::string where = std::string("config.json: rope_parameters.") + type;
      if (!p->is_object()) return corrupt(where + " must be an object");
      std::string rope_type = "default";
      BRIGADE_RETURN_IF_ERROR(read_string(*p, "rope_type", rope_type));
      if (rope_type != "default")
        return unsupported(where + ".rope_type '" + rope_type + "' is not supported for modernbert; supported: default");
      for (const auto& [key, value] : p->items())
        if (key != "rope_type" && key != "rope_theta")
          return unsupported(where + "." + key + " is not supported for modernbert; supported: rope_type, rope_theta");
      BRIGADE_RETURN_IF_ERROR(read_float(*p, "rope_theta", theta));
      return Status::ok();
    }
  }
  return read_float(j, old_key, theta);
}

// sliding_layers from layer_types, or from global_attn_every_n_layers (ModernBertConfig's
// __post_init__: layer l is global where l % n == 0).
Status read_layer_types(const json& j, ModelConfig& c) {
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
      return invalid_argument("config.json: layer_types must list one type per layer (" + std::to_string(c.n_layers) + ")");
    for (size_t l = 0; l < it->size(); ++l) {
      const json& t = (*it)[l];
      if (t == "sliding_attention") c.sliding_layers[l] = true;
      else if (t != "full_attention")
        return unsupported("config.json: layer_types[" + std::to_string(l) + "] " + t.dump() +
                           " is not supported for modernbert; supported: full_attention, sliding_attention");
    }
    return Status::ok();
  }
  int every = 3;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "global_attn_every_n_layers", every, false));
  if (every < 1)
    return invalid_argument("config.json: global_attn_every_n_layers must be >= 1 (got " + std::to_string(every) + ")");
  for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = l % every != 0;
  return Status::ok();
}

// What only the classification head reads (models/classifier.h), checked here so that a config
// the head cannot run is refused at load.
Status check_classifier_fields(const json& j) {
  std::string pooling = "cls", act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "classifier_pooling", pooling));
  if (pooling != "cls" && pooling != "mean")
    return unsupported("config.json: classifier_pooling '" + pooling + "' is not supported; supported: cls, mean");
  BRIGADE_RETURN_IF_ERROR(read_string(j, "classifier_activation", act));
  if (act != "gelu" && act != "tanh" && act != "relu")
    return unsupported("config.json: classifier_activation '" + act +
                       "' is not supported for modernbert; supported: gelu, tanh, relu");
  return Status::ok();
}

Status read_sizes(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.n_heads, true));
  c.n_kv_heads = c.n_heads;
  if (c.n_heads > 0 && c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: hidden_size (" + std::to_string(c.hidden_size) +
                            ") must be a multiple of num_attention_heads (" + std::to_string(c.n_heads) + ")");
  if (c.n_heads > 0) c.head_dim = c.hidden_size / c.n_heads;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "intermediate_size", c.intermediate_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  c.max_position = 8192;
  return read_int(j, "max_position_embeddings", c.max_position, false);
}

}  // namespace

bool is_modernbert(const json& j) {
  const std::string arch = config_architecture(j);
  if (!arch.empty()) return arch.starts_with("ModernBert");
  const std::string t = config_model_type(j);
  return t == "modernbert" || t == "modernbert-decoder";
}

Expected<ModelConfig> read_modernbert_config(const json& j) {
  const std::string arch = config_architecture(j);
  if (arch.empty() ? config_model_type(j) != "modernbert"
                   : std::find(kArchitectures.begin(), kArchitectures.end(), arch) == kArchitectures.end())
    return unsupported("config.json: " + (arch.empty() ? "model_type '" + config_model_type(j) + "'" : "architecture '" + arch + "'") +
                       " is not supported; brigade runs the ModernBERT encoder as " + supported_architectures());
  ModelConfig c;
  c.arch = "modernbert";
  c.encoder = true;
  c.seq_cls = arch == "ModernBertForSequenceClassification";
  BRIGADE_RETURN_IF_ERROR(read_sizes(j, c));
  BRIGADE_RETURN_IF_ERROR(read_encoder_fields(j, c));  // is_decoder, dtype, quantization_config
  std::string act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_activation", act));
  if (act != "gelu")
    return unsupported("config.json: hidden_activation '" + act + "' is not supported for modernbert; supported: gelu");
  c.mlp_activation = MlpActivation::gelu;
  c.rms_eps = 1e-5f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "norm_eps", c.rms_eps));
  c.layer_norms = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_bias", c.norm_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
  c.qkv_bias = c.o_bias = c.attention_bias;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
  if (auto r = j.find("rope_scaling"); r != j.end() && !r->is_null())
    return unsupported("config.json: rope_scaling is not supported for modernbert (its RoPE is unscaled)");
  c.rope_theta = 160000.0f;
  c.rope_local_theta = 10000.0f;
  BRIGADE_RETURN_IF_ERROR(read_rope_theta(j, "full_attention", "global_rope_theta", c.rope_theta));
  BRIGADE_RETURN_IF_ERROR(read_rope_theta(j, "sliding_attention", "local_rope_theta", c.rope_local_theta));
  if (!(c.rope_local_theta > 0.0f) || !std::isfinite(c.rope_local_theta))
    return invalid_argument("config.json: local_rope_theta must be a positive number");
  int local = 128;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "local_attention", local, false));
  if (local < 2)
    return invalid_argument("config.json: local_attention must be >= 2 (a token sees local_attention / 2 on each side; got " +
                            std::to_string(local) + ")");
  c.sliding_window = local / 2;
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c));
  if (c.seq_cls) BRIGADE_RETURN_IF_ERROR(check_classifier_fields(j));
  c.type_vocab_size = 0;
  c.bos_id = -1;
  BRIGADE_RETURN_IF_ERROR(c.validate());
  return c;
}

}  // namespace brigade
