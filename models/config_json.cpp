#include "models/config_json.h"

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace brigade {

using json = nlohmann::json;

Status read_int(const json& j, const char* key, int& out, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return required ? corrupt(std::string("config.json: missing required field '") + key + "'")
                    : Status::ok();
  }
  if (!it->is_number_integer())
    return corrupt(std::string("config.json: field '") + key + "' must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX)
    return corrupt(std::string("config.json: field '") + key + "' is out of range");
  out = static_cast<int>(v);
  return Status::ok();
}

Status read_float(const json& j, const char* key, float& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) return corrupt(std::string("config.json: field '") + key + "' must be a number");
  out = it->get<float>();
  return Status::ok();
}

Status read_bool(const json& j, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return corrupt(std::string("config.json: field '") + key + "' must be true or false");
  out = it->get<bool>();
  return Status::ok();
}

Status read_string(const json& j, const char* key, std::string& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_string()) return corrupt(std::string("config.json: field '") + key + "' must be a string");
  out = it->get<std::string>();
  return Status::ok();
}

std::string config_architecture(const json& j) {
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    return (*it)[0].get<std::string>();
  return {};
}

std::string config_model_type(const json& j, const char* fallback) {
  auto it = j.find("model_type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

bool config_names_class(const json& j, std::initializer_list<const char*> classes,
                        std::initializer_list<const char*> types) {
  const std::string arch = config_architecture(j);
  const std::string named = arch.empty() ? config_model_type(j) : arch;
  for (const char* name : arch.empty() ? types : classes)
    if (named == name) return true;
  return false;
}

Expected<json> text_config_with_ids(const json& j, const std::string& arch, const std::string& text_only) {
  auto it = j.find("text_config");
  if (it == j.end() || !it->is_object())
    return unsupported("config.json: " + arch + " without a text_config object; brigade runs its language model "
                       "(text_config) or " + text_only);
  json text = *it;
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype"})
    if (j.contains(key) && !text.contains(key)) text[key] = j[key];
  return text;
}

Status read_dtype(const json& j, DType& out) {
  auto it = j.find("torch_dtype");
  if (it == j.end() || it->is_null()) it = j.find("dtype");  // the name in transformers >= 4.56
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_string()) return corrupt("config.json: torch_dtype must be a string");
  auto d = parse_dtype(it->get<std::string>());
  if (!d || (*d != DType::f32 && *d != DType::f16 && *d != DType::bf16))
    return unsupported("config.json: torch_dtype '" + it->get<std::string>() +
                       "' is not supported; supported: float32, float16, bfloat16");
  out = *d;
  return Status::ok();
}

Status read_eos(const nlohmann::json& j, std::vector<int>& eos) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (it->is_number_integer()) {
    eos = {it->get<int>()};
  } else if (it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_number_integer()) return corrupt("config.json: eos_token_id list must hold integers");
      eos.push_back(e.get<int>());
    }
  } else {
    return corrupt("config.json: eos_token_id must be an integer or a list of integers");
  }
  return Status::ok();
}

}  // namespace brigade
