// The Llama-family decoder (Llama 2/3, TinyLlama, SmolLM2, Mistral, llama2.c checkpoints), which
// also runs qwen2 and qwen3 (config flags qkv_bias, qk_norm) and phi3 (Phi-3, Phi-4: q|k|v and
// gate|up stored fused, fused_weights; partial rotary, rotary_dim).
//
// A decoder layer is an attention block and an MLP block, each behind an RMSNorm, with optional
// pieces (qkv/o bias; per-head q/k norm) so qwen2/qwen3 can reuse it by loading those pieces.
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Builds a Llama model from an opened checkpoint: every weight is shape-checked against the
// config, q|k|v and gate|up are fused, matrices are converted as options.weight_dtype says (fp8:
// the linear layers only, LoadOptions), and
// the scratch buffers for options.max_batch_tokens are allocated once.
Expected<std::unique_ptr<Model>> load_llama(const Checkpoint& checkpoint, Backend& backend,
                                            const LoadOptions& options);

// RoPE inverse frequencies [rotary_dim / 2]: 1 / theta^(2i / rotary_dim), computed in float
// exactly as llama2.c does so real checkpoints match the reference bit-closely.
std::vector<float> rope_inv_freq(float theta, int rotary_dim);

}  // namespace brigade
