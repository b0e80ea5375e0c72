#include "models/deepseek.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "models/decoder_ends.h"
#include "models/dsa_indexer.h"
#include "models/load_progress.h"
#include "models/mla_block.h"
#include "models/mtp_module.h"
#include "models/moe_block.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/tensor_parallel.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

// One layer's MLA weights (models/mla_block.h) with DSA's indexer.
struct MlaBlock : MlaWeights {
  DsaIndexer indexer;  // deepseek_v32 / glm_moe_dsa full layers (models/dsa_indexer.h); else empty
};

struct DeepseekLayer {
  OwnedTensor attn_norm;  // [hidden] f32
  MlaBlock attn;
  OwnedTensor mlp_norm;   // [hidden] f32
  OwnedTensor gate_up;    // dense layers: [2 I, hidden]
  OwnedTensor down;       // [hidden, I]
  MoeBlock moe;           // sparse layers
  OwnedTensor moe_norm;   // [hidden] f32 on the MoE block's output (ModelConfig::moe_post_norm), or empty
};

// The MTP module (num_nextn_predict_layers; model.layers.{num_hidden_layers}.*) of DeepSeek-V3,
// GLM-4.7-Flash, DeepSeek-V3.2 and GLM-5, as SGLang's DeepseekModelNextN runs it
// (models/mtp_module.h): its ends and one sparse decoder layer, with a DSA indexer of its own in
// V3.2 / GLM-5 (whose keys DsaKeyPlan places after the module's latent layer).
struct MtpModule {
  MtpEnds ends;
  DeepseekLayer layer;
};

// Activations for up to T rows, in the backend's activation dtype.
struct Scratch {
  OwnedTensor residual, normed, delta, selected;  // [T, hidden]
  MlaScratch mla;                                 // this rank's heads
  OwnedTensor gate_up, act;                       // [T, 2 I], [T, I] (dense layers)
  MoeScratch moe;
};

std::string layer_name(int l, const char* suffix) { return "model.layers." + std::to_string(l) + "." + suffix; }

class DeepseekModel final : public Model {
 public:
  DeepseekModel(const ModelConfig& config, Backend& backend, const LoadOptions& options)
      : config_(config), backend_(backend), options_(options), comm_(options.communicator) {
    if (comm_ != nullptr) rank_ = comm_->rank(), size_ = comm_->size();
    // Tensor parallelism: rank r holds query heads [r H/size, (r+1) H/size) with their rows of
    // q_b_proj and kv_b_proj (W_UK, W_UV) and o_proj's matching columns; the latent projections
    // (q_a, kv_a) and so the latent KV cache are the same on every rank.
    mla_ = {config.n_heads / size_, config.kv_lora_rank, config.qk_rope_head_dim};
    inter_ = config.intermediate_size / size_;
    moe_ = moe_shard(config, rank_, size_, options.expert_parallel);
  }

