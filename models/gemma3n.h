// Gemma 3n's language model (Gemma3nForCausalLM; Gemma3nForConditionalGeneration's, text only),
// written over the Backend ops as transformers' Gemma3nTextModel runs it:
//
// - AltUp: altup_num_inputs streams [N, n, hidden]. Stream 0 is the scaled token embedding; the
//   others its altup_projections, each brought to stream 0's RMS (Backend::match_rms). Each
//   layer predicts every stream from all of them (Backend::altup_predict, coefficients from
//   tanh of the modality router over the active stream), runs the transformer block on the
//   active stream, and corrects every stream by the block's innovation (Backend::altup_correct).
//   At the end the streams are unembedded (altup_unembed_projections, RMS-matched) and averaged.
// - LAuReL: the normed block input + post_laurel_norm(linear_right(linear_left(x))), joined to
//   the attention's residual, the sum times 1/sqrt(2).
// - Per-layer inputs: a row of embed_tokens_per_layer per token ([n_layers * D], times sqrt(D);
//   ids at or past vocab_size_per_layer_input read row 0), gathered on the host from the mapped
//   checkpoint and uploaded (the table, 2.3 GB of E2B's weights in bf16, is never loaded whole),
//   plus per_layer_model_projection of the embedding (times hidden^-0.5, RMS-normed), times
//   1/sqrt(2). Layer l gates its part (gelu_tanh(per_layer_input_gate(active)) * input,
//   Backend::gelu_tanh_gate), projects it back and adds it to every stream but the first.
// - Attention: q/k norms with weights, v norm without, softmax scale 1, sliding/full layer types
//   with two RoPE bases; the last num_kv_shared_layers layers write no K/V and attend over the
//   K/V of the last earlier layer of their type (ModelConfig::Gemma3nFields::kv_layer), so the
//   KV cache holds n_kv_layers() layers.
// - MLP: per-layer widths; in the sparse layers the gate keeps only what exceeds mean + std * the
//   sparsity's normal quantile (Backend::gaussian_topk) before gelu_tanh(gate) * up.
// - Final: RMSNorm, the tied head, final_logit_softcapping.
//
// Norms scale by w (not Gemma 3's 1 + w). Tensor parallelism, LoRA, MTP, block-quantized and fp8
// weights are refused at load.
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Builds the model from an opened gemma3n_text checkpoint, which it keeps (the per-layer
// embedding table is read from its mapping at every step). Needs Backend::supports_altup: the
// CPU and CUDA backends.
Expected<std::unique_ptr<Model>> load_gemma3n(std::unique_ptr<Checkpoint> checkpoint, Backend& backend,
                                              const LoadOptions& options);

// The standard normal quantile of p in (0, 1) (the gaussian top-k's std multiplier, torch's
// Normal(0, 1).icdf), in double.
double normal_quantile(double p);

}  // namespace brigade
