#include "server/lora_models.h"

#include <nlohmann/json.hpp>

#include "server/openai_format.h"

namespace brigade::server {

Status select_lora(const std::string& served_name, const std::vector<LoraModule>& loras, CompletionRequest& r) {
  r.gen.lora.clear();
  if (loras.empty() || r.model.empty() || r.model == served_name) return Status::ok();
  for (const LoraModule& m : loras) {
    if (m.name == r.model) {
      r.gen.lora = m.name;
      return Status::ok();
    }
  }
  std::string list = served_name;
  for (const LoraModule& m : loras) list += ", " + m.name;
  return invalid_argument("the model '" + r.model + "' is not served; served: " + list +
                          " (the base model and its LoRA adapters)");
}

std::string models_body_with_loras(const std::string& served_name, int64_t created, int max_context,
                                   const std::vector<LoraModule>& loras) {
  const std::string base = models_body(served_name, created, max_context);
  if (loras.empty()) return base;
  nlohmann::json body = nlohmann::json::parse(base);
  nlohmann::json& data = body["data"];
  nlohmann::json entry = data.at(0);
  entry["parent"] = nullptr;
  data[0] = entry;
  for (const LoraModule& m : loras) {
    entry["id"] = m.name;
    entry["root"] = m.path;
    entry["parent"] = served_name;
    data.push_back(entry);
  }
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace brigade::server
