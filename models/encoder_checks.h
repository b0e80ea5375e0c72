// Internal to models/: what the encoders (models/bert.h, models/modernbert.h) check alike before
// they load and before each step: they run on the CPU backend at tp 1 without LoRA, and each
// sequence of a step is a whole prompt (every token sees the rest of its prompt, so nothing of it
// is cached or chunked; the scheduler runs an encoder's prompts so).
#pragma once

#include <string>

#include "core/backend.h"
#include "core/status.h"
#include "models/model.h"

namespace brigade {

// unsupported, naming `c.arch`, on a backend without the vision ops (LayerNorm, GELU,
// attend_until) or with other activations than f32, under tensor parallelism, with LoRA adapters
// or a weight type other than f32, bf16 or f16; invalid_argument for max_batch_tokens < 1.
Status check_encoder_load(const ModelConfig& c, Backend& backend, const LoadOptions& options);

// A step an encoder cannot run (before check_step): logit rows (it pools, it computes no logits),
// device tokens, images, a LoRA adapter. invalid_argument / unsupported naming `arch`.
Status check_encoder_step(const StepBatch& batch, const std::string& arch);

// After check_step: invalid_argument unless sequence s of the step holds all its ctx_len[s]
// positions (positions 0..n-1).
Status check_whole_prompts(const StepBatch& batch);

}  // namespace brigade
