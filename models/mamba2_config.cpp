#include "models/mamba2_config.h"

#include <cmath>
#include <limits>

#include "models/config_json.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// A float field that may be a number, one of Python's non-finite tokens as quote_python_floats
// left it, or transformers 5's {"__float__": "Infinity"}.
Expected<float> config_float(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<float>();
  std::string s;
  if (v.is_string()) s = v.get<std::string>();
  else if (v.is_object() && v.contains("__float__") && v["__float__"].is_string()) s = v["__float__"].get<std::string>();
  if (s == "Infinity" || s == "inf") return std::numeric_limits<float>::infinity();
  if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<float>::infinity();
  return corrupt("config.json: " + where + " must be a number");
}

Status positive(const char* key, int v) {
  if (v <= 0) return invalid_argument(std::string("config.json: ") + key + " must be positive (got " + std::to_string(v) + ")");
  return Status::ok();
}

}  // namespace

bool is_mamba2(const json& j) {
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    return (*it)[0].get<std::string>() == "Mamba2ForCausalLM";
  auto it = j.find("model_type");
  return it != j.end() && it->is_string() && it->get<std::string>() == "mamba2";
}

std::string quote_python_floats(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool replaced = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
      const std::string t(token);
      if (text.compare(i, t.size(), t) == 0) {
        out += '"' + t + '"';
        i += t.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += ch;
  }
  return out;
}

Expected<ModelConfig> read_mamba2_config(const json& j) {
  ModelConfig c;
  c.arch = "mamba2";
  SsmLayout& l = c.ssm.layout;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  // Mamba2Config's defaults for the rest.
  l.n_heads = 128;
  l.head_dim = 64;
  l.n_groups = 8;
  l.state_size = 128;
  l.conv_kernel = 4;
  int expand = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_heads", l.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "head_dim", l.head_dim, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "n_groups", l.n_groups, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "state_size", l.state_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "conv_kernel", l.conv_kernel, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "expand", expand, false));
  for (auto [key, v] : {std::pair{"hidden_size", c.hidden_size}, {"num_hidden_layers", c.n_layers},
                        {"vocab_size", c.vocab_size}, {"num_heads", l.n_heads}, {"head_dim", l.head_dim},
                        {"n_groups", l.n_groups}, {"state_size", l.state_size}, {"conv_kernel", l.conv_kernel},
                        {"expand", expand}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  if (int64_t{expand} * c.hidden_size != l.d_inner())
    return invalid_argument("config.json: expand * hidden_size (" + std::to_string(int64_t{expand} * c.hidden_size) +
                            ") must equal num_heads * head_dim (" + std::to_string(l.d_inner()) + ")");
  if (l.n_heads % l.n_groups != 0)
    return invalid_argument("config.json: num_heads (" + std::to_string(l.n_heads) + ") must be a multiple of n_groups (" +
                            std::to_string(l.n_groups) + ")");
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_conv_bias", c.ssm.conv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bias", c.ssm.proj_bias));
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported for mamba2 (silu only)");
  c.rms_eps = 1e-5f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "layer_norm_epsilon", c.rms_eps));
  if (!(c.rms_eps > 0.0f) || !std::isfinite(c.rms_eps))
    return invalid_argument("config.json: layer_norm_epsilon must be a positive number");
  c.ssm.dt_min = 0.0f;
  c.ssm.dt_max = 0.0f;  // unbounded
  if (auto it = j.find("time_step_limit"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != 2) return corrupt("config.json: time_step_limit must be a pair [min, max]");
    BRIGADE_ASSIGN_OR_RETURN(c.ssm.dt_min, config_float((*it)[0], "time_step_limit[0]"));
    BRIGADE_ASSIGN_OR_RETURN(const float hi, config_float((*it)[1], "time_step_limit[1]"));
    c.ssm.dt_max = std::isinf(hi) ? 0.0f : hi;
    if (!std::isfinite(c.ssm.dt_min) || c.ssm.dt_min < 0.0f || (c.ssm.dt_max > 0.0f && c.ssm.dt_max < c.ssm.dt_min) ||
        hi <= 0.0f)
      return invalid_argument("config.json: time_step_limit must be 0 <= min < max");
  }
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "tie_word_embeddings", c.tie_embeddings));
  c.max_position = 1 << 20;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "max_position_embeddings", c.max_position, false));
  BRIGADE_RETURN_IF_ERROR(positive("max_position_embeddings", c.max_position));
  c.bos_id = -1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "bos_token_id", c.bos_id, false));
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) c.eos_ids = {it->get<int>()};
    else if (it->is_array())
      for (const auto& e : *it) {
        if (!e.is_number_integer()) return corrupt("config.json: eos_token_id list must hold integers");
        c.eos_ids.push_back(e.get<int>());
      }
    else return corrupt("config.json: eos_token_id must be an integer or a list of integers");
  }
  if (c.bos_id >= c.vocab_size) return invalid_argument("config.json: bos_token_id is outside the vocabulary");
  for (int e : c.eos_ids)
    if (e < 0 || e >= c.vocab_size)
      return invalid_argument("config.json: eos_token_id " + std::to_string(e) + " is outside the vocabulary");
  BRIGADE_RETURN_IF_ERROR(read_dtype(j, c.dtype));
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
    return unsupported("config.json: quantization_config is not supported for mamba2 (bf16, f16 or f32 checkpoints)");
  c.intermediate_size = static_cast<int>(l.d_inner());  // transformers' Mamba2Mixer.intermediate_size
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  return c;
}

}  // namespace brigade
