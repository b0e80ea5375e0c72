#include "models/gemma3n.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "models/decoder_ends.h"
#include "models/float_weights_checks.h"
#include "models/llama.h"
#include "models/load_progress.h"
#include "models/lora.h"
#include "models/per_layer_inputs.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

// Shapes: N streams (altup_num_inputs), H hidden, D per-layer input width, L layers, I_l a
// layer's MLP width, hd head_dim, T max_batch_tokens, n a step's tokens.

struct Layer {
  // AltUp: router_norm's weight times hidden^-1 (router_input_scale folded in) [H] f32, the
  // modality router [N, H], prediction_coefs [N * N, N] and correction_coefs [N, N] f32.
  OwnedTensor router_norm, router, pred_coefs, corr_coefs;
  OwnedTensor input_norm, post_attn_norm, pre_ffw_norm, post_ffw_norm, post_pl_norm;  // [H] f32
  LinearWeight qkv;  // [(H_q + 2 KV) hd, H]; q rows alone [H_q hd, H] in a layer reusing K/V
  OwnedTensor q_norm, k_norm;  // [hd] f32 (k_norm empty in a layer reusing K/V)
  OwnedTensor o;               // [H, H_q hd]
  OwnedTensor laurel_left, laurel_right, laurel_norm;  // [r, H], [H, r], [H] f32
  LinearWeight gate_up;        // [2 I_l, H]
  OwnedTensor down;            // [H, I_l]
  OwnedTensor pl_gate;         // [D, H], its columns times correct_output_scale (altup_correct_scale)
  OwnedTensor pl_proj;         // [H, D]
  int64_t inter = 0;           // I_l
  float topk_k = 0.0f;         // the sparsity's normal quantile; sparse = false: dense
  bool sparse = false;
  bool shared_kv = false;      // reads an earlier layer's K/V (ModelConfig::Gemma3nFields::kv_layer)
};

struct Scratch {
  OwnedTensor streams_a, streams_b;  // [N T, H]: stream i is rows [i n, (i + 1) n) of a step
  OwnedTensor normed, delta, laurel, selected;  // [T, H]
  OwnedTensor laurel_mid;      // [T, r]
  OwnedTensor router;          // [T, N]
  OwnedTensor qkv;             // [T, (H_q + 2 KV) hd]
  OwnedTensor q;               // [T, H_q hd]: a K/V-reusing layer's q before it joins qkv
  OwnedTensor attn;            // [T, H_q hd]
  OwnedTensor gate_up, act;    // [T, 2 max I], [T, max I]
  OwnedTensor pl_gate;         // [T, D]
  OwnedTensor q_rows;          // [T (H_q + 2 KV)] i32: head j of qkv row t reads q head (t, min(j, H_q - 1))
};

std::string layer_name(int l, const char* suffix) { return "model.layers." + std::to_string(l) + "." + suffix; }

class Gemma3nModel final : public Model {
 public:
  Gemma3nModel(std::unique_ptr<Checkpoint> ck, Backend& backend, const LoadOptions& options)
      : ck_(std::move(ck)), config_(ck_->config()), backend_(backend), options_(options),
        qkv_{config_.n_heads, config_.n_kv_heads, config_.head_dim} {}

  Status load();

  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    return KvLayout{config_.gemma3n.n_kv_layers(), n_pages, page_size, qkv_.n_kv_heads, qkv_.head_dim, dtype};
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;

 private:
  int n_streams() const { return config_.gemma3n.altup_inputs; }
  Status load_layer(WeightLoader& w, int l, Layer& layer);
  Expected<OwnedTensor> load_pl_gate(WeightLoader& w, int l);
  Status allocate_scratch();
  void run_layer(int l, const KvCache& kv, const AttentionMeta& meta, int n);
  void run_attention(const Layer& layer, const KvLayer& cache, const AttentionMeta& meta, const RopeConfig& rope,
                     int n);
  void run_mlp(const Layer& layer, const Tensor& x, const Tensor& out, int n);
  // Stream i of a [N T, H] buffer in an n-token step, and all of them as [N, n, H].
  Tensor stream(const OwnedTensor& buf, int i, int n) const { return buf.tensor.rows(int64_t{i} * n, n); }
  Tensor streams(const OwnedTensor& buf, int n) const {
    return buf.tensor.rows(0, int64_t{n_streams()} * n).reshaped({n_streams(), n, config_.hidden_size});
  }
  Tensor rows(const OwnedTensor& buf, int n) const { return buf.tensor.rows(0, n); }

