// The encoders of the BERT family (transformers' BertModel, RobertaModel, XLMRobertaModel, the
// encoder of their *ForMaskedLM and *ForSequenceClassification checkpoints), over the Backend ops:
// word + position + token-type embeddings and a LayerNorm, then post-norm layers (attention with
// biases in which every token of a prompt sees every other, LayerNorm, GELU MLP, LayerNorm). The
// forward fills StepBatch::hidden (the last layer's output: transformers' last_hidden_state) for
// pooling; an encoder computes no logits. Each sequence of a step must be a whole prompt
// (positions 0..n-1 in that step): the scheduler runs an encoder's prompts unchunked and
// uncached. K/V go through the sequence's KV pages like a decoder's (attend_until: to the
// prompt's last position). Runs where the backend has the vision ops (LayerNorm, GELU): the CPU.
// NomicBertModel (nomic-embed-text-v1 / v1.5, arch nomic_bert) is the same post-norm stack with
// RoPE on q and k instead of a position table, no biases but the LayerNorms', and a SwiGLU MLP.
#pragma once

#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// A prompt id of an encoder with two token types (ModelConfig::type_vocab_size) carries its
// token type in bit 30, as vLLM encodes BERT's token_type_ids into its input ids: a pair's second
// segment (text_pair) is type 1. The engine packs them (EmbedOptions::token_type_ids); the
// encoder unpacks them.
constexpr int kTokenTypeShift = 30;
constexpr int32_t with_token_type(int32_t id, int type) { return id | static_cast<int32_t>(type << kTokenTypeShift); }
constexpr int32_t token_id_part(int32_t v) { return v < 0 ? v : v & ((int32_t{1} << kTokenTypeShift) - 1); }
constexpr int token_type_part(int32_t v) { return v < 0 ? 0 : (v >> kTokenTypeShift); }

// Builds the encoder of a checkpoint whose ModelConfig::encoder is set: every weight shape-checked,
// q|k|v fused with their biases, matrices in the checkpoint's float type (or the one
// options.weight_dtype asks: f32, bf16, f16). unsupported on a backend without the vision ops, under
// tensor parallelism, with LoRA adapters or a block-quantized weight type.
Expected<std::unique_ptr<Model>> load_bert(const Checkpoint& checkpoint, Backend& backend, const LoadOptions& options);

}  // namespace brigade
