// MiniMax-Text-01 / MiniMax-M1's lightning attention layers (MiniMaxForCausalLM; config:
// models/minimax_config.h). The model around them is StateSpaceModel (models/state_space.h): per
// layer an RMSNorm, a lightning or a softmax attention block (Mixtral's: GQA, RoPE over whole
// heads), then an RMSNorm and Mixtral's experts; after each block the residual becomes
// alpha * (the block's normed input) + beta * (its output) (ModelConfig::block_alpha / block_beta).
//
// Lightning attention (MiniMaxLightningAttention; H heads of D):
//   qkv = silu(qkv_proj(x)), per head q | k | v;  Backend::lightning_attention: S = exp(-slope_h) S
//   + k^T v, o = q S, with slope_h = (2^(-8/H))^(h+1) (1 - l / (L - 1 + 1e-5) + 1e-5) for layer l
//   of L (transformers' get_slope_rate; llama.cpp's minimax-01 divides by L - 1 exactly);
//   out = out_proj(RMSNorm(o over all H D channels, eps 1e-6: MiniMaxRMSNorm's default, not the
//   config's) * sigmoid(output_gate(x))).
#pragma once

#include <string>

#include "core/backend.h"
#include "core/communicator.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// One lightning attention layer's weights (H heads of D, hidden h).
struct LightningBlock {
  OwnedTensor qkv;    // [3 H D, h]: qkv_proj (per head q | k | v)
  OwnedTensor gate;   // [H D, h]: output_gate
  OwnedTensor norm;   // [H D] f32
  OwnedTensor o;      // [h, H D]: out_proj
  OwnedTensor decay;  // [H] f32: exp(-slope_h)
};

// Its activations for up to T rows, in the backend's activation dtype.
struct LightningScratch {
  OwnedTensor qkv, y, gate;  // [T, 3 H D], [T, H D] x2
};

// The slope of head h of layer l (of n_layers) with n_heads heads, as transformers computes it (f32).
float lightning_slope(int n_heads, int h, int l, int n_layers);

// LightningBlock of layer l, prefix `p` (model.layers.{l}.): self_attn.qkv_proj, output_gate, norm,
// out_proj; the decays from the config (a checkpoint's slope_rate / *_decay buffers are
// transformers' cache of the same numbers and are not read). `heads`: a tensor-parallel rank's
// (their rows of qkv_proj and output_gate, norm weights and decays, their columns of out_proj),
// all of them for {0, H}.
Status load_lightning_block(WeightLoader& w, Backend& backend, const ModelConfig& c, int l, const std::string& p,
                            Slice heads, LightningBlock& out);
// Scratch for `l`'s heads (a rank's: ssm_rank_layout).
Status allocate_lightning_scratch(Backend& backend, const SsmLayout& l, int64_t rows, LightningScratch& s);
// The elements of one lightning block's linear weights (Model::step_cost).
int64_t lightning_linear_params(const ModelConfig& c);

// A lightning block of layout `l`'s heads of normed [n, h] into delta [n, h], continuing each
// sequence's state [slots, H, D, D] (f32). Under tensor parallelism (comm, a rank's heads in `l`)
// delta is this rank's partial sum, and the norm over all H D channels all-reduces each row's sum
// of squares through `sums` [n, 2] f32; comm null: one rank.
Status run_lightning_block(Backend& b, const ModelConfig& c, const SsmLayout& l, const LightningBlock& k,
                           const LightningScratch& s, const SsmSeqs& seqs, const Tensor& state, const Tensor& normed,
                           const Tensor& delta, Communicator* comm, const Tensor& sums);

}  // namespace brigade
