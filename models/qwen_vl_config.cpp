#include "models/qwen_vl_config.h"

#include <string>

#include "models/config_json.h"
#include "models/qwen_vision.h"

namespace brigade {

using json = nlohmann::json;

namespace {

// Moves an mrope_section out of a rope_scaling / rope_parameters object; the object stays only
// when it asks for more than M-RoPE (which parse_rope_scaling then reads or refuses).
Status take_mrope(json& text, const char* key, std::vector<int>* section, bool* interleaved) {
  auto it = text.find(key);
  if (it == text.end() || !it->is_object()) return Status::ok();
  json& r = *it;
  if (auto m = r.find("mrope_section"); m != r.end()) {
    if (!m->is_array() || m->empty()) return corrupt(std::string("config.json: ") + key + ".mrope_section must be a list of integers");
    section->clear();
    for (const auto& e : *m) {
      if (!e.is_number_integer() || e.get<int>() < 0)
        return corrupt(std::string("config.json: ") + key + ".mrope_section must hold non-negative integers");
      section->push_back(e.get<int>());
    }
    r.erase("mrope_section");
  }
  if (auto i = r.find("mrope_interleaved"); i != r.end()) {
    if (!i->is_boolean()) return corrupt(std::string("config.json: ") + key + ".mrope_interleaved must be true or false");
    *interleaved = i->get<bool>();
    r.erase(i);
  }
  for (const char* type_key : {"type", "rope_type"}) {
    auto t = r.find(type_key);
    if (t != r.end() && t->is_string() && (t->get<std::string>() == "mrope" || t->get<std::string>() == "default"))
      r.erase(type_key);
  }
  return Status::ok();
}

}  // namespace

bool is_qwen_vl(const json& j) {
  const std::string a = config_architecture(j);
  if (!a.empty())
    return a == "Qwen2VLForConditionalGeneration" || a == "Qwen2_5_VLForConditionalGeneration" ||
           a == "Qwen3VLForConditionalGeneration" || a == "Qwen3VLMoeForConditionalGeneration";
  const std::string t = config_model_type(j);
  return t == "qwen2_vl" || t == "qwen2_5_vl" || t == "qwen3_vl" || t == "qwen3_vl_moe";
}

bool is_qwen3_vl_moe(const json& j) {
  const std::string a = config_architecture(j);
  return a.empty() ? config_model_type(j) == "qwen3_vl_moe" : a == "Qwen3VLMoeForConditionalGeneration";
}

VisionKind qwen_vl_kind(const json& j) {
  const std::string a = config_architecture(j);
  if (a == "Qwen2_5_VLForConditionalGeneration" || (a.empty() && config_model_type(j) == "qwen2_5_vl"))
    return VisionKind::qwen2_5_vl;
  if (a == "Qwen3VLForConditionalGeneration" || a == "Qwen3VLMoeForConditionalGeneration" ||
      (a.empty() && (config_model_type(j) == "qwen3_vl" || config_model_type(j) == "qwen3_vl_moe")))
    return VisionKind::qwen3_vl;
  return VisionKind::qwen2_vl;
}

Expected<json> qwen_vl_text_config(const json& j, std::vector<int>* mrope_section, bool* mrope_interleaved) {
  json text = j;
  text.erase("vision_config");
  text.erase("text_config");
  if (auto it = j.find("text_config"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return corrupt("config.json: text_config is not an object");
    text.update(*it);  // transformers 5 keeps the language model's fields here
  }
  const bool qwen3 = qwen_vl_kind(j) == VisionKind::qwen3_vl;  // Qwen3's decoder: q/k norms, no qkv biases
  if (is_qwen3_vl_moe(j)) {
    // Qwen3VLMoeTextTopKRouter renormalises its top-k weights whatever the config says.
    text["architectures"] = json::array({"Qwen3MoeForCausalLM"});
    text["model_type"] = "qwen3_moe";
    text["norm_topk_prob"] = true;
  } else {
    text["architectures"] = json::array({qwen3 ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM"});
    text["model_type"] = qwen3 ? "qwen3" : "qwen2";
  }
  mrope_section->clear();
  *mrope_interleaved = false;
  for (const char* key : {"rope_scaling", "rope_parameters"})
    BRIGADE_RETURN_IF_ERROR(take_mrope(text, key, mrope_section, mrope_interleaved));
  return text;
}

Status read_mrope(const json& text, std::vector<int>* mrope_section, bool* mrope_interleaved) {
  json copy = text;
  for (const char* key : {"rope_scaling", "rope_parameters"})
    BRIGADE_RETURN_IF_ERROR(take_mrope(copy, key, mrope_section, mrope_interleaved));
  return Status::ok();
}

Status check_mrope_section(const std::vector<int>& section, int rope_dims, const std::string& key) {
  int sum = 0;
  for (int s : section) sum += s;
  if (section.size() != 3 || sum != rope_dims / 2)
    return invalid_argument("config.json: " + key + ".mrope_section must be 3 sizes (temporal, height, width) summing "
                            "to the rotary dims / 2 = " + std::to_string(rope_dims / 2));
  return Status::ok();
}

std::map<std::string, RawTensor> qwen_vl_tensors(std::map<std::string, RawTensor> tensors) {
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : tensors) {
    std::string to = name;
    if (name.starts_with("model.language_model.")) to = "model." + name.substr(std::string("model.language_model.").size());
    else if (name.starts_with("model.visual.")) to = "visual." + name.substr(std::string("model.visual.").size());
    out.emplace(std::move(to), std::move(t));
  }
  flatten_qwen_patch_embed(out);  // the Conv3d [h, 3, T, p, p] as the matrix [h, 3 T p p]
  return out;
}

}  // namespace brigade
