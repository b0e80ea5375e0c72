// ModernBERT (transformers' ModernBertModel, and the encoder of ModernBertForMaskedLM and
// ModernBertForSequenceClassification checkpoints: gte-modernbert-base, modernbert-embed-base,
// gte-reranker-modernbert-base, ModernBERT-base) over the Backend ops:
//
//   x = LayerNorm(tok_embeddings[id])                      (no positions table, no token types)
//   per layer l:  x += Wo · attention(RoPE(Wqkv · attn_norm(x)))   (attn_norm: none on layer 0)
//                 x += mlp.Wo · (gelu(in) * gate), [in | gate] = mlp.Wi · mlp_norm(x)
//   hidden = final_norm(x)
//
// Every norm is a LayerNorm (a bias only with norm_bias). Attention is bidirectional: a global
// layer (layer_types full_attention; every global_attn_every_n_layers-th) sees the whole prompt
// under RoPE of rope_theta, a local one (sliding_attention) the tokens within sliding_window
// (local_attention / 2) on either side, |i - j| <= w, under RoPE of rope_local_theta. That window
// is the CPU attention's: AttentionMeta::sliding_window w + 1 bounds a row at position p from
// below (p - w) and attend_until min(p + w, n - 1) from above.
//
// The forward fills StepBatch::hidden (final_norm's output: transformers' last_hidden_state) for
// pooling and computes no logits; the masked-LM head of a ModernBertForMaskedLM checkpoint is
// not loaded (such a checkpoint serves embeddings of its encoder, as the BERT path serves
// BertForMaskedLM). The classification head is models/classifier.h's. Each sequence of a step
// must be a whole prompt (models/encoder_checks.h). Runs on the CPU backend only. Wi's output
// [input | gate] goes through Backend::gelu_mul (the exact GELU of the input half times the gate).
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Builds the encoder of a checkpoint whose ModelConfig::arch is "modernbert": every weight
// shape-checked, matrices in the checkpoint's float type (or options.weight_dtype: f32, bf16,
// f16). unsupported as check_encoder_load says (not the CPU backend, tp > 1, LoRA, another
// weight type).
Expected<std::unique_ptr<Model>> load_modernbert(const Checkpoint& checkpoint, Backend& backend,
                                                 const LoadOptions& options);

}  // namespace brigade
