// The served model names under LoRA adapters (vLLM's --lora-modules): a request's `model`
// picks the base or one adapter, and /v1/models lists the adapters beside the base.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/lora_adapter.h"
#include "server/openai_parse.h"

namespace brigade::server {

// Sets r.gen.lora from r.model: an adapter's name selects it; the served name, an empty or
// absent model select the base. With adapters loaded any other name is invalid_argument naming
// the served ones; without, the model field stays unchecked (as before adapters existed).
Status select_lora(const std::string& served_name, const std::vector<LoraModule>& loras, CompletionRequest& r);

// GET /v1/models: the base (models_body) followed by one entry per adapter, vLLM's shape
// ({"id": name, "root": path, "parent": served_name, ...}).
std::string models_body_with_loras(const std::string& served_name, int64_t created, int max_context,
                                   const std::vector<LoraModule>& loras);

}  // namespace brigade::server
