// Multi-head latent attention's weights and steps, shared by DeepseekModel (models/deepseek.h:
// DeepSeek-V2 / V3 and descendants, RoPE over q_pe / k_pe, DSA's indexer, the query temperature,
// tensor parallelism by heads) and Kimi Linear's MLA layers (models/kimi_linear.h: no RoPE at all).
// H heads (this rank's), R = kv_lora_rank, dn / dr / dv = qk_nope / qk_rope / v head dims:
//   mla_project: q = q_b(norm(q_a(x))) or q_proj(x) as [q_nope | q_pe] per head;
//     [c | k_pe] = kv_a_proj_with_mqa(x), c = kv_a_layernorm(c);
//   (the caller rotates q_pe and k_pe, or not);
//   mla_cache_and_absorb: [c | k_pe] into the latent KV cache, q_lat = q_nope · W_UK per head;
//   (the caller runs the attention over the cache into o_lat);
//   mla_output: o_lat · W_UV per head, then o_proj.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/backend.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// One layer's MLA weights.
struct MlaWeights {
  OwnedTensor q_a;          // [q_lora, hidden], empty without q_lora_rank
  OwnedTensor q_a_norm;     // [q_lora] f32
  OwnedTensor q_nope;       // [H dn, q_in]: the nope rows of q_b_proj / q_proj
  OwnedTensor q_pe;         // [H dr, q_in]: their rope rows
  OwnedTensor kv_a_latent;  // [R, hidden]: kv_a_proj_with_mqa's latent rows
  OwnedTensor kv_a_pe;      // [dr, hidden]: its k_pe rows
  OwnedTensor kv_a_norm;    // [R] f32
  OwnedTensor w_uk;         // [H R, dn]: per head W_UK transposed (kv_b_proj's k rows)
  OwnedTensor w_uv;         // [H dv, R]: per head W_UV (kv_b_proj's v rows)
  OwnedTensor o;            // [hidden, H dv]
};

// MLA activations for up to T rows, in the backend's activation dtype.
struct MlaScratch {
  OwnedTensor q_a, q_in;              // [T, q_lora] x2 (with q_lora_rank)
  OwnedTensor q_nope, q_pe;           // [T, H dn], [T, H dr]
  OwnedTensor latent, latent_normed;  // [T, R]
  OwnedTensor k_pe;                   // [T, dr]
  OwnedTensor q_lat, o_lat;           // [T, H R]
  OwnedTensor attn;                   // [T, H dv]
};

// One step's rows [0, n) of MlaScratch, after mla_project.
struct MlaStep {
  Tensor q_in;  // normed, or q_a_layernorm(q_a_proj(normed)) with q_lora_rank
  Tensor q_nope, q_pe, latent_normed, k_pe, q_lat, o_lat, attn;
};

// MlaWeights of layer prefix `p` (model.layers.{l}.), heads `heads` of c.n_heads (all by default):
// self_attn.q_proj (or q_a_proj, q_a_layernorm, q_b_proj), kv_a_proj_with_mqa, kv_a_layernorm,
// kv_b_proj (or GGUF's per-head k_b_proj / v_b_proj, models/gguf_deepseek2.h), o_proj's columns
// of those heads. `attn` names the block under p (LongCat-Flash's two per layer: self_attn.0. and self_attn.1.).
Status load_mla_weights(WeightLoader& w, const ModelConfig& c, const std::string& p, Slice heads, MlaWeights& out,
                        const std::string& attn = "self_attn.");
// MlaScratch of `rows` rows for `n_heads` heads.
Status allocate_mla_scratch(Backend& backend, const ModelConfig& c, int64_t n_heads, int64_t rows, MlaScratch& s);
// The elements of one MLA block's linear weights, all heads (Model::step_cost's dense work per token).
int64_t mla_linear_params(const ModelConfig& c);

// What every MLA + MoE model needs at load (DeepSeek's family, LongCat-Flash): max_batch_tokens of
// at least 1, a backend with the MLA and mixture-of-experts ops, and DSA's ops where the model has
// its indexer; each refused by name.
Status check_mla_backend(const ModelConfig& c, const Backend& backend, const LoadOptions& options);

// The weight dtypes an MLA model loads (its projections and experts stay float: f32, f16, bf16),
// refused by name otherwise; unset (auto) passes.
Status check_mla_weight_dtype(const ModelConfig& c, std::optional<DType> weight_dtype);

// The projections of normed [n, hidden] (header comment); q_pe and k_pe unrotated.
MlaStep mla_project(Backend& b, const ModelConfig& c, const MlaWeights& a, const MlaScratch& s, const Tensor& normed);
// The latent rows [c | k_pe] into `cache` at `slots`, and q_lat = q_nope · W_UK over n_heads.
void mla_cache_and_absorb(Backend& b, const MlaWeights& a, const MlaStep& step, int n_heads, const KvLayer& cache,
                          const Tensor& slots);
// delta [n, hidden] = o_proj(o_lat · W_UV) over n_heads.
void mla_output(Backend& b, const MlaWeights& a, const MlaStep& step, int n_heads, const Tensor& delta);

}  // namespace brigade
