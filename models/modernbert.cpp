#include "models/modernbert.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/encoder_checks.h"
#include "models/modernbert_config.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

class ModernBertModel final : public Model {
 public:
  ModernBertModel(const ModelConfig& config, Backend& backend, const LoadOptions& options)
      : config_(config), backend_(backend), options_(options) {}

  Status load(const Checkpoint& ck);
  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    return KvLayout{config_.n_layers, n_pages, page_size, config_.n_heads, config_.head_dim, dtype};
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;

 private:
  // A LayerNorm's weight and bias (bias empty without norm_bias).
  struct Norm {
    OwnedTensor w, b;
  };
  // Biases are empty where the config has none (attention_bias, mlp_bias false).
  struct Layer {
    Norm attn_norm;  // empty on layer 0 (transformers' nn.Identity)
    OwnedTensor wqkv, wqkv_b, wo, wo_b;
    Norm mlp_norm;
    // mlp.Wi [2 * intermediate, hidden]: its input rows, then its gate rows (Backend::gelu_mul's
    // gate_up layout: the first half activated).
    OwnedTensor wi, wi_b, mlp_wo, mlp_wo_b;
  };
  Expected<Norm> load_norm(WeightLoader& w, const std::string& name);
  Status load_layer(WeightLoader& w, const std::string& p, int l);
  Status allocate_scratch();
  // After check_step: each row's last visible position on the global layers (its prompt's last)
  // and on the local ones (min(p + w, n - 1)); invalid_argument unless every sequence is a whole
  // prompt.
  Status plan_rows(const StepBatch& batch);
  void layer(int l, const KvLayer& cache, const AttentionMeta& meta, int64_t n);
  void layer_norm(const Tensor& x, const Norm& norm, const Tensor& out) {
    backend_.layer_norm(x, norm.w.tensor, norm.b.tensor, config_.rms_eps, out);
  }

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  OwnedTensor tok_embeddings_;
  Norm emb_norm_, final_norm_;
  std::vector<Layer> layers_;
  RopeConfig global_rope_, local_rope_;
  int64_t n_params_ = 0, weight_bytes_ = 0;
  StepInputs ints_;
  OwnedTensor local_until_ids_;
  OwnedTensor x_, t_, qkv_, attn_, wi_out_, mlp_;
  std::vector<int32_t> until_, local_until_;
};

Expected<ModernBertModel::Norm> ModernBertModel::load_norm(WeightLoader& w, const std::string& name) {
  Norm n;
  const int64_t h = config_.hidden_size;
  BRIGADE_ASSIGN_OR_RETURN(n.w, w.vector_f32({name + ".weight"}, {h}));
  if (config_.norm_bias) {
    BRIGADE_ASSIGN_OR_RETURN(n.b, w.vector_f32({name + ".bias"}, {h}));
  }
  return n;
}

Status ModernBertModel::load_layer(WeightLoader& w, const std::string& p, int l) {
  Layer& L = layers_[static_cast<size_t>(l)];
  const std::string at = p + "layers." + std::to_string(l) + ".";
  const int64_t h = config_.hidden_size, inter = config_.intermediate_size;
  if (l > 0) {
    BRIGADE_ASSIGN_OR_RETURN(L.attn_norm, load_norm(w, at + "attn_norm"));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.wqkv, w.matrix(at + "attn.Wqkv.weight", 3 * h, h));
  BRIGADE_ASSIGN_OR_RETURN(L.wo, w.matrix(at + "attn.Wo.weight", h, h));
  if (config_.attention_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.wqkv_b, w.vector_f32({at + "attn.Wqkv.bias"}, {3 * h}));
    BRIGADE_ASSIGN_OR_RETURN(L.wo_b, w.vector_f32({at + "attn.Wo.bias"}, {h}));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.mlp_norm, load_norm(w, at + "mlp_norm"));
  BRIGADE_ASSIGN_OR_RETURN(L.wi, w.matrix(at + "mlp.Wi.weight", 2 * inter, h));
  BRIGADE_ASSIGN_OR_RETURN(L.mlp_wo, w.matrix(at + "mlp.Wo.weight", h, inter));
  if (config_.mlp_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.wi_b, w.vector_f32({at + "mlp.Wi.bias"}, {2 * inter}));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_wo_b, w.vector_f32({at + "mlp.Wo.bias"}, {h}));
  }
  return Status::ok();
}

