// Internal to models/: the two ends every decoder shares (models/llama.cpp, models/deepseek.cpp):
// the token embedding, the final norm and the lm_head, their loading, the forward's last stage
// (final norm, logit rows, head) and what they cost a step by the roofline rule (Model::step_cost).
#pragma once

#include "core/backend.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// out = the decoder's norm of x with `weight`: an RMSNorm, or a LayerNorm where
// ModelConfig::layer_norms (Cohere, Phi-3.5-MoE); eps rms_eps. `bias` [hidden] f32
// (ModelConfig::norm_bias: the LayerNorm's, or in llama.cpp's phimoe the RMSNorm's) is added after
// it; empty: none.
void apply_norm(Backend& b, const ModelConfig& c, const Tensor& x, const Tensor& weight, const Tensor& out,
                const Tensor& bias = Tensor());
// residual += delta, then out = apply_norm(residual) (add_rms_norm's one pass for RMSNorms).
void add_norm(Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta, const Tensor& weight,
              const Tensor& out, const Tensor& bias = Tensor());

struct DecoderEnds {
  OwnedTensor embed;       // [vocab, hidden]
  OwnedTensor lm_head;     // [vocab, hidden]; empty when tied to embed or not loaded (load_head)
  OwnedTensor final_norm;  // [hidden] f32
  OwnedTensor final_norm_bias;  // [hidden] f32 (ModelConfig::norm_bias: model.norm.bias), or empty
  OwnedTensor head_bias;   // [vocab] f32 added to the logits (ModelConfig::lm_head_bias: lm_head.bias; rank 0's), or empty
  OwnedTensor positions;   // [max_position, hidden] (ModelConfig::learned_positions: GPT-2's wpe), or empty

  // model.embed_tokens.weight, and model.embed_positions.weight where ModelConfig::learned_positions.
  Status load_embedding(WeightLoader& w, const ModelConfig& c);
  // x [n, hidden] += positions[pos[i]] (pos [n] i32, each < max_position: the step check's), through
  // scratch [n, hidden]; nothing without learned positions.
  void add_positions(Backend& b, const Tensor& pos, const Tensor& x, const Tensor& scratch) const;
  // model.norm.weight (and .bias where ModelConfig::norm_bias) and, unless tied or with_head is
  // false (a tensor-parallel rank that computes no logits), lm_head.weight; lm_head.bias where
  // ModelConfig::lm_head_bias and with_head (tied or not: the bias is the head's own).
  Status load_head(WeightLoader& w, const ModelConfig& c, bool with_head);
  // The tied embedding or the lm_head.
  const Tensor& head(const ModelConfig& c) const { return c.tie_embeddings ? embed.tensor : lm_head.tensor; }
  // residual [n, hidden] += delta; normed = final_norm(residual); hidden [h, hidden] =
  // normed[hidden_rows] (the pooling hook; h = hidden_rows.numel(), nothing when 0); logits
  // [r, vocab] f32 = head · normed[rows] through selected [r, hidden] (r = rows.numel(), nothing
  // when 0), plus head_bias, soft-capped where ModelConfig::final_softcap says.
  void logits(Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta, const Tensor& normed,
              const Tensor& selected, const Tensor& rows, const Tensor& logits, const Tensor& hidden_rows = Tensor(),
              const Tensor& hidden = Tensor()) const;
  // logits() with `norm` (no bias) in place of final_norm (DeepSeek's MTP module: its
  // shared_head.norm before the model's head).
  void logits_with(const Tensor& norm, Backend& b, const ModelConfig& c, const Tensor& residual, const Tensor& delta,
                   const Tensor& normed, const Tensor& selected, const Tensor& rows, const Tensor& logits,
                   const Tensor& hidden_rows, const Tensor& hidden) const;
  // Bytes of these weights as loaded (part of the model's weight bytes) ...
  double loaded_bytes() const;
  // ... and what a step of n tokens reads of them: the n embedding rows (and position rows), the
  // head when any row wants logits.
  double step_bytes(const ModelConfig& c, double n, bool any_logits) const;
};

}  // namespace brigade