  Status load(const Checkpoint& ck);

  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    // DSA's index keys take dsa_keys_.n_extra_layers() more latent-wide layers after the model's.
    KvLayout l{n_kv_layers() + dsa_keys_.n_extra_layers(), n_pages, page_size, 1, mla_.row_width(), dtype};
    l.latent = true;
    return l;
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int n_mtp_layers() const override { return with_mtp_ ? 1 : 0; }
  Status forward_mtp(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;

 private:
  Status load_attention(WeightLoader& w, int l, MlaBlock& a);
  Status load_layer(WeightLoader& w, int l, DeepseekLayer& layer);
  Status load_mtp(WeightLoader& w);
  int n_kv_layers() const { return config_.n_layers + n_mtp_layers(); }
  // Checks shared by forward and forward_mtp; uploads the step's ints.
  Expected<AttentionMeta> begin_step(const StepBatch& batch, const KvCache& kv, const Tensor& logits);
  Status allocate_scratch();
  // With `dsa_kv` (deepseek_v32 / glm_moe_dsa), layer l's indexer chooses the rows each query
  // attends to (a shared layer keeps the previous full layer's choice): models/dsa_indexer.h.
  Status run_attention(const MlaBlock& a, const KvLayer& cache, const AttentionMeta& meta, int n,
                       const KvCache* dsa_kv = nullptr, int l = -1);
  Status run_mlp(const DeepseekLayer& layer, int n);
  // Sums a block's partial output over the tensor-parallel ranks (nothing to do without TP).
  Status reduce(const Tensor& delta) { return comm_ != nullptr ? comm_->all_reduce_sum(delta) : Status::ok(); }

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  Communicator* comm_;  // nullptr without tensor parallelism
  int rank_ = 0, size_ = 1;
  MlaLayout mla_;       // this rank's heads
  int64_t inter_ = 0;   // this rank's columns of a dense MLP
  MoeShard moe_;        // this rank's part of the sparse layers
  RopeConfig rope_;  // over the qk_rope_head_dim dims of q_pe's H heads and k_pe's one
  DecoderEnds ends_;
  std::vector<DeepseekLayer> layers_;
  bool with_mtp_ = false;
  MtpModule mtp_;
  int64_t mtp_params_ = 0, mtp_bytes_ = 0;  // the module's part of n_params_ / weight_bytes_
  Scratch scratch_;
  DsaKeyPlan dsa_keys_;  // deepseek_v32 / glm_moe_dsa: where each layer's index keys are cached
  int dsa_target_layers_ = 0;  // the pool layers the target's latents and keys take (no MTP module)
  RopeConfig dsa_rope_;  // the indexer's RoPE (its own style) over the first qk_rope_head_dim dims
  DsaScratch dsa_scratch_;
  StepInputs ints_;
  int64_t n_params_ = 0;
  int64_t weight_bytes_ = 0;
  int64_t expert_params_ = 0;  // routed experts of every sparse layer (in n_params_)
  int64_t expert_bytes_ = 0;   // their bytes as loaded (in weight_bytes_)
};

Status DeepseekModel::load_attention(WeightLoader& w, int l, MlaBlock& a) {
  return load_mla_weights(w, config_, layer_name(l, ""), Slice{int64_t{rank_} * mla_.n_heads, mla_.n_heads}, a);
}

Status DeepseekModel::load_layer(WeightLoader& w, int l, DeepseekLayer& layer) {
  const auto& c = config_;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm, w.vector_f32({layer_name(l, "input_layernorm.weight")}, {hidden}));
  BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm, w.vector_f32({layer_name(l, "post_attention_layernorm.weight")}, {hidden}));
  BRIGADE_RETURN_IF_ERROR(load_attention(w, l, layer.attn));
  // The MTP module's layer (l == n_layers) always has its own indexer.
  if (c.dsa.enabled() && (l >= c.n_layers || !c.dsa.shared[static_cast<size_t>(l)]))
    BRIGADE_RETURN_IF_ERROR(load_dsa_indexer(w, c, l, layer.attn.indexer));
  if (c.is_moe_layer(l)) {
    BRIGADE_ASSIGN_OR_RETURN(layer.moe, load_moe_block(w, c, l, moe_));
    if (c.moe_post_norm) {  // A.X K1's, at the layer in its checkpoints (transformers moves it under mlp.)
      const std::string hub = layer_name(l, "post_mlp_layernorm.weight");
      BRIGADE_ASSIGN_OR_RETURN(layer.moe_norm,
                               w.vector_f32({w.has(hub) ? hub : layer_name(l, "mlp.post_mlp_layernorm.weight")}, {hidden}));
    }
    expert_params_ += int64_t{3} * c.n_experts * c.moe_intermediate_size * hidden;
    expert_bytes_ += static_cast<int64_t>(layer.moe.expert_bytes());
    return Status::ok();
  }
  const Slice cols{rank_ * inter_, inter_};
  BRIGADE_ASSIGN_OR_RETURN(layer.gate_up, w.fused({layer_name(l, "mlp.gate_proj.weight"), layer_name(l, "mlp.up_proj.weight")},
                                                  {inter, inter}, hidden, {cols, cols}));
  BRIGADE_ASSIGN_OR_RETURN(layer.down, w.matrix(layer_name(l, "mlp.down_proj.weight"), hidden, inter, {}, cols));
  return Status::ok();
}