  std::unique_ptr<Checkpoint> ck_;  // kept: its mapping holds embed_tokens_per_layer
  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  QkvLayout qkv_;
  DecoderEnds ends_;
  std::vector<Layer> layers_;
  PerLayerInputs ple_;                      // its table stays in ck_'s mapping
  std::vector<OwnedTensor> altup_proj_, altup_unembed_;  // N - 1 each, [H, H]
  RopeConfig rope_, rope_local_;
  Scratch scratch_;
  StepInputs ints_;
  float embed_scale_ = 0.0f;
  int64_t n_params_ = 0, weight_bytes_ = 0;
};

Expected<OwnedTensor> Gemma3nModel::load_pl_gate(WeightLoader& w, int l) {
  const ModelConfig& c = config_;
  const int64_t d = c.gemma3n.per_layer_dim, h = c.hidden_size;
  const std::string name = layer_name(l, "per_layer_input_gate.weight");
  if (!c.gemma3n.altup_correct_scale) return w.matrix(name, d, h);
  // gate(x * s) = (W diag(s)) x: correct_output_scale folded into the gate's columns.
  BRIGADE_ASSIGN_OR_RETURN(const RawTensor gate, ck_->tensor(name, {d, h}));
  BRIGADE_ASSIGN_OR_RETURN(const RawTensor scale, ck_->tensor(layer_name(l, "altup.correct_output_scale"), {h}));
  if (gate.block_quantized() || scale.block_quantized())
    return unsupported(name + ": block-quantized per_layer_input_gate is not supported for gemma3n");
  std::vector<float> m(static_cast<size_t>(d * h)), s(static_cast<size_t>(h));
  gate.dequantize(0, d * h, m.data());
  scale.dequantize(0, h, s.data());
  for (int64_t r = 0; r < d; ++r)
    for (int64_t k = 0; k < h; ++k) m[static_cast<size_t>(r * h + k)] *= s[static_cast<size_t>(k)];
  BRIGADE_RETURN_IF_ERROR(w.skip(name, {d, h}));
  BRIGADE_RETURN_IF_ERROR(w.skip(layer_name(l, "altup.correct_output_scale"), {h}));
  // As WeightLoader::matrix prepares an f32 matrix: the type asked for, else the backend's own.
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor out,
                           backend_.prepare_weight(Tensor(m.data(), DType::f32, {d, h}), options_.weight_dtype));
  backend_.synchronize();  // before m is freed
  weight_bytes_ += static_cast<int64_t>(out.tensor.nbytes());
  return out;
}

