// Kimi Linear's layers (KimiLinearForCausalLM, Moonshot's Kimi-Linear-48B-A3B; config:
// models/kimi_linear_config.h). The model around them is StateSpaceModel (models/state_space.h):
// per layer an RMSNorm, a KDA or an MLA block, then an RMSNorm and a SwiGLU (the first
// first_k_dense_replace layers) or DeepSeek-V3's MoE with shared experts (models/moe_block.h).
//
// KDA (KimiLinearDeltaAttention; H heads of D channels, q, k and v alike):
//   q|k|v = q_proj, k_proj, v_proj (one fused matmul), then the causal depthwise conv + SiLU over
//     q|k|v (q_conv1d | k_conv1d | v_conv1d as one [3 H D, K] weight; Backend::ssm_conv);
//   f = f_b_proj(f_a_proj(x)), beta = b_proj(x); Backend::kda: the gated delta rule with a decay
//     per key channel, exp(-exp(A_log) softplus(f + dt_bias)), beta = sigmoid(beta);
//   out = o_proj(RMSNorm(o) * o_norm.weight * sigmoid(g_b_proj(g_a_proj(x)))) per head.
// MLA (KimiLinearAttention): DeepSeek-V3's absorbed attention (models/mla_block.h, whose weights
// and steps DeepseekModel shares; loaded by load_mla_weights) with no RoPE at all: q's rope part
// and kv_a_proj_with_mqa's k_pe enter the scores as they are (a key part shared by the heads),
// softmax scale (qk_nope + qk_rope)^-1/2; the KV cache holds [c | k_pe] per token
// (KvLayout::latent).
#pragma once

#include <string>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/mla_block.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// One KDA layer's weights (H heads of D, hidden h, K conv taps).
struct KdaBlock {
  OwnedTensor qkv;       // [3 H D, h]: q_proj | k_proj | v_proj
  OwnedTensor conv_w;    // [3 H D, K] f32
  OwnedTensor f_a, f_b;  // [D, h], [H D, D]: the forget gate's low-rank projection
  OwnedTensor a;         // [H] f32: -exp(A_log)
  OwnedTensor dt_bias;   // [H D] f32
  OwnedTensor b;         // [H, h]
  OwnedTensor g_a, g_b;  // [D, h], [H D, D]: the output gate's
  OwnedTensor o_norm;    // [D] f32
  OwnedTensor o;         // [h, H D]
};

// Activations of both blocks for up to T rows, in the backend's activation dtype.
struct KimiScratch {
  OwnedTensor qkv_in, qkv, low, f, beta, gate, y;          // KDA: [T, 3 H D] x2, [T, D], [T, H D], [T, H], [T, H D] x2
  MlaScratch mla;                                          // MLA (models/mla_block.h)
};

// KdaBlock of layer prefix `p` (model.layers.{l}.): self_attn.{q,k,v}_proj, {q,k,v}_conv1d [H D, 1,
// K], f_a_proj, f_b_proj, A_log ([1, 1, H, 1] as the Hub's, [H] or llama.cpp's A as stored),
// dt_bias [H D], b_proj, g_a_proj, g_b_proj, o_norm, o_proj; `gguf`: A_log holds A already.
// `heads`: a tensor-parallel rank's heads (their rows of q/k/v, the conv, f_b, b, g_b, A and
// dt_bias, their columns of o_proj; f_a and g_a whole), all of them for {0, H}. host_params counts
// the parameters read to the host (the conv, A, dt_bias), all heads'.
Status load_kda_block(const Checkpoint& ck, WeightLoader& w, Backend& backend, const ModelConfig& c, const std::string& p,
                      bool gguf, Slice heads, KdaBlock& out, int64_t& host_params);
// Scratch for the KDA blocks of layout `l` (a rank's: ssm_rank_layout) and MLA blocks of
// `mla_heads` heads.
Status allocate_kimi_scratch(Backend& backend, const ModelConfig& c, const SsmLayout& l, int64_t mla_heads, int64_t rows,
                             KimiScratch& s);
// The elements of one KDA block's linear weights (Model::step_cost's dense work per token; an MLA
// block's: mla_linear_params).
int64_t kda_linear_params(const ModelConfig& c);

// A KDA block of layout `l`'s heads (a rank's part under tensor parallelism: its delta is then a
// partial sum) of normed [n, h] into delta [n, h], continuing each sequence's conv_state
// [slots, (K - 1), 3 H D] and state [slots, H, D, D] (f32).
void run_kda_block(Backend& b, const ModelConfig& c, const SsmLayout& l, const KdaBlock& k, const KimiScratch& s,
                   const SsmSeqs& seqs, const Tensor& conv_state, const Tensor& state, const Tensor& normed,
                   const Tensor& delta);
// An MLA block of `n_heads` heads (a rank's) of normed [n, h] into delta [n, h]: the latent rows
// into `cache` at `slots` [n], attention over each sequence's rows (meta).
void run_nope_mla(Backend& b, const ModelConfig& c, int n_heads, const MlaWeights& a, const KimiScratch& s,
                  const KvLayer& cache, const AttentionMeta& meta, const Tensor& slots, const Tensor& normed,
                  const Tensor& delta);

}  // namespace brigade
