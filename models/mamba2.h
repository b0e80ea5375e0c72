// Mamba2 language models (transformers' Mamba2ForCausalLM: Mamba-Codestral-7B, the mamba2-*-hf
// conversions), over the Backend's state-space ops (core/backend.h SsmLayout): each layer is
// RMSNorm, then a mixer (in_proj, causal depthwise conv + SiLU, the selective scan, y * silu(z)
// through the grouped RMSNorm, out_proj) added to the residual; then norm_f and lm_head.
//
// The past of a sequence is not in KV pages but in a recurrent state per layer (the conv's last
// conv_kernel - 1 inputs and the scan's [heads, head_dim, state_size]), f32, kept in one of
// LoadOptions::state_slots slots (StepBatch::state_slots, assigned by the executor). A sequence
// whose first row in a step is position 0 starts from zeros; any other continues its slot, and
// the model refuses (invalid_argument) a step that does not continue a slot exactly where its
// last step left it, so a state is never read for a past it does not hold (the scheduler runs
// such a model without a prefix cache). The KV layout has no layer: pages only count positions.
// Runs where the backend has supports_ssm (the CPU), at tp 1, without LoRA.
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Every weight shape-checked; in_proj and out_proj in the checkpoint's float type (or the one
// options.weight_dtype asks: f32, bf16, f16, q8_0, q4_0, q4_1), the conv, A, D, dt_bias and norm
// weights f32 (A as -exp(A_log)). max(options.state_slots, 1) state slots are allocated.
// unsupported on a backend without the state-space ops, under tensor parallelism, with LoRA or
// an MTP module.
// The bytes of one sequence's recurrent state (Model::state_bytes_per_slot): per state-space
// layer, the conv's conv_kernel - 1 inputs and the scan's d_inner x state_size, f32.
int64_t mamba2_state_bytes(const ModelConfig& c);

Expected<std::unique_ptr<Model>> load_mamba2(const Checkpoint& checkpoint, Backend& backend, const LoadOptions& options);

}  // namespace brigade