Status Gemma3nModel::load_layer(WeightLoader& w, int l, Layer& layer) {
  const ModelConfig& c = config_;
  const auto& g = c.gemma3n;
  const int64_t h = c.hidden_size, n = n_streams(), hd = c.head_dim, q = qkv_.q_width(), kv = qkv_.kv_width();
  auto norm = [&](const char* name, int64_t size, float scale = 1.0f) -> Expected<OwnedTensor> {
    if (scale == 1.0f) return w.vector_f32({layer_name(l, name)}, {size});
    BRIGADE_ASSIGN_OR_RETURN(const RawTensor t, ck_->tensor(layer_name(l, name), {size}));
    std::vector<float> v(static_cast<size_t>(size));
    t.dequantize(0, size, v.data());
    for (float& x : v) x *= scale;
    BRIGADE_RETURN_IF_ERROR(w.skip(layer_name(l, name), {size}));
    BRIGADE_ASSIGN_OR_RETURN(OwnedTensor out, alloc_tensor(backend_, DType::f32, 1, size));  // as vector_f32 keeps it
    out.tensor = out.tensor.reshaped({size});
    backend_.upload(out.tensor, v.data());
    backend_.synchronize();  // before v is freed
    weight_bytes_ += static_cast<int64_t>(out.tensor.nbytes());
    return out;
  };
  auto all_cols = [](int64_t cols) {
    std::vector<int64_t> k(static_cast<size_t>(cols));
    for (int64_t i = 0; i < cols; ++i) k[static_cast<size_t>(i)] = i;
    return k;
  };
  // router_input_scale (hidden^-1, as torch holds it in f32) folded into router_norm's weight.
  BRIGADE_ASSIGN_OR_RETURN(layer.router_norm, norm("altup.router_norm.weight", h,
                                                   static_cast<float>(std::pow(static_cast<double>(h), -1.0))));
  BRIGADE_ASSIGN_OR_RETURN(layer.router, w.matrix(layer_name(l, "altup.modality_router.weight"), n, h));
  BRIGADE_ASSIGN_OR_RETURN(layer.pred_coefs,
                           w.gathered_f32({layer_name(l, "altup.prediction_coefs.weight")}, n * n, n, {}, all_cols(n)));
  BRIGADE_ASSIGN_OR_RETURN(layer.corr_coefs,
                           w.gathered_f32({layer_name(l, "altup.correction_coefs.weight")}, n, n, {}, all_cols(n)));
  BRIGADE_ASSIGN_OR_RETURN(layer.input_norm, norm("input_layernorm.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_attn_norm, norm("post_attention_layernorm.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(layer.pre_ffw_norm, norm("pre_feedforward_layernorm.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_ffw_norm, norm("post_feedforward_layernorm.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_pl_norm, norm("post_per_layer_input_norm.weight", h));
  layer.shared_kv = g.shares_kv(l);
  if (layer.shared_kv) {  // no k/v projections or norms (transformers ignores them if stored)
    BRIGADE_ASSIGN_OR_RETURN(layer.qkv, w.fused_linear({layer_name(l, "self_attn.q_proj.weight")}, {q}, h));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(layer.qkv, w.fused_linear({layer_name(l, "self_attn.q_proj.weight"),
                                                        layer_name(l, "self_attn.k_proj.weight"),
                                                        layer_name(l, "self_attn.v_proj.weight")},
                                                       {q, kv, kv}, h));
    BRIGADE_ASSIGN_OR_RETURN(layer.k_norm, norm("self_attn.k_norm.weight", hd));
  }
  BRIGADE_ASSIGN_OR_RETURN(layer.q_norm, norm("self_attn.q_norm.weight", hd));
  BRIGADE_ASSIGN_OR_RETURN(layer.o, w.matrix(layer_name(l, "self_attn.o_proj.weight"), h, q));
  BRIGADE_ASSIGN_OR_RETURN(layer.laurel_left, w.matrix(layer_name(l, "laurel.linear_left.weight"), g.laurel_rank, h));
  BRIGADE_ASSIGN_OR_RETURN(layer.laurel_right, w.matrix(layer_name(l, "laurel.linear_right.weight"), h, g.laurel_rank));
  BRIGADE_ASSIGN_OR_RETURN(layer.laurel_norm, norm("laurel.post_laurel_norm.weight", h));
  layer.inter = g.intermediate[static_cast<size_t>(l)];
  BRIGADE_ASSIGN_OR_RETURN(layer.gate_up, w.fused_linear({layer_name(l, "mlp.gate_proj.weight"),
                                                          layer_name(l, "mlp.up_proj.weight")},
                                                         {layer.inter, layer.inter}, h));
  BRIGADE_ASSIGN_OR_RETURN(layer.down, w.matrix(layer_name(l, "mlp.down_proj.weight"), h, layer.inter));
  const float sparsity = g.sparsity[static_cast<size_t>(l)];
  layer.sparse = sparsity > 0.0f;
  // torch's Normal(0, 1).icdf in f32, then in the activations' type.
  if (layer.sparse)
    layer.topk_k = round_to(static_cast<float>(normal_quantile(static_cast<double>(sparsity))), backend_.activation_dtype());
  BRIGADE_ASSIGN_OR_RETURN(layer.pl_gate, load_pl_gate(w, l));
  BRIGADE_ASSIGN_OR_RETURN(layer.pl_proj, w.matrix(layer_name(l, "per_layer_projection.weight"), h, g.per_layer_dim));
  return Status::ok();
}

Status Gemma3nModel::load() {
  const ModelConfig& c = config_;
  const auto& g = c.gemma3n;
  const int64_t h = c.hidden_size, d = g.per_layer_dim, nl = c.n_layers;
  WeightLoader w(*ck_, backend_, options_.weight_dtype);
  BRIGADE_RETURN_IF_ERROR(ends_.load_embedding(w, c));
  BRIGADE_RETURN_IF_ERROR(ple_.load(*ck_, w, backend_, static_cast<int>(nl), h, static_cast<int>(d), g.per_layer_vocab,
                                     c.rms_eps, options_.max_batch_tokens));
  for (int i = 1; i < n_streams(); ++i) {
    const std::string k = std::to_string(i - 1);
    BRIGADE_ASSIGN_OR_RETURN(OwnedTensor p, w.matrix("model.altup_projections." + k + ".weight", h, h));
    BRIGADE_ASSIGN_OR_RETURN(OwnedTensor u, w.matrix("model.altup_unembed_projections." + k + ".weight", h, h));
    altup_proj_.push_back(std::move(p));
    altup_unembed_.push_back(std::move(u));
  }
  BRIGADE_RETURN_IF_ERROR(load_layers_with_progress(
      load_progress_name(*ck_), c.n_layers, options_.progress,
      [&](int l) { return load_layer(w, l, layers_.emplace_back()); }, [&] { return w.n_bytes() + weight_bytes_; }));
  BRIGADE_RETURN_IF_ERROR(ends_.load_head(w, c, true));
  n_params_ = w.n_params() + ple_.table_numel();
  weight_bytes_ += w.n_bytes();  // the per-layer table stays in the mapping, host memory
  rope_.style = c.rope_style;
  rope_.rotary_dim = c.rope_dims();
  rope_.inv_freq = rope_inv_freq_scaled(c.rope_theta, c.rope_dims(), c.rope_scaling);
  rope_.attention_factor = rope_attention_factor(c.rope_scaling);
  rope_local_ = rope_;
  rope_local_.inv_freq = rope_inv_freq(c.rope_local_theta, c.rope_dims());
  rope_local_.attention_factor = 1.0f;
  const DType a = backend_.activation_dtype();
  embed_scale_ = round_to(c.embed_scale, a);
  BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  backend_.synchronize();
  return Status::ok();
}

Status Gemma3nModel::allocate_scratch() {
  const ModelConfig& c = config_;
  const DType a = backend_.activation_dtype();
  const int64_t t = options_.max_batch_tokens, h = c.hidden_size, n = n_streams();
  Scratch& s = scratch_;
  BRIGADE_ASSIGN_OR_RETURN(s.streams_a, alloc_tensor(backend_, a, n * t, h));
  BRIGADE_ASSIGN_OR_RETURN(s.streams_b, alloc_tensor(backend_, a, n * t, h));
  for (OwnedTensor* o : {&s.normed, &s.delta, &s.laurel, &s.selected}) {
    BRIGADE_ASSIGN_OR_RETURN(*o, alloc_tensor(backend_, a, t, h));
  }
  BRIGADE_ASSIGN_OR_RETURN(s.laurel_mid, alloc_tensor(backend_, a, t, c.gemma3n.laurel_rank));
  BRIGADE_ASSIGN_OR_RETURN(s.router, alloc_tensor(backend_, a, t, n));
  BRIGADE_ASSIGN_OR_RETURN(s.qkv, alloc_tensor(backend_, a, t, qkv_.row_width()));
  BRIGADE_ASSIGN_OR_RETURN(s.q, alloc_tensor(backend_, a, t, qkv_.q_width()));
  BRIGADE_ASSIGN_OR_RETURN(s.attn, alloc_tensor(backend_, a, t, qkv_.q_width()));
  BRIGADE_ASSIGN_OR_RETURN(s.gate_up, alloc_tensor(backend_, a, t, 2 * int64_t{c.intermediate_size}));
  BRIGADE_ASSIGN_OR_RETURN(s.act, alloc_tensor(backend_, a, t, c.intermediate_size));
  BRIGADE_ASSIGN_OR_RETURN(s.pl_gate, alloc_tensor(backend_, a, t, c.gemma3n.per_layer_dim));
  const int64_t heads = qkv_.n_heads, row_heads = qkv_.n_heads + 2 * int64_t{qkv_.n_kv_heads};
  BRIGADE_ASSIGN_OR_RETURN(s.q_rows, alloc_tensor(backend_, DType::i32, t * row_heads, 1));
  std::vector<int32_t> idx(static_cast<size_t>(t * row_heads));
  for (int64_t i = 0; i < t * row_heads; ++i)
    idx[static_cast<size_t>(i)] = static_cast<int32_t>(i / row_heads * heads + std::min(i % row_heads, heads - 1));
  backend_.upload(s.q_rows.tensor, idx.data());
  return ints_.allocate(backend_, t);
}

void Gemma3nModel::run_attention(const Layer& layer, const KvLayer& cache, const AttentionMeta& meta,
                                 const RopeConfig& rope, int n) {
  const Tensor x = rows(scratch_.normed, n), qkv = rows(scratch_.qkv, n), attn = rows(scratch_.attn, n);
  if (layer.shared_kv) {  // q alone, laid out as qkv's rows (their k/v heads copies of a q head, not read)
    const Tensor q = rows(scratch_.q, n);
    layer.qkv.matmul(backend_, x, Tensor(), q);
    const int64_t hd = qkv_.head_dim, row_heads = qkv_.row_width() / hd;
    backend_.gather_rows(q.reshaped({n * int64_t{qkv_.n_heads}, hd}),
                         scratch_.q_rows.tensor.rows(0, n * row_heads).reshaped({n * row_heads}),
                         qkv.reshaped({n * row_heads, hd}));
  } else {
    layer.qkv.matmul(backend_, x, Tensor(), qkv);
  }
  backend_.qk_head_norm(qkv, qkv_, layer.q_norm.tensor, layer.shared_kv ? layer.q_norm.tensor : layer.k_norm.tensor,
                        config_.rms_eps);
  if (!layer.shared_kv) backend_.v_head_norm(qkv, qkv_, config_.rms_eps);
  backend_.rope(qkv, qkv_, ints_.positions(n), rope);
  if (!layer.shared_kv) backend_.write_kv(cache, qkv, qkv_, ints_.slots(n));
  backend_.attention(qkv, qkv_, cache, meta, config_.attn_scale, attn);
  backend_.matmul(attn, layer.o.tensor, Tensor(), rows(scratch_.delta, n));
}

void Gemma3nModel::run_mlp(const Layer& layer, const Tensor& x, const Tensor& out, int n) {
  const Tensor gate_up(scratch_.gate_up.tensor.data, scratch_.gate_up.tensor.dtype, {n, 2 * layer.inter});
  const Tensor act(scratch_.act.tensor.data, scratch_.act.tensor.dtype, {n, layer.inter});
  layer.gate_up.matmul(backend_, x, Tensor(), gate_up);
  if (layer.sparse) backend_.gaussian_topk(gate_up, layer.inter, layer.topk_k);
  backend_.gelu_tanh_mul(gate_up, act);
  backend_.matmul(act, layer.down.tensor, Tensor(), out);
}

// One decoder layer from scratch streams_a into streams_b (Gemma3nTextDecoderLayer.forward).
void Gemma3nModel::run_layer(int l, const KvCache& kv, const AttentionMeta& meta, int n) {
  const Layer& layer = layers_[static_cast<size_t>(l)];
  const ModelConfig& c = config_;
  const int active = c.gemma3n.altup_active;
  const float eps = c.rms_eps, inv_sqrt2 = round_to(1.0f / std::sqrt(2.0f), backend_.activation_dtype());
  const Tensor normed = rows(scratch_.normed, n), delta = rows(scratch_.delta, n), laurel = rows(scratch_.laurel, n);
  const Tensor router = rows(scratch_.router, n);
  auto route = [&](const Tensor& x) {  // the modality router's logits of x
    backend_.rms_norm(x, layer.router_norm.tensor, eps, normed);
    backend_.matmul(normed, layer.router.tensor, Tensor(), router);
  };
  route(stream(scratch_.streams_a, active, n));
  backend_.altup_predict(streams(scratch_.streams_a, n), router, layer.pred_coefs.tensor, streams(scratch_.streams_b, n));
  const Tensor predicted = stream(scratch_.streams_b, active, n);
  backend_.rms_norm(predicted, layer.input_norm.tensor, eps, normed);
  backend_.matmul(normed, layer.laurel_left.tensor, Tensor(), rows(scratch_.laurel_mid, n));  // LAuReL
  backend_.matmul(rows(scratch_.laurel_mid, n), layer.laurel_right.tensor, Tensor(), laurel);
  backend_.rms_norm(laurel, layer.laurel_norm.tensor, eps, laurel);
  backend_.add(laurel, normed);
  const bool local = c.layer_window(l) > 0;
  const int cache_layer = c.gemma3n.kv_layer[static_cast<size_t>(l)];
  run_attention(layer, kv.layer(cache_layer), meta, local ? rope_local_ : rope_, n);
  backend_.rms_norm(delta, layer.post_attn_norm.tensor, eps, delta);
  backend_.add(delta, predicted);  // attn_gated
  backend_.add(delta, laurel);
  backend_.scale(delta, inv_sqrt2);  // attn_laurel
  backend_.rms_norm(delta, layer.pre_ffw_norm.tensor, eps, normed);
  run_mlp(layer, normed, laurel, n);
  backend_.rms_norm(laurel, layer.post_ffw_norm.tensor, eps, laurel);
  backend_.add(delta, laurel);  // the block's output: the activated active stream
  route(delta);
  backend_.altup_correct(streams(scratch_.streams_b, n), delta, router, layer.corr_coefs.tensor, active);
  // The per-layer input: gelu_tanh(gate(corrected active * scale)) * input, projected, normed,
  // added to streams 1.. (transformers' corrected_predictions[1:]).
  const Tensor gate = rows(scratch_.pl_gate, n);
  backend_.matmul(stream(scratch_.streams_b, active, n), layer.pl_gate.tensor, Tensor(), gate);
  backend_.gelu_tanh_gate(gate, ple_.layer(l, n));
  backend_.matmul(gate, layer.pl_proj.tensor, Tensor(), laurel);
  backend_.rms_norm(laurel, layer.post_pl_norm.tensor, eps, laurel);
  for (int i = 1; i < n_streams(); ++i) backend_.add(stream(scratch_.streams_b, i, n), laurel);
}

Status Gemma3nModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const ModelConfig& c = config_;
  const StepLimits limits{c.vocab_size, c.max_position, options_.max_batch_tokens, c.gemma3n.n_kv_layers(),
                          qkv_.n_kv_heads, qkv_.head_dim};
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, c.hidden_size, backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(check_no_lora(batch));
  if (!batch.images.empty())
    return unsupported("gemma3n: images are not supported (" +
                       (c.vision_off.empty() ? std::string("a text-only checkpoint") : c.vision_off) + ")");
  if (!batch.device_tokens.empty())  // (actors/engine/instance.cpp runs gemma3n on the host step path)
    return unsupported("gemma3n gathers its per-layer embedding rows from the mapped checkpoint on the host, so it "
                       "needs the step's token ids there: pass StepBatch::tokens without device_tokens");
  const int n = batch.n_tokens();
  const std::vector<int32_t>& ids = batch.tokens;
  if (const int end = c.gemma3n.text_vocab_end; end > 0)
    for (int32_t id : ids)
      if (id >= end)
        return invalid_argument("token id " + std::to_string(id) + " is a Gemma 3n vision or audio token (ids from " +
                                std::to_string(end) + " on embed through the towers' embedders, which are not "
                                "loaded); send text token ids only");
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch));
  const AttentionMeta full = ints_.meta(batch, bounds, 0), sliding = ints_.meta(batch, bounds, c.sliding_window);
  const Tensor s0 = stream(scratch_.streams_a, 0, n);
  backend_.embedding(ends_.embed.tensor, ints_.tokens(batch), s0);
  backend_.scale(s0, embed_scale_);
  ple_.compute(backend_, ids, s0, n);
  for (int i = 1; i < n_streams(); ++i) {  // the other streams: projections at stream 0's magnitude
    const Tensor si = stream(scratch_.streams_a, i, n);
    backend_.matmul(s0, altup_proj_[static_cast<size_t>(i - 1)].tensor, Tensor(), si);
    backend_.match_rms(si, s0, 1e-5f);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    run_layer(l, kv, c.layer_window(l) > 0 ? sliding : full, n);
    std::swap(scratch_.streams_a, scratch_.streams_b);
  }
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), hr = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && hr == 0) return Status::ok();
  // The streams unembedded, at stream 0's magnitude, averaged: (s0 + u1 + ... ) / N.
  const Tensor f0 = stream(scratch_.streams_a, 0, n), sum = stream(scratch_.streams_b, 1, n);
  for (int i = 1; i < n_streams(); ++i) {
    const Tensor ui = stream(scratch_.streams_b, i, n);
    backend_.matmul(stream(scratch_.streams_a, i, n), altup_unembed_[static_cast<size_t>(i - 1)].tensor, Tensor(), ui);
    backend_.match_rms(ui, f0, 1e-5f);
    if (i > 1) backend_.add(sum, ui);
  }
  const float inv_n = round_to(1.0f / static_cast<float>(n_streams()), backend_.activation_dtype());
  backend_.scale(sum, inv_n);
  backend_.scale(f0, inv_n);
  ends_.logits(backend_, c, f0, sum, rows(scratch_.normed, n), scratch_.selected.tensor.rows(0, r),
               ints_.logit_rows(r), logits, ints_.hidden_rows(hr), batch.hidden);
  return Status::ok();
}

