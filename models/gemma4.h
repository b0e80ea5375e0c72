// Gemma 4's language model (Gemma4ForCausalLM; Gemma4ForConditionalGeneration's, text only),
// written over the Backend ops as transformers' Gemma4TextModel runs it:
//
// - Two attention geometries: sliding layers (num_attention_heads, num_key_value_heads,
//   head_dim), full layers (the same query heads, ModelConfig::Gemma4Fields::full_kv_heads of
//   full_head_dim); the KV pool holds each layer's own shape (KvLayout::layer_shapes). q/k norms
//   with weights, v norm without (Backend::v_head_norm), softmax scale 1. attention_k_eq_v: a full
//   layer's V is its k_proj output before k_norm and RoPE (k_proj loaded twice into the fused
//   q|k|v weight), v-normed.
// - RoPE per layer type: "default" on the sliding layers (rope_local_theta), the full layers'
//   "proportional" one: frequencies over the whole head_dim, 0 past the rotated pairs
//   (full_rope_partial), divided by its factor (an inv_freq table of full_head_dim / 2 entries).
// - K/V sharing: the last num_kv_shared_layers layers write no K/V and attend over the cache of
//   the last earlier layer of their type (Gemma4Fields::kv_layer); use_double_wide_mlp doubles
//   their MLP width.
// - Per-layer inputs (hidden_size_per_layer_input > 0: E2B / E4B) as Gemma 3n's
//   (models/per_layer_inputs.h), joined after the MLP: h += post_per_layer_input_norm(
//   per_layer_projection(gelu_tanh(per_layer_input_gate(h)) * input)). No AltUp or LAuReL.
// - The MoE block (enable_moe_block: 26B-A4B) beside the dense MLP, both on the attention's
//   residual h: post_ffw_norm_1(mlp(pre_ffw_norm(h))) + post_ffw_norm_2(experts(
//   pre_ffw_norm_2(h))) go through post_feedforward_layernorm into the residual. The router:
//   RMSNorm(h) without weight times router.scale * hidden^-0.5 (folded into one f32 weight),
//   router.proj, softmax over all experts, top-k, renormalised, times router.per_expert_scale
//   (MoeRouting::expert_scale); the experts gelu_tanh gated (MoeExpertMlp::gelu_tanh).
// - Each layer's output times its layer_scalar (a checkpoint buffer, read at load).
// - Final: RMSNorm, the tied head (the embedding scaled by sqrt(hidden) at the input),
//   final_logit_softcapping. Norms scale by w (not 1 + w).
//
// Tensor parallelism, LoRA, MTP, quantized and fp8 weights are refused at load, and so is a
// backend whose attention cannot take the full layers' head_dim (Backend::max_attention_head_dim:
// every released Gemma 4's full layers have 512, which CUDA's kernel takes).
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Builds the model from an opened gemma4_text checkpoint, which it keeps (the per-layer
// embedding table, where there is one, is read from its mapping at every step). Needs
// Backend::supports_altup (v norm, the per-layer gate) and, with the MoE block,
// supports_gelu_experts: the CPU and CUDA backends.
Expected<std::unique_ptr<Model>> load_gemma4(std::unique_ptr<Checkpoint> checkpoint, Backend& backend,
                                             const LoadOptions& options);

}  // namespace brigade