Status ModernBertModel::load(const Checkpoint& ck) {
  const std::string p = modernbert_prefix([&](const std::string& n) { return ck.tensors().count(n) > 0; });
  WeightLoader w(ck, backend_, options_.weight_dtype);
  BRIGADE_ASSIGN_OR_RETURN(tok_embeddings_,
                           w.table(p + "embeddings.tok_embeddings.weight", config_.vocab_size, config_.hidden_size));
  BRIGADE_ASSIGN_OR_RETURN(emb_norm_, load_norm(w, p + "embeddings.norm"));
  layers_.resize(static_cast<size_t>(config_.n_layers));
  for (int l = 0; l < config_.n_layers; ++l) BRIGADE_RETURN_IF_ERROR(load_layer(w, p, l));
  BRIGADE_ASSIGN_OR_RETURN(final_norm_, load_norm(w, p + "final_norm"));
  n_params_ = w.n_params();
  weight_bytes_ = w.n_bytes();
  for (auto [rope, theta] : {std::pair{&global_rope_, config_.rope_theta}, {&local_rope_, config_.rope_local_theta}}) {
    rope->style = RopeStyle::neox;  // transformers' rotate_half
    rope->rotary_dim = config_.head_dim;
    rope->inv_freq = rope_inv_freq_scaled(theta, config_.head_dim, RopeScaling{});
  }
  return allocate_scratch();
}

Status ModernBertModel::allocate_scratch() {
  const int64_t n = options_.max_batch_tokens, h = config_.hidden_size, inter = config_.intermediate_size;
  const DType act = backend_.activation_dtype();
  BRIGADE_RETURN_IF_ERROR(ints_.allocate(backend_, n));
  BRIGADE_ASSIGN_OR_RETURN(local_until_ids_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(x_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(t_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(attn_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(qkv_, alloc_tensor(backend_, act, n, 3 * h));
  BRIGADE_ASSIGN_OR_RETURN(wi_out_, alloc_tensor(backend_, act, n, 2 * inter));
  BRIGADE_ASSIGN_OR_RETURN(mlp_, alloc_tensor(backend_, act, n, inter));
  return Status::ok();
}

Status ModernBertModel::plan_rows(const StepBatch& batch) {
  BRIGADE_RETURN_IF_ERROR(check_whole_prompts(batch));
  const size_t n = batch.tokens.size();
  until_.resize(n);
  local_until_.resize(n);
  const int w = config_.sliding_window;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const int last = batch.ctx_len[static_cast<size_t>(s)] - 1;
    for (int r = batch.q_start[static_cast<size_t>(s)]; r < batch.q_start[static_cast<size_t>(s) + 1]; ++r) {
      const size_t i = static_cast<size_t>(r);
      until_[i] = last;
      local_until_[i] = std::min(batch.positions[i] + w, last);
    }
  }
  return Status::ok();
}

// Layer l over the residual stream x_ (rows [0, n)); meta is the layer kind's (global or local).
void ModernBertModel::layer(int l, const KvLayer& cache, const AttentionMeta& meta, int64_t n) {
  const Layer& L = layers_[static_cast<size_t>(l)];
  const Tensor x = x_.tensor.rows(0, n), t = t_.tensor.rows(0, n), attn = attn_.tensor.rows(0, n);
  const Tensor qkv = qkv_.tensor.rows(0, n), wi_out = wi_out_.tensor.rows(0, n), mlp = mlp_.tensor.rows(0, n);
  const QkvLayout layout = config_.qkv_layout();
  const bool local = config_.layer_window(l) > 0;
  Backend& b = backend_;
  if (l > 0) layer_norm(x, L.attn_norm, t);
  b.matmul(l > 0 ? t : x, L.wqkv.tensor, L.wqkv_b.tensor, qkv);
  b.rope(qkv, layout, ints_.positions(n), local ? local_rope_ : global_rope_);
  b.write_kv(cache, qkv, layout, ints_.slots(n));
  b.attention(qkv, layout, cache, meta, 1.0f / std::sqrt(static_cast<float>(config_.head_dim)), attn);
  b.matmul(attn, L.wo.tensor, L.wo_b.tensor, t);
  b.add(x, t);
  layer_norm(x, L.mlp_norm, t);
  b.matmul(t, L.wi.tensor, L.wi_b.tensor, wi_out);
  b.gelu_mul(wi_out, mlp);  // the exact GELU of the input half, as hidden_activation "gelu", times the gate
  b.matmul(mlp, L.mlp_wo.tensor, L.mlp_wo_b.tensor, t);
  b.add(x, t);
}

Status ModernBertModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  BRIGADE_RETURN_IF_ERROR(check_encoder_step(batch, config_.arch));
  const StepLimits limits{config_.vocab_size, config_.max_position, options_.max_batch_tokens,
                          config_.n_layers, config_.n_heads, config_.head_dim};
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(plan_rows(batch));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, config_.hidden_size,
                                            backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch, until_));
  const int64_t n = batch.n_tokens();
  backend_.upload(Tensor(local_until_ids_.tensor.data, DType::i32, {n}), local_until_.data());
  const AttentionMeta global = ints_.meta(batch, bounds, 0);
  AttentionMeta local = global;
  local.sliding_window = config_.sliding_window + 1;  // positions >= p - w
  local.attend_until = Tensor(local_until_ids_.tensor.data, DType::i32, {n});

  const Tensor x = x_.tensor.rows(0, n), t = t_.tensor.rows(0, n);
  backend_.embedding(tok_embeddings_.tensor, ints_.tokens(batch), t);
  layer_norm(t, emb_norm_, x);
  for (int l = 0; l < config_.n_layers; ++l) layer(l, kv.layer(l), config_.layer_window(l) > 0 ? local : global, n);
  layer_norm(x, final_norm_, t);
  const int64_t rows = static_cast<int64_t>(batch.hidden_rows.size());
  if (rows > 0) backend_.gather_rows(t, ints_.hidden_rows(rows), batch.hidden);
  return Status::ok();
}

