// State-space language models and hybrids over the Backend's state-space ops (core/backend.h
// SsmLayout), one Model for the families below (their configs: models/state_space_config.h):
//   Mamba1 (MambaForCausalLM, FalconMambaForCausalLM) and Mamba2 (Mamba2ForCausalLM): each layer
//     an RMSNorm and a mixer added to the residual, then norm_f and lm_head. A Mamba2 mixer is
//     in_proj, the causal depthwise conv + SiLU, the selective scan, y * silu(z) through the
//     grouped RMSNorm, out_proj; a Mamba1 mixer in_proj, the conv over its x half, x_proj (dt, B,
//     C; FalconMamba RMS-normalises them), dt_proj, the per-channel scan, y * silu(z), out_proj.
//   Granite 4.0-H (GraniteMoeHybridForCausalLM): a Mamba2 mixer or attention without positions,
//     then a shared SwiGLU (and routed experts), per layer, with Granite's scalings.
//   Nemotron-H (NemotronHForCausalLM): one block per layer, a Mamba2 mixer, attention without
//     positions or a relu2 MLP, or (Nemotron 3) a MoE of relu2 experts routed as DeepSeek-V3's
//     beside a relu2 shared expert (models/moe_block.h, MoeExpertMlp::relu2).
//   Qwen3-Next (Qwen3NextForCausalLM) and Qwen3.5's language models (Qwen3_5ForCausalLM,
//     Qwen3_5MoeForCausalLM): a Gated DeltaNet (in_proj, the causal conv + SiLU over q|k|v,
//     Backend::gated_delta with its gated RMSNorm, out_proj) or gated attention (q/k head norms,
//     RoPE over part of each head, the output times sigmoid of q_proj's gate rows), then a
//     SwiGLU or a MoE block with a sigmoid-gated shared expert, per layer; RMSNorms scale by 1 + w.
//     Qwen3.5 as the Hub ships it (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration)
//     takes images: Qwen3-VL's tower without DeepStack encodes them over their tokens' rows after
//     the embedding, and the attention rotates by interleaved M-RoPE (models/image_inputs.h).
//     llama.cpp's GGUF files of these (qwen3next, qwen35, qwen35moe; models/gguf_qwen35.h) load
//     with their ssm_a and norms as stored and Qwen3.5's value heads in the file's tiled order.
//   LFM2 (Lfm2ForCausalLM, Lfm2MoeForCausalLM): a gated short convolution (in_proj to B | C | x,
//     Backend::short_conv's C * conv(B * x), out_proj) or GQA attention (q/k head norms, RoPE over
//     whole heads), then a SwiGLU or (LFM2-MoE) sigmoid-routed experts, per layer.
//   Falcon-H1 (FalconH1ForCausalLM): a Mamba2 mixer and RoPE attention side by side on the same
//     normed input, their outputs summed, then a SwiGLU, per layer; its muP multipliers folded into
//     the weights at load (ModelConfig::mup). llama.cpp's GGUF files of LFM2 and Falcon-H1 load
//     too (models/gguf_lfm2.h, gguf_falcon_h1.h: the latter's multipliers folded in already).
//   Kimi Linear (KimiLinearForCausalLM): a KDA block (Backend::kda, the gated delta rule with a
//     decay per key channel) or MLA without RoPE, then a SwiGLU or DeepSeek-V3's MoE, per layer
//     (models/kimi_linear.h; llama.cpp's kimi-linear files: models/gguf_kimi_linear.h).
//
// The past of a sequence in a mixer is not in KV pages but in a recurrent state per layer (the
// conv's last conv_kernel - 1 inputs and the scan's state), f32, kept in one of
// LoadOptions::state_slots slots (StepBatch::state_slots, assigned by the executor). A sequence
// whose first row in a step is position 0 starts from zeros; any other continues its slot, and
// the model refuses (invalid_argument) a step that does not continue a slot exactly where its
// last step left it, or whose first KV page is not the one of the sequence the slot's state
// belongs to, so a state is never read for a past it does not hold (the scheduler runs such a
// model without a prefix cache, so no two live sequences share a page). The KV layout has the attention layers only (none: pages
// only count positions). Runs where the backend has supports_ssm (the CPU and CUDA backends), without LoRA.
//
// Tensor parallelism (LoadOptions::communicator of size tp > 1; check_state_space_parallel): each
// rank holds 1/tp of every mixer's heads with their rows of in_proj, conv channels, A, D, dt_bias
// and norm weights and their columns of out_proj (and its state: ssm_rank_layout), 1/tp of every
// attention layer's heads (its KV cache too) and of every MLP's columns (experts by columns, or
// whole experts with expert_parallel); each sublayer's output is all-reduced before the residual,
// a bias after a reduction added by rank 0 alone. A Mamba2 mixer of one group (B and C shared by
// all heads: Mamba2, Granite 4.0-H, Falcon-H1) keeps B and C whole on every rank, and its gated
// RMSNorm, whose one group spans the ranks, all-reduces each row's sum of squares. A Mamba1
// mixer (Mamba, FalconMamba, Jamba) splits by channels, x_proj's dt, B and C all-reduced; Kimi
// Linear's KDA and MLA blocks and MiniMax's lightning blocks (their whole-width norm as the
// one-group Mamba2 norm) by heads. llama.cpp's tiled Qwen3.5 value heads run at tp 1; a vision tower is not loaded under tp > 1 (as the
// decoders' rule: models/llama.cpp).
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// The bytes of one sequence's recurrent state (Model::state_bytes_per_slot): per state-space
// layer, the conv's conv_kernel - 1 inputs and the scan's d_inner x state_size, f32; under tensor
// parallelism (tp > 1) one rank's part of it (its heads; a Mamba2 mixer of one group keeps B and
// C whole on every rank).
int64_t recurrent_state_bytes(const ModelConfig& c, int tp = 1);

// The mixers' layout on one of tp ranks: 1/tp of the heads (Mamba2's, Gated DeltaNet's value
// heads, the short conv's channels) and of the groups (Gated DeltaNet's key heads; a Mamba2
// mixer's groups, or its one group whole on every rank). c.ssm.layout for tp 1.
SsmLayout ssm_rank_layout(const ModelConfig& c, int tp);

// Why tp ranks cannot split c (tp must divide the heads, groups, widths and experts its layers
// split; llama.cpp's tiled Qwen3.5 value heads do not split at all), or ok.
Status check_state_space_parallel(const ModelConfig& c, int tp, bool expert_parallel);

// Every weight shape-checked; the linear layers in the checkpoint's float type (or the one
// options.weight_dtype asks: f32, bf16, f16, q8_0, q4_0, q4_1), the conv, A, D, dt_bias and norm
// weights f32 (A as -exp(A_log)). max(options.state_slots, 1) state slots are allocated.
// unsupported on a backend without the state-space ops (or, for Granite's experts, the MoE
// ops), under a tensor parallelism check_state_space_parallel refuses, with LoRA, an MTP module or
// fp8 weights.
Expected<std::unique_ptr<Model>> load_state_space(const Checkpoint& checkpoint, Backend& backend, const LoadOptions& options);

}  // namespace brigade