// Bytes: the device weights once, the embedding rows and per-layer table rows of the step's
// tokens, the head when a row wants logits, every layer's attention reads of its cache layer's
// K/V (a K/V-reusing layer reads its source's again) and the writes of the cache layers. Flops: 2
// per linear weight per token (the sparse layers' MLPs run dense, the top-k only zeroes the
// gate), 2 per head weight per logits row, 4 hd per query head per (query, visible key) pair.
StepCost Gemma3nModel::step_cost(const StepBatch& b, double kv_bytes_per_token) const {
  const ModelConfig& c = config_;
  const double n = b.n_tokens(), rows_out = static_cast<double>(b.logit_rows.size());
  const double table = static_cast<double>(c.vocab_size) * c.hidden_size;
  const double pl_row_bytes = ple_.row_bytes();
  const double linear_params = static_cast<double>(n_params_ - ple_.table_numel()) - table;
  double pairs = 0.0, kv_read = 0.0;
  for (int l = 0; l < c.n_layers; ++l) {
    const AttentionWork work = attention_work(b, c.layer_window(l));
    pairs += work.pairs;
    kv_read += work.kv_read;
  }
  const double kv_layer_bytes = kv_bytes_per_token / c.gemma3n.n_kv_layers();
  StepCost cost;
  cost.flops = 2.0 * linear_params * n + 2.0 * table * rows_out + 4.0 * qkv_.n_heads * qkv_.head_dim * pairs;
  cost.bytes = static_cast<double>(weight_bytes_) - ends_.loaded_bytes() + ends_.step_bytes(c, n, rows_out > 0) +
               n * pl_row_bytes + kv_layer_bytes * kv_read + kv_bytes_per_token * n;
  return cost;
}

