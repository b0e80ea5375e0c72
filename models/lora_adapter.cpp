#include "models/lora_adapter.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "models/mapped_file.h"
#include "models/torch_checkpoint.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kTargetNames[kLoraTargets] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                     "gate_proj", "up_proj", "down_proj"};
constexpr const char* kTargetList = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";

int target_index(const std::string& name) {
  for (int i = 0; i < kLoraTargets; ++i)
    if (name == kTargetNames[i]) return i;
  return -1;
}

// A key that must be absent, null, false or empty for brigade to run the adapter as PEFT would.
bool set_and_nonempty(const json& j, const char* key) {
  if (!j.contains(key)) return false;
  const json& v = j.at(key);
  return !(v.is_null() || (v.is_boolean() && !v.get<bool>()) || ((v.is_object() || v.is_array()) && v.empty()));
}

Status parse_targets(const json& t, const std::string& where, LoraAdapterConfig& c) {
  if (t.is_string())
    return unsupported(where + ": target_modules is the regex string '" + t.get<std::string>() +
                       "'; brigade takes a list of module names (" + kTargetList + ")");
  if (!t.is_array() || t.empty()) return invalid_argument(where + ": target_modules must be a non-empty list");
  for (const json& e : t) {
    if (!e.is_string()) return invalid_argument(where + ": target_modules holds a non-string entry");
    std::string name = e.get<std::string>();
    const size_t dot = name.rfind('.');  // "self_attn.q_proj" names q_proj too
    const int i = target_index(dot == std::string::npos ? name : name.substr(dot + 1));
    if (i < 0)
      return unsupported(where + ": target module '" + name + "' is not supported; supported: " + kTargetList);
    c.targets[static_cast<size_t>(i)] = true;
  }
  return Status::ok();
}

// "base_model.model.model.layers.N.<self_attn|mlp>.<target>.lora_<A|B>.weight" -> (N, target, is_b).
struct TensorRole {
  int layer = -1;
  int target = -1;
  bool is_b = false;
};
Expected<TensorRole> tensor_role(const std::string& name, const std::string& where) {
  static const std::string prefix = "base_model.model.model.layers.";
  const auto bad = [&] {
    return unsupported(where + ": tensor '" + name + "' is not a LoRA A/B weight of a decoder layer's " +
                       "projection (brigade runs lora_A/lora_B of " + kTargetList + " only)");
  };
  if (name.rfind(prefix, 0) != 0) return bad();
  size_t at = prefix.size(), end = name.find('.', at);
  if (end == std::string::npos || end == at || end - at > 6) return bad();
  TensorRole r;
  for (size_t i = at; i < end; ++i) {
    if (name[i] < '0' || name[i] > '9') return bad();
  }
  r.layer = std::stoi(name.substr(at, end - at));
  std::string rest = name.substr(end + 1);
  for (const char* block : {"self_attn.", "mlp."}) {
    if (rest.rfind(block, 0) == 0) rest = rest.substr(std::string(block).size());
  }
  const size_t dot = rest.find('.');
  if (dot == std::string::npos) return bad();
  r.target = target_index(rest.substr(0, dot));
  const std::string tail = rest.substr(dot + 1);
  if (r.target < 0 || (tail != "lora_A.weight" && tail != "lora_B.weight")) return bad();
  r.is_b = tail == "lora_B.weight";
  return r;
}

Status check_pair_shape(const RawTensor& t, int64_t rows, int64_t cols, const std::string& where) {
  if (t.shape.size() == 2 && t.shape[0] == rows && t.shape[1] == cols) return Status::ok();
  return invalid_argument(where + ": tensor '" + t.name + "' has shape " + t.shape_string() + "; the base model needs [" +
                          std::to_string(rows) + ", " + std::to_string(cols) + "]");
}

}  // namespace

Expected<LoraModule> parse_lora_module(const std::string& spec) {
  LoraModule m;
  if (!spec.empty() && spec.front() == '{') {
    try {
      const json j = json::parse(spec);
      m.name = j.value("name", "");
      m.path = j.contains("path") ? j.at("path").get<std::string>() : j.value("lora_path", "");
    } catch (const json::exception& e) {
      return invalid_argument("LoRA module " + spec + " is not valid JSON (" + e.what() + ")");
    }
  } else if (const size_t eq = spec.find('='); eq != std::string::npos) {
    m.name = spec.substr(0, eq);
    m.path = spec.substr(eq + 1);
  }
  if (m.name.empty() || m.path.empty())
    return invalid_argument("LoRA module '" + spec + "' needs a name and a path: name=path or "
                            "{\"name\": ..., \"path\": ...}");
  return m;
}

const char* lora_target_name(LoraTarget t) { return kTargetNames[static_cast<int>(t)]; }

float LoraAdapterConfig::scale() const {
  return use_rslora ? alpha / std::sqrt(static_cast<float>(r)) : alpha / static_cast<float>(r);
}

std::pair<int64_t, int64_t> lora_target_shape(const ModelConfig& c, LoraTarget t) {
  const int64_t hidden = c.hidden_size, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  switch (t) {
    case LoraTarget::q: return {q, hidden};
    case LoraTarget::k:
    case LoraTarget::v: return {kv, hidden};
    case LoraTarget::o: return {hidden, q};
    case LoraTarget::gate:
    case LoraTarget::up: return {c.intermediate_size, hidden};
    case LoraTarget::down: return {hidden, c.intermediate_size};
  }
  return {0, 0};
}

