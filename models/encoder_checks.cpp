#include "models/encoder_checks.h"

#include <string>

namespace brigade {

Status check_encoder_load(const ModelConfig& c, Backend& backend, const LoadOptions& options) {
  if (options.max_batch_tokens < 1)
    return invalid_argument("max_batch_tokens must be >= 1 (got " + std::to_string(options.max_batch_tokens) + ")");
  if (!backend.supports_vision() || backend.activation_dtype() != DType::f32)
    return unsupported(c.arch + " encoders run on the CPU backend (LayerNorm and GELU); backend '" + backend.name() +
                       "' has no such ops");
  if (options.communicator != nullptr && options.communicator->size() > 1)
    return unsupported(c.arch + " encoders run at tp 1 (tensor parallelism splits the decoders)");
  if (options.lora_enabled()) return unsupported("LoRA adapters are not supported for " + c.arch + " encoders");
  if (const auto t = options.weight_dtype; t && *t != DType::f32 && *t != DType::bf16 && *t != DType::f16)
    return unsupported(std::string("weights: ") + dtype_name(*t) + " is not supported for " + c.arch +
                       " encoders; they load f32, bf16 or f16");
  return Status::ok();
}

Status check_encoder_step(const StepBatch& batch, const std::string& arch) {
  if (!batch.logit_rows.empty())
    return invalid_argument(arch + " is an encoder: it computes no logits (it pools hidden states)");
  if (!batch.device_tokens.empty())
    return invalid_argument("an encoder takes its tokens from the host (no device_tokens)");
  if (!batch.images.empty()) return unsupported(arch + " takes no images");
  for (int32_t id : batch.lora)
    if (id != 0) return unsupported(arch + " encoders run no LoRA adapters");
  return Status::ok();
}

Status check_whole_prompts(const StepBatch& batch) {
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const size_t i = static_cast<size_t>(s);
    const int n = batch.q_start[i + 1] - batch.q_start[i], ctx = batch.ctx_len[i];
    if (n != ctx)
      return invalid_argument("an encoder runs each prompt whole in one step: sequence " + std::to_string(s) + " has " +
                              std::to_string(n) + " of its " + std::to_string(ctx) + " positions in this one");
  }
  return Status::ok();
}

}  // namespace brigade
