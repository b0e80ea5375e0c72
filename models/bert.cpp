#include "models/bert.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/bert_config.h"
#include "models/encoder_checks.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

// A layer's tensor names (after "<prefix><layers>.<l>."): BERT's and RoBERTa's, or DistilBERT's.
struct LayerNames {
  const char* layers;
  const char *q, *k, *v, *o, *ln1, *fc1, *fc2, *ln2;
};
constexpr LayerNames kBertNames{"encoder.layer",
                                "attention.self.query",
                                "attention.self.key",
                                "attention.self.value",
                                "attention.output.dense",
                                "attention.output.LayerNorm",
                                "intermediate.dense",
                                "output.dense",
                                "output.LayerNorm"};
constexpr LayerNames kDistilBertNames{"transformer.layer", "attention.q_lin", "attention.k_lin", "attention.v_lin",
                                      "attention.out_lin", "sa_layer_norm",   "ffn.lin1",        "ffn.lin2",
                                      "output_layer_norm"};

class BertModel final : public Model {
 public:
  BertModel(const ModelConfig& config, Backend& backend, const LoadOptions& options)
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
  struct Layer {
    // NomicBERT: no biases (empty), fc1 its gate (fc12) then up (fc11) rows [2 * intermediate, h].
    OwnedTensor qkv, qkv_b, o, o_b, ln1_w, ln1_b, fc1, fc1_b, fc2, fc2_b, ln2_w, ln2_b;
  };
  bool nomic() const { return config_.arch == "nomic_bert"; }
  Status load_nomic_layers(const std::string& prefix, WeightLoader& w);
  // The step's word ids (token types masked off) and type ids; invalid_argument for a step an
  // encoder cannot run (check_encoder_step).
  Status split_tokens(const StepBatch& batch);
  // After check_step: the rows of the position table and each row's attend_until; invalid_argument
  // unless every sequence is a whole prompt.
  Status plan_rows(const StepBatch& batch);
  void upload(const OwnedTensor& dst, const std::vector<int32_t>& src);

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  OwnedTensor word_, position_, type_, emb_ln_w_, emb_ln_b_;
  std::vector<Layer> layers_;
  int64_t n_params_ = 0, weight_bytes_ = 0;
  StepInputs ints_;
  OwnedTensor type_ids_, position_ids_;
  OwnedTensor x_, t_, qkv_, attn_, mlp_, gate_up_;
  RopeConfig rope_;  // NomicBERT: RoPE over whole heads (rotate_half), no position table
  std::vector<int32_t> words_, types_, position_rows_, until_;
};