Status check_gemma3n_load(const ModelConfig& c, Backend& backend, const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_float_weights_load(c, backend, options));
  if (!backend.supports_altup())
    return unsupported("backend '" + backend.name() + "' has no Gemma 3n ops (AltUp, gaussian top-k, v norm); " +
                       c.arch + " runs on the CPU and CUDA backends");
  if (options.communicator != nullptr && options.communicator->size() > 1)
    return unsupported("gemma3n does not run under tensor parallelism (AltUp's streams are not split); use tp 1");
  if (c.gemma3n.altup_inputs < 2)
    return unsupported("config.json: altup_num_inputs " + std::to_string(c.gemma3n.altup_inputs) +
                       " is not supported for gemma3n; supported: 2 or more (the released models use 4)");
  if (c.gemma3n.altup_inputs > 8)
    return unsupported("config.json: altup_num_inputs " + std::to_string(c.gemma3n.altup_inputs) +
                       " is not supported for gemma3n; at most 8");
  return Status::ok();
}

}  // namespace

double normal_quantile(double p) {
  // Acklam's rational approximation, then one Newton step on erfc: double precision in (0, 1).
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p > 1.0 - 0.02425) {
    const double q = std::sqrt(-2.0 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2.0 * M_PI) * std::exp(x * x / 2.0);
  return x - u / (1.0 + x * u / 2.0);
}

Expected<std::unique_ptr<Model>> load_gemma3n(std::unique_ptr<Checkpoint> checkpoint, Backend& backend,
                                              const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_gemma3n_load(checkpoint->config(), backend, options));
  auto model = std::make_unique<Gemma3nModel>(std::move(checkpoint), backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
