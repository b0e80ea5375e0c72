#include "models/longcat_flash.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "models/decoder_ends.h"
#include "models/load_progress.h"
#include "models/mla_block.h"
#include "models/moe_block.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

// One of a layer's two halves: input_layernorm.{b}, self_attn.{b}, post_attention_layernorm.{b}, mlps.{b}.
struct Half {
  OwnedTensor attn_norm;  // [hidden] f32
  MlaWeights attn;
  OwnedTensor mlp_norm;   // [hidden] f32
  OwnedTensor gate_up;    // [2 I, hidden]
  OwnedTensor down;       // [hidden, I]
};

struct LongcatLayer {
  Half half[2];
  MoeBlock moe;  // mlp.router, mlp.experts
};

struct Scratch {
  OwnedTensor residual, normed, delta, shortcut, selected;  // [T, hidden]
  OwnedTensor gate_up, act;                                 // [T, 2 I], [T, I]
  MlaScratch mla;
  MoeScratch moe;
};

std::string layer_prefix(int l) { return "model.layers." + std::to_string(l) + "."; }

class LongcatFlashModel final : public Model {
 public:
  LongcatFlashModel(const ModelConfig& config, Backend& backend, const LoadOptions& options)
      : config_(config), backend_(backend), options_(options) {
    mla_ = {config.n_heads, config.kv_lora_rank, config.qk_rope_head_dim};
    moe_ = moe_shard(config, 0, 1, false);
    // LongcatFlashMLA's LoRA scalings: q's folds into the softmax scale, the latent's is applied.
    q_scale_ = std::sqrt(static_cast<float>(config.hidden_size) / static_cast<float>(config.q_lora_rank));
    kv_scale_ = std::sqrt(static_cast<float>(config.hidden_size) / static_cast<float>(config.kv_lora_rank));
  }

  Status load(const Checkpoint& ck);

  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    KvLayout l{n_kv_layers(), n_pages, page_size, 1, mla_.row_width(), dtype};
    l.latent = true;
    return l;
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;

 private:
  int n_kv_layers() const { return 2 * config_.n_layers; }
  Status load_layer(WeightLoader& w, int l, LongcatLayer& layer);
  Status allocate_scratch();
  // delta = self_attn.{b}(normed) of layer l, its latents in pool layer 2 l + b.
  void run_attention(const MlaWeights& a, const KvLayer& cache, const AttentionMeta& meta, int n);
  // delta = mlps.{b}(normed).
  void run_mlp(const Half& h, int n);

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  MlaLayout mla_;
  MoeShard moe_;
  float q_scale_ = 1.0f, kv_scale_ = 1.0f;
  RopeConfig rope_;  // over qk_rope_head_dim of q_pe's H heads and k_pe's one, adjacent pairs
  DecoderEnds ends_;
  std::vector<LongcatLayer> layers_;
  Scratch scratch_;
  StepInputs ints_;
  int64_t n_params_ = 0, weight_bytes_ = 0;
  int64_t expert_params_ = 0, expert_bytes_ = 0;  // the routed experts of every layer
};

Status LongcatFlashModel::load_layer(WeightLoader& w, int l, LongcatLayer& layer) {
  const auto& c = config_;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const std::string p = layer_prefix(l);
  for (int b = 0; b < 2; ++b) {
    Half& h = layer.half[b];
    const std::string i = std::to_string(b) + ".weight";
    BRIGADE_ASSIGN_OR_RETURN(h.attn_norm, w.vector_f32({p + "input_layernorm." + i}, {hidden}));
    BRIGADE_ASSIGN_OR_RETURN(h.mlp_norm, w.vector_f32({p + "post_attention_layernorm." + i}, {hidden}));
    BRIGADE_RETURN_IF_ERROR(load_mla_weights(w, c, p, Slice{0, c.n_heads}, h.attn, "self_attn." + std::to_string(b) + "."));
    const std::string m = p + "mlps." + std::to_string(b) + ".";
    BRIGADE_ASSIGN_OR_RETURN(h.gate_up, w.fused({m + "gate_proj.weight", m + "up_proj.weight"}, {inter, inter}, hidden));
    BRIGADE_ASSIGN_OR_RETURN(h.down, w.matrix(m + "down_proj.weight", hidden, inter));
  }
  BRIGADE_ASSIGN_OR_RETURN(layer.moe, load_moe_block(w, c, l, moe_));
  expert_params_ += int64_t{3} * c.n_experts * c.moe_intermediate_size * hidden;
  expert_bytes_ += static_cast<int64_t>(layer.moe.expert_bytes());
  return Status::ok();
}

