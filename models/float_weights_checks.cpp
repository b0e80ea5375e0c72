#include "models/float_weights_checks.h"

#include <string>

namespace brigade {

Status check_float_weights_load(const ModelConfig& c, const Backend& backend, const LoadOptions& options) {
  if (options.max_batch_tokens < 1)
    return invalid_argument("max_batch_tokens must be >= 1 (got " + std::to_string(options.max_batch_tokens) + ")");
  if (options.lora_enabled()) return unsupported("LoRA adapters are not supported for " + c.arch);
  if (const auto t = options.weight_dtype; t && t != DType::f32 && t != DType::f16 && t != DType::bf16)
    return unsupported(std::string("weight dtype ") + dtype_name(*t) + " is not supported for " + c.arch +
                       "; supported: f32, f16, bf16 (or auto)");
  if (options.weight_dtype && !backend.supports_weight_dtype(*options.weight_dtype))
    return unsupported(std::string("backend '") + backend.name() + "' does not keep " + dtype_name(*options.weight_dtype) +
                       " weights (load with weights: auto or bf16)");
  if (c.quant.quantized())
    return unsupported("config.json: quantization_config " + c.quant.describe() + " is not supported for " + c.arch);
  return Status::ok();
}

}  // namespace brigade