Status BertModel::load(const Checkpoint& ck) {
  const auto& tensors = ck.tensors();
  const std::string p = bert_prefix([&](const std::string& n) { return tensors.count(n) > 0; });
  // LayerNorm weight and bias, or the gamma and beta of checkpoints converted from TensorFlow.
  auto norm = [&](const std::string& base, const char* a, const char* b) {
    return tensors.count(p + base + "." + a) > 0 ? p + base + "." + a : p + base + "." + b;
  };
  WeightLoader w(ck, backend_, options_.weight_dtype);
  const int64_t h = config_.hidden_size, inter = config_.intermediate_size;
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({name}, {n}); };
  BRIGADE_ASSIGN_OR_RETURN(word_, w.table(p + "embeddings.word_embeddings.weight", config_.vocab_size, h));
  if (!nomic()) {
    BRIGADE_ASSIGN_OR_RETURN(position_, w.table(p + "embeddings.position_embeddings.weight",
                                                config_.max_position + config_.position_offset, h));
  }
  if (config_.type_vocab_size > 0) {
    BRIGADE_ASSIGN_OR_RETURN(type_, w.table(p + "embeddings.token_type_embeddings.weight", config_.type_vocab_size, h));
  }
  const std::string emb_ln = nomic() ? "emb_ln" : "embeddings.LayerNorm";
  BRIGADE_ASSIGN_OR_RETURN(emb_ln_w_, vec(norm(emb_ln, "weight", "gamma"), h));
  BRIGADE_ASSIGN_OR_RETURN(emb_ln_b_, vec(norm(emb_ln, "bias", "beta"), h));
  const LayerNames& names = config_.arch == "distilbert" ? kDistilBertNames : kBertNames;
  layers_.resize(static_cast<size_t>(config_.n_layers));
  if (nomic()) BRIGADE_RETURN_IF_ERROR(load_nomic_layers(p, w));
  const int bert_layers = nomic() ? 0 : config_.n_layers;  // NomicBERT's layers have names of their own
  for (int l = 0; l < bert_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string rel = std::string(names.layers) + "." + std::to_string(l) + ".";  // after the prefix
    auto name = [&](const char* part, const char* what) { return p + rel + part + "." + what; };
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused({name(names.q, "weight"), name(names.k, "weight"), name(names.v, "weight")}, {h, h, h}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, w.vector_f32({name(names.q, "bias"), name(names.k, "bias"), name(names.v, "bias")}, {h, h, h}));
    BRIGADE_ASSIGN_OR_RETURN(L.o, w.matrix(name(names.o, "weight"), h, h));
    BRIGADE_ASSIGN_OR_RETURN(L.o_b, vec(name(names.o, "bias"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_w, vec(norm(rel + names.ln1, "weight", "gamma"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_b, vec(norm(rel + names.ln1, "bias", "beta"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.fc1, w.matrix(name(names.fc1, "weight"), inter, h));
    BRIGADE_ASSIGN_OR_RETURN(L.fc1_b, vec(name(names.fc1, "bias"), inter));
    BRIGADE_ASSIGN_OR_RETURN(L.fc2, w.matrix(name(names.fc2, "weight"), h, inter));
    BRIGADE_ASSIGN_OR_RETURN(L.fc2_b, vec(name(names.fc2, "bias"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_w, vec(norm(rel + names.ln2, "weight", "gamma"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_b, vec(norm(rel + names.ln2, "bias", "beta"), h));
  }
  n_params_ = w.n_params();
  weight_bytes_ = w.n_bytes();
  const int64_t n = options_.max_batch_tokens;
  const DType act = backend_.activation_dtype();
  BRIGADE_RETURN_IF_ERROR(ints_.allocate(backend_, n));
  BRIGADE_ASSIGN_OR_RETURN(type_ids_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(position_ids_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(x_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(t_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(attn_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(qkv_, alloc_tensor(backend_, act, n, 3 * h));
  BRIGADE_ASSIGN_OR_RETURN(mlp_, alloc_tensor(backend_, act, n, inter));
  if (nomic()) {
    BRIGADE_ASSIGN_OR_RETURN(gate_up_, alloc_tensor(backend_, act, n, 2 * inter));
    rope_.style = RopeStyle::neox;  // transformers' rotate_half (rotary_emb_interleaved false)
    rope_.rotary_dim = config_.head_dim;
    rope_.inv_freq = rope_inv_freq_scaled(config_.rope_theta, config_.head_dim, RopeScaling{});
  }
  return Status::ok();
}

// The Hub's names (transformers saves NomicBertModel under them too): encoder.layers.<l>.attn.Wqkv
// (q, k, v stacked), attn.out_proj, mlp.fc11 (up), mlp.fc12 (gate), mlp.fc2, norm1 (after the
// attention), norm2 (after the MLP); no biases but the norms'.
Status BertModel::load_nomic_layers(const std::string& p, WeightLoader& w) {
  const int64_t h = config_.hidden_size, inter = config_.intermediate_size;
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({name}, {n}); };
  for (int l = 0; l < config_.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string at = p + "encoder.layers." + std::to_string(l) + ".";
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.matrix(at + "attn.Wqkv.weight", 3 * h, h));
    BRIGADE_ASSIGN_OR_RETURN(L.o, w.matrix(at + "attn.out_proj.weight", h, h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_w, vec(at + "norm1.weight", h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_b, vec(at + "norm1.bias", h));
    BRIGADE_ASSIGN_OR_RETURN(L.fc1, w.fused({at + "mlp.fc12.weight", at + "mlp.fc11.weight"}, {inter, inter}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.fc2, w.matrix(at + "mlp.fc2.weight", h, inter));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_w, vec(at + "norm2.weight", h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_b, vec(at + "norm2.bias", h));
  }
  return Status::ok();
}

Status BertModel::split_tokens(const StepBatch& batch) {
  BRIGADE_RETURN_IF_ERROR(check_encoder_step(batch, config_.arch));
  const size_t n = batch.tokens.size();
  words_.resize(n);
  types_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = batch.tokens[i];
    words_[i] = token_id_part(v);
    types_[i] = token_type_part(v);
    if (v >= 0 && types_[i] >= std::max(1, config_.type_vocab_size))
      return invalid_argument("token " + std::to_string(i) + " of the step has token type " + std::to_string(types_[i]) +
                              "; this encoder has " + std::to_string(std::max(1, config_.type_vocab_size)));
  }
  return Status::ok();
}

Status BertModel::plan_rows(const StepBatch& batch) {
  BRIGADE_RETURN_IF_ERROR(check_whole_prompts(batch));
  const size_t n = batch.tokens.size();
  position_rows_.resize(n);
  until_.resize(n);
  const int pad = config_.position_offset - 1;  // RoBERTa's padding_idx
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const int first = batch.q_start[static_cast<size_t>(s)], end = batch.q_start[static_cast<size_t>(s) + 1];
    const int ctx = batch.ctx_len[static_cast<size_t>(s)];
    // RoBERTa's create_position_ids_from_input_ids: the non-padding tokens count up from
    // padding_idx + 1, a padding token sits at padding_idx; BERT's are the positions.
    int counted = 0;
    for (int r = first; r < end; ++r) {
      const size_t i = static_cast<size_t>(r);
      until_[i] = ctx - 1;
      if (config_.position_offset == 0) position_rows_[i] = batch.positions[i];
      else position_rows_[i] = words_[i] == pad ? pad : pad + ++counted;
    }
  }
  return Status::ok();
}

void BertModel::upload(const OwnedTensor& dst, const std::vector<int32_t>& src) {
  backend_.upload(Tensor(dst.tensor.data, DType::i32, {static_cast<int64_t>(src.size())}), src.data());
}

Status BertModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  BRIGADE_RETURN_IF_ERROR(split_tokens(batch));
  StepBatch plain = batch;  // the ids without their token types, as check_step and the upload take them
  plain.tokens = words_;
  const StepLimits limits{config_.vocab_size, config_.max_position, options_.max_batch_tokens,
                          config_.n_layers, config_.n_heads, config_.head_dim};
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(plain, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(plan_rows(plain));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(plain, options_.max_batch_tokens, config_.hidden_size,
                                            backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, plain, until_));
  upload(type_ids_, types_);
  upload(position_ids_, position_rows_);

  const int64_t n = plain.n_tokens();
  const AttentionMeta meta = ints_.meta(plain, bounds, 0);
  const Tensor x = x_.tensor.rows(0, n), t = t_.tensor.rows(0, n), attn = attn_.tensor.rows(0, n);
  const Tensor qkv = qkv_.tensor.rows(0, n), mlp = mlp_.tensor.rows(0, n);
  const float eps = config_.rms_eps, scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  const QkvLayout layout = config_.qkv_layout();
  const Tensor slots = ints_.slots(n);
  Backend& b = backend_;
  b.embedding(word_.tensor, ints_.tokens(plain), t);
  if (!nomic()) {  // NomicBERT rotates q and k instead
    b.embedding(position_.tensor, Tensor(position_ids_.tensor.data, DType::i32, {n}), attn);
    b.add(t, attn);
  }
  if (config_.type_vocab_size > 0) {  // DistilBERT has no token types
    b.embedding(type_.tensor, Tensor(type_ids_.tensor.data, DType::i32, {n}), attn);
    b.add(t, attn);
  }
  b.layer_norm(t, emb_ln_w_.tensor, emb_ln_b_.tensor, eps, x);
  for (int l = 0; l < config_.n_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    const KvLayer cache = kv.layer(l);
    b.matmul(x, L.qkv.tensor, L.qkv_b.tensor, qkv);
    if (nomic()) b.rope(qkv, layout, ints_.positions(n), rope_);
    b.write_kv(cache, qkv, layout, slots);
    b.attention(qkv, layout, cache, meta, scale, attn);
    b.matmul(attn, L.o.tensor, L.o_b.tensor, t);
    b.add(t, x);
    b.layer_norm(t, L.ln1_w.tensor, L.ln1_b.tensor, eps, x);
    if (nomic()) {  // SwiGLU: silu(gate) * up
      const Tensor gate_up = gate_up_.tensor.rows(0, n);
      b.matmul(x, L.fc1.tensor, Tensor(), gate_up);
      b.silu_mul(gate_up, mlp);
    } else {
      b.matmul(x, L.fc1.tensor, L.fc1_b.tensor, mlp);
      if (config_.mlp_activation == MlpActivation::gelu) b.gelu(mlp);
      else b.gelu_tanh(mlp);
    }
    b.matmul(mlp, L.fc2.tensor, L.fc2_b.tensor, t);
    b.add(t, x);
    b.layer_norm(t, L.ln2_w.tensor, L.ln2_b.tensor, eps, x);
  }
  const int64_t rows = static_cast<int64_t>(plain.hidden_rows.size());
  if (rows > 0) b.gather_rows(x, ints_.hidden_rows(rows), plain.hidden);
  return Status::ok();
}

// The roofline rule of Model::step_cost: every linear weight once (2 flops each per token), the
// embedding rows of the step's tokens, attention's 4 * head_dim flops per head per (query, key)
// pair (each prompt sees all of itself) and its K/V written and read once per sequence.
StepCost BertModel::step_cost(const StepBatch& batch, double kv_bytes_per_token) const {
  const double n = batch.n_tokens(), h = config_.hidden_size;
  const double positions = nomic() ? 0.0 : static_cast<double>(config_.max_position + config_.position_offset);
  const double tables = (static_cast<double>(config_.vocab_size) + positions + config_.type_vocab_size) * h;
  const double linear = static_cast<double>(n_params_) - tables;
  double pairs = 0.0;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const double ctx = batch.ctx_len[static_cast<size_t>(s)];
    pairs += ctx * ctx;
  }
  const double per_param = static_cast<double>(weight_bytes_) / static_cast<double>(std::max<int64_t>(n_params_, 1));
  StepCost c;
  c.flops = 2.0 * linear * n + 4.0 * config_.head_dim * config_.n_heads * config_.n_layers * pairs;
  c.bytes = linear * per_param + 3.0 * n * h * per_param + 2.0 * n * kv_bytes_per_token;
  return c;
}

}  // namespace

Expected<std::unique_ptr<Model>> load_bert(const Checkpoint& checkpoint, Backend& backend, const LoadOptions& options) {
  const ModelConfig& c = checkpoint.config();
  BRIGADE_RETURN_IF_ERROR(check_encoder_load(c, backend, options));
  auto model = std::make_unique<BertModel>(c, backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