Status DeepseekModel::load(const Checkpoint& ck) {
  const auto& c = config_;
  WeightLoader w(ck, backend_, options_.weight_dtype);
  BRIGADE_RETURN_IF_ERROR(ends_.load_embedding(w, c));
  BRIGADE_RETURN_IF_ERROR(load_layers_with_progress(
      load_progress_name(ck), c.n_layers, options_.progress,
      [&](int l) { return load_layer(w, l, layers_.emplace_back()); }, [&] { return w.n_bytes(); }));
  BRIGADE_RETURN_IF_ERROR(ends_.load_head(w, c, /*with_head=*/rank_ == 0));  // only rank 0 computes logits
  if (options_.mtp) BRIGADE_RETURN_IF_ERROR(load_mtp(w));
  n_params_ = w.n_params();
  weight_bytes_ = w.n_bytes();
  rope_.style = c.rope_style;
  rope_.rotary_dim = c.qk_rope_head_dim;
  rope_.inv_freq = rope_inv_freq_scaled(c.rope_theta, c.qk_rope_head_dim, c.rope_scaling);
  rope_.attention_factor = rope_attention_factor(c.rope_scaling);
  if (c.dsa.enabled()) {
    dsa_keys_ = DsaKeyPlan(c, n_mtp_layers());
    dsa_target_layers_ = c.n_layers + DsaKeyPlan(c).n_extra_layers();
    dsa_rope_ = rope_;
    dsa_rope_.style = c.dsa.rope_style;
    BRIGADE_RETURN_IF_ERROR(allocate_dsa_scratch(backend_, c, options_.max_batch_tokens, dsa_scratch_));
  }
  BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  backend_.synchronize();  // uploads from staging memory have finished before it is freed
  return Status::ok();
}

Status DeepseekModel::load_mtp(WeightLoader& w) {
  if (config_.dsa.share_for_mtp)
    return unsupported("config.json: index_share_for_mtp_iteration = true is not supported with speculative method "
                       "mtp (the MTP module's indexer runs at every draft step here); set it to false");
  const int64_t expert_params = expert_params_, expert_bytes = expert_bytes_;  // the target's experts only
  BRIGADE_ASSIGN_OR_RETURN(const MtpSize size, load_mtp_module(w, config_, size_, mtp_.ends, [&](int l) {
                             return load_layer(w, l, mtp_.layer);
                           }));
  mtp_params_ = size.params, mtp_bytes_ = size.bytes;
  expert_params_ = expert_params, expert_bytes_ = expert_bytes;
  with_mtp_ = true;
  return Status::ok();
}

Status DeepseekModel::allocate_scratch() {
  const auto& c = config_;
  const DType a = backend_.activation_dtype();
  const int64_t t = options_.max_batch_tokens, hidden = c.hidden_size;
  Scratch& s = scratch_;
  auto make = [&](OwnedTensor& dst, int64_t cols) -> Status {
    BRIGADE_ASSIGN_OR_RETURN(dst, alloc_tensor(backend_, a, t, cols));
    return Status::ok();
  };
  for (OwnedTensor* p : {&s.residual, &s.normed, &s.delta, &s.selected}) BRIGADE_RETURN_IF_ERROR(make(*p, hidden));
  BRIGADE_RETURN_IF_ERROR(allocate_mla_scratch(backend_, c, mla_.n_heads, t, s.mla));
  const bool mtp_sparse = with_mtp_ && c.is_moe_layer(c.n_layers);
  if (c.n_moe_layers() < c.n_layers || (with_mtp_ && !mtp_sparse)) {
    BRIGADE_RETURN_IF_ERROR(make(s.gate_up, 2 * inter_));
    BRIGADE_RETURN_IF_ERROR(make(s.act, inter_));
  }
  if (c.n_moe_layers() > 0 || mtp_sparse) {
    BRIGADE_ASSIGN_OR_RETURN(s.moe, allocate_moe_scratch(backend_, c, moe_, t));
  }
  return ints_.allocate(backend_, t);
}