Expected<LoraAdapterConfig> parse_lora_config(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return invalid_argument(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) return invalid_argument(where + ": not a JSON object");
  LoraAdapterConfig c;
  try {
    if (j.contains("peft_type") && j.at("peft_type") != "LORA")
      return unsupported(where + ": peft_type " + j.at("peft_type").dump() + "; brigade serves LORA adapters");
    if (!j.contains("r") || !j.at("r").is_number_integer() || j.at("r").get<int>() < 1)
      return invalid_argument(where + ": r must be an integer >= 1");
    c.r = j.at("r").get<int>();
    c.alpha = j.contains("lora_alpha") ? j.at("lora_alpha").get<float>() : 8.0f;  // PEFT's default
    c.use_rslora = j.value("use_rslora", false);
    if (j.contains("bias") && j.at("bias") != "none")
      return unsupported(where + ": bias " + j.at("bias").dump() + " is not supported (only \"none\")");
    if (j.value("fan_in_fan_out", false))
      return unsupported(where + ": fan_in_fan_out is for GPT-2 style Conv1D weights; Llama-family "
                         "projections store [out, in]");
    for (const char* key : {"modules_to_save", "layers_to_transform", "rank_pattern", "alpha_pattern", "use_dora",
                            "layer_replication", "lora_bias", "exclude_modules", "target_parameters",
                            "trainable_token_indices"}) {
      if (set_and_nonempty(j, key))
        return unsupported(where + ": " + key + " " + j.at(key).dump() + " is not supported (leave it empty)");
    }
    if (!j.contains("target_modules")) return invalid_argument(where + ": target_modules is missing");
    BRIGADE_RETURN_IF_ERROR(parse_targets(j.at("target_modules"), where, c));
    if (j.contains("base_model_name_or_path") && j.at("base_model_name_or_path").is_string())
      c.base_model = j.at("base_model_name_or_path").get<std::string>();
  } catch (const json::exception& e) {
    return invalid_argument(where + ": a field has the wrong type (" + e.what() + ")");
  }
  if (!std::isfinite(c.alpha)) return invalid_argument(where + ": lora_alpha must be finite");
  return c;
}

Expected<LoraAdapter> read_lora_adapter(const LoraModule& m, const ModelConfig& base, int max_rank) {
  const std::string where = "LoRA adapter '" + m.name + "' (" + m.path + ")";
  const std::string config_path = m.path + "/adapter_config.json";
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(config_path));
  LoraAdapter a;
  a.name = m.name;
  BRIGADE_ASSIGN_OR_RETURN(a.config, parse_lora_config(text, where));
  if (a.config.r > max_rank)
    return invalid_argument(where + ": rank r = " + std::to_string(a.config.r) + " exceeds --max-lora-rank " +
                            std::to_string(max_rank) + " (raise it)");
  std::map<std::string, RawTensor> tensors;  // PEFT wrote adapter_model.bin before safetensors
  std::vector<std::vector<uint8_t>> derived;
  BRIGADE_ASSIGN_OR_RETURN(auto file, read_weights_file(m.path, "adapter_model.safetensors", "adapter_model.bin",
                                                        tensors, derived));
  a.layers.resize(static_cast<size_t>(base.n_layers));
  const int64_t r = a.config.r;
  for (const auto& [name, t] : tensors) {
    BRIGADE_ASSIGN_OR_RETURN(TensorRole role, tensor_role(name, where));
    if (role.layer >= base.n_layers)
      return invalid_argument(where + ": tensor '" + name + "' is for layer " + std::to_string(role.layer) +
                              "; the base model has " + std::to_string(base.n_layers) + " layers");
    const auto target = static_cast<LoraTarget>(role.target);
    if (!a.config.targets[static_cast<size_t>(role.target)])
      return invalid_argument(where + ": tensor '" + name + "' targets " + lora_target_name(target) +
                              ", which target_modules does not list");
    const auto [out, in] = lora_target_shape(base, target);
    BRIGADE_RETURN_IF_ERROR(check_pair_shape(t, role.is_b ? out : r, role.is_b ? r : in, where));
    LoraPair& p = a.layers[static_cast<size_t>(role.layer)][static_cast<size_t>(role.target)];
    std::vector<float>& dst = role.is_b ? p.b : p.a;
    dst.resize(static_cast<size_t>(t.numel()));
    t.dequantize(0, t.numel(), dst.data());
    p.in = in;
    p.out = out;
  }
  for (int l = 0; l < base.n_layers; ++l) {
    for (int i = 0; i < kLoraTargets; ++i) {
      if (!a.config.targets[static_cast<size_t>(i)]) continue;
      const LoraPair& p = a.layers[static_cast<size_t>(l)][static_cast<size_t>(i)];
      const char* missing = p.a.empty() ? "lora_A" : (p.b.empty() ? "lora_B" : nullptr);
      if (missing != nullptr)
        return invalid_argument(where + ": " + file->path() + " lacks layers." + std::to_string(l) + "." +
                                kTargetNames[i] + "." + missing + ".weight (target_modules lists " + kTargetNames[i] +
                                ", so every layer needs both A and B)");
    }
  }
  return a;
}

}  // namespace brigade
