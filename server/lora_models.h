// The served model names under LoRA adapters (vLLM's --lora-modules): a request's `model`
// picks the base or one adapter, and /v1/models lists the adapters beside the base; and vLLM's
// runtime adapter routes, POST /v1/load_lora_adapter and /v1/unload_lora_adapter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/lora_adapter.h"
#include "server/openai_parse.h"
#include "server/routes.h"

namespace brigade::server {

// Sets r.gen.lora from r.model: an adapter's name selects it; the served name, an empty or
// absent model select the base. With LoRA on (adapters loaded, or slots for them: `checked`) any
// other name is not_found naming the served ones (vLLM's 404 "The model `X` does not exist");
// without, the model field stays unchecked (as before adapters existed).
Status select_lora(const std::string& served_name, const std::vector<LoraModule>& loras, bool checked,
                   CompletionRequest& r);

// POST /v1/load_lora_adapter {"lora_name", "lora_path", "load_inplace"?} (load; load_inplace
// replaces a loaded adapter of that name, Engine::load_lora's replace) and /v1/unload_lora_adapter
// {"lora_name"}, as vLLM answers them: 200 with a text/plain "Success: ..." line; 400 for a bad
// body, a name already loaded or the served model's name, no free slot, or files that are not
// an adapter of this model; 404 for unloading a name not loaded or a path without the files.
// Served only with ServerOptions::allow_runtime_lora_updating (else 404, as vLLM without
// VLLM_ALLOW_RUNTIME_LORA_UPDATING). A load blocks its connection's I/O thread while the files
// are read and uploaded.
SimpleResponse lora_update_route(ServerContext& ctx, std::string_view body, bool load);

// GET /v1/models: the base (models_body), the base again under each further served name
// (`aliases`), then one entry per adapter, vLLM's shape ({"id": name, "root": path, "parent":
// served_name, ...}).
std::string models_body_with_loras(const std::string& served_name, int64_t created, int max_context,
                                   const std::vector<LoraModule>& loras, const std::vector<std::string>& aliases = {});

}  // namespace brigade::server