Status DeepseekModel::run_attention(const MlaBlock& a, const KvLayer& cache, const AttentionMeta& meta, int n,
                                    const KvCache* dsa_kv, int l) {
  const Scratch& s = scratch_;
  const Tensor normed = s.normed.tensor.rows(0, n);
  const MlaStep step = mla_project(backend_, config_, a, s.mla, normed);
  const Tensor q_pe = step.q_pe, q_lat = step.q_lat, o_lat = step.o_lat;
  const Tensor positions = ints_.positions(n);
  backend_.rope(q_pe, QkvLayout{mla_.n_heads, 0, mla_.rope_dim}, positions, rope_);
  backend_.rope(step.k_pe, QkvLayout{1, 0, mla_.rope_dim}, positions, rope_);
  mla_cache_and_absorb(backend_, a, step, mla_.n_heads, cache, ints_.slots(n));
  if (config_.attn_temperature_floor > 0.0f) {  // Mistral 4's / Mistral Large 3's query temperature, all of q
    const ModelConfig& c = config_;
    backend_.attention_temperature(q_lat, QkvLayout{mla_.n_heads, 0, mla_.kv_lora_rank}, positions,
                                   c.attn_temperature_floor, c.attn_temperature_scale, c.attn_temperature_offset);
    backend_.attention_temperature(q_pe, QkvLayout{mla_.n_heads, 0, mla_.rope_dim}, positions, c.attn_temperature_floor,
                                   c.attn_temperature_scale, c.attn_temperature_offset);
  }
  if (dsa_kv != nullptr) {
    if (!a.indexer.empty())
      run_dsa_indexer(backend_, config_, a.indexer, dsa_rope_, DsaStep{normed, step.q_in, positions, ints_.slots(n), &meta},
                      dsa_kv->layer(dsa_keys_.pool_layer(l)), dsa_keys_.column(l), dsa_scratch_);
    backend_.mla_sparse_attention(q_lat, q_pe, mla_, cache, meta, dsa_scratch_.indices.tensor.rows(0, n),
                                  config_.attn_scale, o_lat);
  } else {
    backend_.mla_attention(q_lat, q_pe, mla_, cache, meta, config_.attn_scale, o_lat);
  }
  mla_output(backend_, a, step, mla_.n_heads, s.delta.tensor.rows(0, n));
  return reduce(s.delta.tensor.rows(0, n));
}

Status DeepseekModel::run_mlp(const DeepseekLayer& layer, int n) {
  const Tensor normed = scratch_.normed.tensor.rows(0, n), delta = scratch_.delta.tensor.rows(0, n);
  if (!layer.moe.empty()) {
    run_moe_block(backend_, config_, moe_, layer.moe, scratch_.moe, normed, delta);
    BRIGADE_RETURN_IF_ERROR(reduce(delta));
    if (!layer.moe_norm.tensor.empty()) backend_.rms_norm(delta, layer.moe_norm.tensor, config_.rms_eps, delta);
    return Status::ok();
  }
  const Tensor gate_up = scratch_.gate_up.tensor.rows(0, n), act = scratch_.act.tensor.rows(0, n);
  backend_.matmul(normed, layer.gate_up.tensor, Tensor(), gate_up);
  backend_.silu_mul(gate_up, act);
  backend_.matmul(act, layer.down.tensor, Tensor(), delta);
  return reduce(delta);
}

Expected<AttentionMeta> DeepseekModel::begin_step(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const StepLimits limits{config_.vocab_size, config_.max_position, options_.max_batch_tokens,
                          n_kv_layers() + dsa_keys_.n_extra_layers(), 1, mla_.row_width()};
  if (!kv.layout().latent)
    return invalid_argument("a DeepSeek (MLA) model needs its latent KV layout (Model::kv_layout)");
  // Checked before the first collective, as check_step is, so a refused step never leaves a peer
  // waiting.
  if (rank_ != 0 && (!batch.logit_rows.empty() || !batch.hidden_rows.empty()))
    return invalid_argument("tensor-parallel rank " + std::to_string(rank_) +
                            " computes no logits (rank 0 does): pass a step without logit rows");
  BRIGADE_ASSIGN_OR_RETURN(StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, config_.hidden_size, backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(check_step_images(batch, config_.vision, false).status());
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch));
  return ints_.meta(batch, bounds, 0);
}

