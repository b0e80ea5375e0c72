#include "models/glm4v_config.h"

#include <string>

#include "models/config_json.h"
#include "models/qwen_vl_config.h"

namespace brigade {

using json = nlohmann::json;

namespace {

bool has_key(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

}  // namespace

bool is_glm4v(const json& j) {
  return config_names_class(j, {"Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration"},
                            {"glm4v", "glm4v_moe"});
}

bool is_glm4v_moe(const json& j) {
  return config_names_class(j, {"Glm4vMoeForConditionalGeneration"}, {"glm4v_moe"});
}

Expected<json> glm4v_text_config(const json& j, std::vector<int>* mrope_section) {
  const bool moe = is_glm4v_moe(j);
  json text = j;
  text.erase("vision_config");
  text.erase("text_config");
  if (auto it = j.find("text_config"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return corrupt("config.json: text_config is not an object");
    text.update(*it);
  }
  *mrope_section = {8, 12, 12};  // Glm4vTextRotaryEmbedding's default
  bool interleaved = false;
  BRIGADE_RETURN_IF_ERROR(read_mrope(text, mrope_section, &interleaved));
  bool partial = has_key(text, "partial_rotary_factor");
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto r = text.find(key);
    if (r == text.end() || !r->is_object()) continue;
    r->erase("mrope_section");
    partial = partial || has_key(*r, "partial_rotary_factor");
    for (const char* type_key : {"type", "rope_type"})  // M-RoPE's "default" / "mrope": plain RoPE per plane
      if (auto t = r->find(type_key); t != r->end() && t->is_string() && (*t == "default" || *t == "mrope"))
        r->erase(t);
  }
  if (!partial) text["partial_rotary_factor"] = moe ? 0.5 : 1.0;  // the text configs' defaults
  text["architectures"] = json::array({moe ? "Glm4MoeForCausalLM" : "Glm4ForCausalLM"});
  text["model_type"] = moe ? "glm4_moe" : "glm4";
  text["use_qk_norm"] = false;  // Glm4vMoeTextAttention has no q/k norms
  // Glm4vTextAttention always has q/k/v biases; Glm4vMoeTextConfig's attention_bias defaults to true.
  if (!moe || !has_key(text, "attention_bias")) text["attention_bias"] = true;
  return text;
}

}  // namespace brigade