Status LongcatFlashModel::load(const Checkpoint& ck) {
  const auto& c = config_;
  WeightLoader w(ck, backend_, options_.weight_dtype);
  BRIGADE_RETURN_IF_ERROR(ends_.load_embedding(w, c));
  BRIGADE_RETURN_IF_ERROR(load_layers_with_progress(
      load_progress_name(ck), c.n_layers, options_.progress,
      [&](int l) { return load_layer(w, l, layers_.emplace_back()); }, [&] { return w.n_bytes(); }));
  BRIGADE_RETURN_IF_ERROR(ends_.load_head(w, c, /*with_head=*/true));
  n_params_ = w.n_params();
  weight_bytes_ = w.n_bytes();
  rope_.style = c.rope_style;
  rope_.rotary_dim = c.qk_rope_head_dim;
  rope_.inv_freq = rope_inv_freq_scaled(c.rope_theta, c.qk_rope_head_dim, c.rope_scaling);
  rope_.attention_factor = rope_attention_factor(c.rope_scaling);
  BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  backend_.synchronize();  // uploads from staging memory have finished before it is freed
  return Status::ok();
}

Status LongcatFlashModel::allocate_scratch() {
  const auto& c = config_;
  const DType a = backend_.activation_dtype();
  const int64_t t = options_.max_batch_tokens;
  Scratch& s = scratch_;
  for (OwnedTensor* p : {&s.residual, &s.normed, &s.delta, &s.shortcut, &s.selected}) {
    BRIGADE_ASSIGN_OR_RETURN(*p, alloc_tensor(backend_, a, t, c.hidden_size));
  }
  BRIGADE_ASSIGN_OR_RETURN(s.gate_up, alloc_tensor(backend_, a, t, 2 * int64_t{c.intermediate_size}));
  BRIGADE_ASSIGN_OR_RETURN(s.act, alloc_tensor(backend_, a, t, c.intermediate_size));
  BRIGADE_RETURN_IF_ERROR(allocate_mla_scratch(backend_, c, mla_.n_heads, t, s.mla));
  BRIGADE_ASSIGN_OR_RETURN(s.moe, allocate_moe_scratch(backend_, c, moe_, t));
  return ints_.allocate(backend_, t);
}

void LongcatFlashModel::run_attention(const MlaWeights& a, const KvLayer& cache, const AttentionMeta& meta, int n) {
  const MlaStep step = mla_project(backend_, config_, a, scratch_.mla, scratch_.normed.tensor.rows(0, n));
  const Tensor positions = ints_.positions(n);
  backend_.rope(step.q_pe, QkvLayout{mla_.n_heads, 0, mla_.rope_dim}, positions, rope_);
  backend_.rope(step.k_pe, QkvLayout{1, 0, mla_.rope_dim}, positions, rope_);
  backend_.scale(step.latent_normed, kv_scale_);  // cached scaled, as transformers caches k_pass
  mla_cache_and_absorb(backend_, a, step, mla_.n_heads, cache, ints_.slots(n));
  backend_.mla_attention(step.q_lat, step.q_pe, mla_, cache, meta, config_.attn_scale * q_scale_, step.o_lat);
  mla_output(backend_, a, step, mla_.n_heads, scratch_.delta.tensor.rows(0, n));
}

void LongcatFlashModel::run_mlp(const Half& h, int n) {
  const Tensor gate_up = scratch_.gate_up.tensor.rows(0, n), act = scratch_.act.tensor.rows(0, n);
  backend_.matmul(scratch_.normed.tensor.rows(0, n), h.gate_up.tensor, Tensor(), gate_up);
  backend_.silu_mul(gate_up, act);
  backend_.matmul(act, h.down.tensor, Tensor(), scratch_.delta.tensor.rows(0, n));
}

