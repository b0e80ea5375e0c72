// DeepSeek Sparse Attention (DSA): the lightning indexer of DeepSeek-V3.2 (deepseek_v32) and GLM-5
// (glm_moe_dsa), run by DeepseekModel (models/deepseek.h) in each MLA layer before the attention.
//
// Per full layer (transformers' DeepseekV32Indexer; H index heads of D, dr = qk_rope_head_dim):
//   q = wq_b(q_resid) [H D], q_resid = q_a_layernorm(q_a_proj(x)) (the MLA query's latent);
//   k = LayerNorm(wk(x)) [D] (weight and bias, eps 1e-6); RoPE over the first dr dims of every q
//   head and of k (V3.2: halves; GLM-5: adjacent pairs; the model's frequencies and YaRN factor);
//   w = weights_proj(x) [H];
//   score(t, p) = sum_h w_h relu(q_h · k_p) / sqrt(D H) for the visible positions p <= pos(t);
//   the query attends to its index_topk best positions only (Backend::dsa_topk, then
//   Backend::mla_sparse_attention). x is the layer's input_layernorm output. GLM-5's "shared"
//   layers have no indexer and reuse the previous full layer's choice.
// The keys k_p are cached: they live in latent-cache rows of extra pool layers after the model's
// (DsaKeyPlan), so paging, prefix hits and the host / disk tiers carry them with the latents.
#pragma once

#include <vector>

#include "core/backend.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

// One full layer's indexer weights.
struct DsaIndexer {
  OwnedTensor wq_b;          // [H D, q_lora]
  OwnedTensor wk;            // [D, hidden]
  OwnedTensor k_norm_w;      // [D] f32
  OwnedTensor k_norm_b;      // [D] f32
  OwnedTensor weights_proj;  // [H, hidden]
  bool empty() const { return wq_b.tensor.empty(); }
};

// Activations for up to T rows.
struct DsaScratch {
  OwnedTensor q;          // [T, H D]
  OwnedTensor k, k_norm;  // [T, D]
  OwnedTensor weights;    // [T, H]
  OwnedTensor indices;    // [T, topk] i32: the last full layer's choice
  OwnedTensor workspace;  // f32 scores for Backend::dsa_topk
};

// Where each full layer's index keys sit in the KV pool: the pool's rows are the latent's width
// W = kv_lora_rank + qk_rope_head_dim, so floor(W / D) layers' keys share a row of one extra pool
// layer after the model's n_layers latent layers (DeepSeek-V3.2: 576 / 128 = 4 layers per extra
// layer, 16 extra for 61 layers; the latent layers themselves stay exactly as DeepSeek-V3's).
// With `n_mtp` MTP modules loaded (models/mtp_module.h), their latent layers n_layers.. come
// before the extra ones and each module's layer is a full one with its own keys (the Hub's MTP
// layers store an indexer, and vLLM / SGLang run it).
class DsaKeyPlan {
 public:
  DsaKeyPlan() = default;
  explicit DsaKeyPlan(const ModelConfig& c, int n_mtp = 0);
  int n_extra_layers() const { return n_extra_; }
  // Layer l's keys: pool layer and first column; l must be a full layer.
  int pool_layer(int l) const { return pool_layer_[static_cast<size_t>(l)]; }
  int column(int l) const { return column_[static_cast<size_t>(l)]; }

 private:
  int n_extra_ = 0;
  std::vector<int> pool_layer_, column_;  // per layer; -1 for a shared layer
};

// Loads layer l's indexer (model.layers.{l}.self_attn.indexer.*), whole on every rank.
Status load_dsa_indexer(WeightLoader& w, const ModelConfig& c, int l, DsaIndexer& out);
Status allocate_dsa_scratch(Backend& backend, const ModelConfig& c, int64_t max_tokens, DsaScratch& s);

// The per-layer inputs of run_dsa_indexer.
struct DsaStep {
  Tensor normed;     // [n, hidden]: the layer's attention input
  Tensor q_resid;    // [n, q_lora]
  Tensor positions;  // [n] i32
  Tensor slots;      // [n] i32
  const AttentionMeta* meta = nullptr;
};

// Runs a full layer's indexer: writes its keys for the step's rows into `keys` (the pool layer of
// DsaKeyPlan, at column `col`) and the rows' choice into s.indices.
void run_dsa_indexer(Backend& b, const ModelConfig& c, const DsaIndexer& idx, const RopeConfig& rope, const DsaStep& step,
                     const KvLayer& keys, int col, const DsaScratch& s);

}  // namespace brigade