// The roofline rule of Model::step_cost: every linear weight once (2 flops each per token), the
// embedding rows of the step's tokens, attention's 4 * head_dim flops per head per (query, key)
// pair (a global layer's prompt sees all of itself, a local layer's row its 2w + 1 neighbours at
// most) and its K/V written and read once per sequence.
StepCost ModernBertModel::step_cost(const StepBatch& batch, double kv_bytes_per_token) const {
  const double n = batch.n_tokens(), h = config_.hidden_size, w = config_.sliding_window;
  const double linear = static_cast<double>(n_params_) - static_cast<double>(config_.vocab_size) * h;
  double global_pairs = 0.0, local_pairs = 0.0;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const double ctx = batch.ctx_len[static_cast<size_t>(s)];
    global_pairs += ctx * ctx;
    for (double p = 0; p < ctx; ++p) local_pairs += std::min(p + w, ctx - 1) - std::max(p - w, 0.0) + 1;
  }
  double pairs = 0.0;
  for (int l = 0; l < config_.n_layers; ++l) pairs += config_.layer_window(l) > 0 ? local_pairs : global_pairs;
  const double per_param = static_cast<double>(weight_bytes_) / static_cast<double>(std::max<int64_t>(n_params_, 1));
  StepCost c;
  c.flops = 2.0 * linear * n + 4.0 * config_.head_dim * config_.n_heads * pairs;
  c.bytes = linear * per_param + n * h * per_param + 2.0 * n * kv_bytes_per_token;
  return c;
}

}  // namespace

Expected<std::unique_ptr<Model>> load_modernbert(const Checkpoint& checkpoint, Backend& backend,
                                                 const LoadOptions& options) {
  const ModelConfig& c = checkpoint.config();
  BRIGADE_RETURN_IF_ERROR(check_encoder_load(c, backend, options));
  auto model = std::make_unique<ModernBertModel>(c, backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