Status LongcatFlashModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const ModelConfig& c = config_;
  if (!kv.layout().latent)
    return invalid_argument("a LongCat-Flash (MLA) model needs its latent KV layout (Model::kv_layout)");
  const StepLimits limits{c.vocab_size, c.max_position, options_.max_batch_tokens, n_kv_layers(), 1, mla_.row_width()};
  BRIGADE_ASSIGN_OR_RETURN(StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, c.hidden_size, backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(check_step_images(batch, c.vision, false).status());
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch));
  const AttentionMeta meta = ints_.meta(batch, bounds, 0);
  const int n = batch.n_tokens();
  const Scratch& s = scratch_;
  const Tensor residual = s.residual.tensor.rows(0, n), normed = s.normed.tensor.rows(0, n);
  const Tensor delta = s.delta.tensor.rows(0, n), shortcut = s.shortcut.tensor.rows(0, n);
  backend_.embedding(ends_.embed.tensor, ints_.tokens(batch), residual);
  for (int l = 0; l < c.n_layers; ++l) {
    const LongcatLayer& layer = layers_[static_cast<size_t>(l)];
    for (int b = 0; b < 2; ++b) {
      const Half& h = layer.half[b];
      // delta: the previous sublayer's output (the last layer's: mlp1 + the shortcut MoE's).
      if (l == 0 && b == 0) backend_.rms_norm(residual, h.attn_norm.tensor, c.rms_eps, normed);
      else backend_.add_rms_norm(residual, delta, h.attn_norm.tensor, c.rms_eps, normed);
      run_attention(h.attn, kv.layer(2 * l + b), meta, n);
      backend_.add_rms_norm(residual, delta, h.mlp_norm.tensor, c.rms_eps, normed);
      if (b == 0) run_moe_block(backend_, c, moe_, layer.moe, s.moe, normed, shortcut);
      run_mlp(h, n);
    }
    backend_.add(delta, shortcut);
  }
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), hr = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && hr == 0) return Status::ok();
  ends_.logits(backend_, c, residual, delta, normed, s.selected.tensor.rows(0, r), ints_.logit_rows(r), logits,
               ints_.hidden_rows(hr), batch.hidden);
  return Status::ok();
}

// Model::step_cost's roofline rule with DeepSeek's MLA counting (models/deepseek.cpp) over the
// 2 num_layers attention blocks; the routed experts k of E per token for the flops (an upper
// bound: a zero expert's pick computes nothing), min(E, n k) of E per layer for the bytes.
StepCost LongcatFlashModel::step_cost(const StepBatch& b, double kv_bytes_per_token) const {
  const double n = b.n_tokens(), rows = static_cast<double>(b.logit_rows.size());
  const double table = static_cast<double>(config_.vocab_size) * config_.hidden_size;
  const double linear_params = static_cast<double>(n_params_) - table - (config_.tie_embeddings ? 0.0 : table);
  const double e = config_.n_experts, k = std::min(config_.n_experts_per_tok, config_.n_experts);
  const double dense_params = linear_params - static_cast<double>(expert_params_) * (1.0 - k / e);
  const double touched = std::min(e, n * k) / e;
  const AttentionWork work = attention_work(b, 0);
  const double per_pair = 2.0 * (mla_.row_width() + mla_.kv_lora_rank);
  StepCost cost;
  cost.flops = 2.0 * dense_params * n + 2.0 * table * rows + per_pair * n_kv_layers() * mla_.n_heads * work.pairs;
  cost.bytes = static_cast<double>(weight_bytes_) - static_cast<double>(expert_bytes_) * (1.0 - touched) -
               ends_.loaded_bytes() + ends_.step_bytes(config_, n, rows > 0) + kv_bytes_per_token * (work.kv_read + n);
  return cost;
}

Status check_longcat_support(const ModelConfig& c, const Backend& backend, const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_mla_backend(c, backend, options));
  if (options.communicator != nullptr && options.communicator->size() > 1)
    return unsupported("tensor parallelism is not supported for " + c.arch + " (its zero-computation experts are "
                       "added once per token, not split); run it on one device");
  if (options.lora_enabled())
    return unsupported("LoRA adapters are not supported for " + c.arch + " (MLA attention); they run on the dense "
                       "Llama-family decoders (llama, qwen2, qwen3, phi3)");
  if (options.mtp)
    return unsupported(c.arch + " is loaded without its MTP module (model.mtp.*, which transformers skips too); "
                       "speculative method mtp does not run it yet (models/mtp_module.h lists the ones it runs)");
  return check_mla_weight_dtype(c, options.weight_dtype);
}

}  // namespace

Expected<std::unique_ptr<Model>> load_longcat_flash(const Checkpoint& checkpoint, Backend& backend,
                                                    const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_longcat_support(checkpoint.config(), backend, options));
  auto model = std::make_unique<LongcatFlashModel>(checkpoint.config(), backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