Status DeepseekModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  BRIGADE_ASSIGN_OR_RETURN(const AttentionMeta meta, begin_step(batch, kv, logits));
  const int n = batch.n_tokens();
  const Tensor residual = scratch_.residual.tensor.rows(0, n);
  const Tensor normed = scratch_.normed.tensor.rows(0, n);
  const Tensor delta = scratch_.delta.tensor.rows(0, n);
  backend_.embedding(ends_.embed.tensor, ints_.tokens(batch), residual);
  // MiniCPM 3's muP scalings (ModelConfig's Granite multipliers; 0 or 1: none): the embeddings,
  // each sublayer's output before its residual add, the logits.
  const float emb = config_.embedding_multiplier, res = config_.residual_multiplier;
  if (emb > 0.0f && emb != 1.0f) backend_.scale(residual, emb);
  auto scaled = [&](Status st) {
    if (st.is_ok() && res > 0.0f && res != 1.0f) backend_.scale(delta, res);
    return st;
  };
  for (int l = 0; l < config_.n_layers; ++l) {
    const DeepseekLayer& layer = layers_[static_cast<size_t>(l)];
    if (l == 0) backend_.rms_norm(residual, layer.attn_norm.tensor, config_.rms_eps, normed);
    else backend_.add_rms_norm(residual, delta, layer.attn_norm.tensor, config_.rms_eps, normed);
    BRIGADE_RETURN_IF_ERROR(scaled(run_attention(layer.attn, kv.layer(l), meta, n, config_.dsa.enabled() ? &kv : nullptr, l)));
    backend_.add_rms_norm(residual, delta, layer.mlp_norm.tensor, config_.rms_eps, normed);
    BRIGADE_RETURN_IF_ERROR(scaled(run_mlp(layer, n)));
  }
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), h = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && h == 0) return Status::ok();
  ends_.logits(backend_, config_, residual, delta, normed, scratch_.selected.tensor.rows(0, r), ints_.logit_rows(r), logits,
               ints_.hidden_rows(h), batch.hidden);
  if (const float s = config_.logits_multiplier(); r > 0 && s != 1.0f) backend_.scale(logits, s);
  return Status::ok();
}

Status DeepseekModel::forward_mtp(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  if (!with_mtp_) return unsupported("this " + config_.arch + " model was loaded without its MTP module (LoadOptions::mtp)");
  BRIGADE_RETURN_IF_ERROR(check_prev_hidden(batch, config_.hidden_size, backend_.activation_dtype()));
  BRIGADE_ASSIGN_OR_RETURN(const AttentionMeta meta, begin_step(batch, kv, logits));
  const int n = batch.n_tokens();
  const MtpModule& m = mtp_;
  const Tensor residual = scratch_.residual.tensor.rows(0, n);
  const Tensor normed = scratch_.normed.tensor.rows(0, n);
  const Tensor delta = scratch_.delta.tensor.rows(0, n);
  m.ends.input(backend_, config_, ends_.embed.tensor, ints_.tokens(batch), batch.prev_hidden, residual, normed, delta);
  backend_.add_rms_norm(residual, delta, m.layer.attn_norm.tensor, config_.rms_eps, normed);
  const int l = config_.n_layers;
  BRIGADE_RETURN_IF_ERROR(run_attention(m.layer.attn, kv.layer(l), meta, n, config_.dsa.enabled() ? &kv : nullptr, l));
  backend_.add_rms_norm(residual, delta, m.layer.mlp_norm.tensor, config_.rms_eps, normed);
  BRIGADE_RETURN_IF_ERROR(run_mlp(m.layer, n));
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), h = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && h == 0) return Status::ok();
  ends_.logits_with(m.ends.head_norm.tensor, backend_, config_, residual, delta, normed, scratch_.selected.tensor.rows(0, r),
                    ints_.logit_rows(r), logits, ints_.hidden_rows(h), batch.hidden);
  return Status::ok();
}

// DSA's attention work: each query attends to at most topk of its visible keys, and a sequence's
// queries read at most n_q topk distinct latent rows of its context.
AttentionWork sparse_attention_work(const StepBatch& b, int topk) {
  AttentionWork w;
  for (int s = 0; s < b.n_seqs(); ++s) {
    const int n_q = b.q_start[static_cast<size_t>(s) + 1] - b.q_start[static_cast<size_t>(s)];
    const int ctx = b.ctx_len[static_cast<size_t>(s)];
    for (int j = 0; j < n_q; ++j) w.pairs += std::min(ctx - n_q + j + 1, topk);
    w.kv_read += std::min(static_cast<double>(ctx), static_cast<double>(n_q) * topk);
  }
  return w;
}

