// Internal to models/: the load-time refusals shared by the decoders that keep every weight in a
// float type and take no adapters (Gemma 3n, Gemma 4): max_batch_tokens, LoRA, `weights:` other
// than f32 / f16 / bf16 (or one the backend does not keep), a quantized checkpoint.
#pragma once

#include "core/backend.h"
#include "core/status.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {

// invalid_argument for max_batch_tokens < 1; unsupported, naming c.arch, for LoRA adapters, a
// weight dtype other than f32 / f16 / bf16 or one `backend` does not keep, and a checkpoint's
// quantization_config.
Status check_float_weights_load(const ModelConfig& c, const Backend& backend, const LoadOptions& options);

}  // namespace brigade
