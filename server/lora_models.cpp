#include "server/lora_models.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/openai_format.h"

namespace brigade::server {

Status select_lora(const std::string& served_name, const std::vector<LoraModule>& loras, bool checked,
                   CompletionRequest& r) {
  r.gen.lora.clear();
  if ((loras.empty() && !checked) || r.model.empty() || r.model == served_name) return Status::ok();
  for (const LoraModule& m : loras) {
    if (m.name == r.model) {
      r.gen.lora = m.name;
      return Status::ok();
    }
  }
  std::string list = served_name;
  for (const LoraModule& m : loras) list += ", " + m.name;
  // vLLM's answer: 404, "The model `X` does not exist."
  return not_found("The model `" + r.model + "` does not exist; served: " + list + " (the base model and its LoRA adapters)");
}

std::string models_body_with_loras(const std::string& served_name, int64_t created, int max_context,
                                   const std::vector<LoraModule>& loras, const std::vector<std::string>& aliases) {
  const std::string base = models_body(served_name, created, max_context);
  if (loras.empty() && aliases.empty()) return base;
  nlohmann::json body = nlohmann::json::parse(base);
  nlohmann::json& data = body["data"];
  for (const std::string& alias : aliases) {  // the base model under its other names
    nlohmann::json same = data.at(0);
    same["id"] = alias;
    if (!loras.empty()) same["parent"] = nullptr;
    data.push_back(std::move(same));
  }
  if (loras.empty()) return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

SimpleResponse lora_update_route(ServerContext& ctx, std::string_view body, bool load) {
  auto fail = [](int status, const Status& st) {
    return SimpleResponse{status, "application/json", error_body(status, st.message(), st.code())};
  };
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(400, invalid_argument("the request body is not a JSON object"));
  auto text = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string name = text("lora_name"), path = text("lora_path");
  if (load && (name.empty() || path.empty()))
    return fail(400, invalid_argument("Both 'lora_name' and 'lora_path' must be provided (non-empty strings)"));
  if (!load && name.empty()) return fail(400, invalid_argument("'lora_name' must be provided (a non-empty string)"));
  const auto& aliases = ctx.options.model_aliases;
  if (load && (name == ctx.options.model_name || std::find(aliases.begin(), aliases.end(), name) != aliases.end()))
    return fail(400, invalid_argument("'" + name + "' is the served model's name; give the adapter another"));
  auto inplace = j.find("load_inplace");
  if (inplace != j.end() && !inplace->is_boolean())
    return fail(400, invalid_argument("'load_inplace' must be a boolean"));
  const bool replace = inplace != j.end() && inplace->get<bool>();
  const Status st = load ? ctx.engine.load_lora(LoraModule{name, path}, replace) : ctx.engine.unload_lora(name);
  if (!st.is_ok()) {
    // A full set of slots is the request's to fix (unload one), not a rate limit to wait out.
    const int status = st.code() == StatusCode::not_found ? 404 : st.code() == StatusCode::internal ? 500 : 400;
    return fail(status, st);
  }
  return SimpleResponse{200, "text/plain; charset=utf-8",
                        "Success: LoRA adapter '" + name + "' " + (load ? "added" : "removed") + " successfully."};
}

}  // namespace brigade::server