// The roofline rule of Model::step_cost with MLA's attention: per (query, visible key) pair and
// head, 2 (R + dr) flops for the score and 2 R for the latent output; the absorbed W_UK / W_UV
// products are kv_b_proj's weights once per token, counted with the linear layers. Bytes: the
// latent cache rows (kv_bytes_per_token is the latent's, KvLayout::latent). Routed experts: k of
// E per token for the flops, min(E, n k) of E per sparse layer for the bytes.
// DSA (deepseek_v32, glm_moe_dsa): the attention's pairs and latent rows are the topk chosen
// (sparse_attention_work); each full layer's indexer scores every visible key, 2 H (D + 1) flops
// per pair (its q.k products, the weighted ReLU sum), and reads the D-wide index key of every
// context row (D of a pool row's row_width elements).
StepCost DeepseekModel::step_cost(const StepBatch& b, double kv_bytes_per_token) const {
  const double n = b.n_tokens(), rows = static_cast<double>(b.logit_rows.size());
  const double table = static_cast<double>(config_.vocab_size) * config_.hidden_size;
  // Per rank under tensor parallelism: 1/size of the linear layers' work (the latent projections,
  // replicated on every rank, are counted split too: a small overcount of the split), and the
  // experts it holds (MoeShard).
  const double linear_params =
      static_cast<double>(n_params_ - mtp_params_) - table - (config_.tie_embeddings ? 0.0 : table);
  const double e = config_.n_experts, k = config_.n_experts_per_tok, held = moe_.n_experts;
  const double dense_params = (linear_params - static_cast<double>(expert_params_) * (1.0 - k / e)) / size_;
  const double touched = std::min(held, n * k) / held;
  const AttentionWork work = attention_work(b, 0);
  const ModelConfig::DsaConfig& dsa = config_.dsa;
  const AttentionWork attended = dsa.enabled() ? sparse_attention_work(b, dsa.topk) : work;
  const double per_pair = 2.0 * (mla_.row_width() + mla_.kv_lora_rank);
  StepCost c;
  c.flops = 2.0 * dense_params * n + 2.0 * table * rows + per_pair * config_.n_layers * mla_.n_heads * attended.pairs;
  c.bytes = static_cast<double>(weight_bytes_ - mtp_bytes_) - static_cast<double>(expert_bytes_) * (1.0 - touched) -
            ends_.loaded_bytes() + ends_.step_bytes(config_, n, rows > 0);
  if (!dsa.enabled()) {
    c.bytes += kv_bytes_per_token * (work.kv_read + n);
    return c;
  }
  double n_full = 0;
  for (int l = 0; l < config_.n_layers; ++l) n_full += dsa.shared[static_cast<size_t>(l)] ? 0.0 : 1.0;
  // One pool row, kv_bytes_per_token being the target's (as the dense rule reads it too: an MTP
  // module's layer is not the target step's work).
  const double row = kv_bytes_per_token / dsa_target_layers_;
  const double key = row / mla_.row_width() * dsa.head_dim;                                // one index key
  c.flops += n_full * 2.0 * dsa.n_heads * (dsa.head_dim + 1.0) * work.pairs;
  c.bytes += row * config_.n_layers * attended.kv_read + key * n_full * work.kv_read + kv_bytes_per_token * n;
  return c;
}

// The ops DeepSeek needs, its weight type, and a tensor-parallel size that splits it evenly.
Status check_deepseek_support(const ModelConfig& c, const Backend& backend, const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_mla_backend(c, backend, options));
  if (options.weight_dtype == DType::f8e4m3)
    return unsupported("fp8 weights made at load (weights: fp8) are not supported for " + c.arch +
                       "; load with weights: bf16 or auto (fp8 checkpoints load dequantized either way)");
  BRIGADE_RETURN_IF_ERROR(check_mla_weight_dtype(c, options.weight_dtype));
  return check_tensor_parallel(c, options, /*split_kv_heads=*/false);
}

}  // namespace

Expected<std::unique_ptr<Model>> load_deepseek(const Checkpoint& checkpoint, Backend& backend,
                                               const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_deepseek_support(checkpoint.config(), backend, options));
  auto model = std::make_unique<DeepseekModel>(checkpoint.config(), backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
