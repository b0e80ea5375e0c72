#include "models/gemma4.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "models/decoder_ends.h"
#include "models/float_weights_checks.h"
#include "models/image_inputs.h"
#include "models/llama.h"
#include "models/load_progress.h"
#include "models/lora.h"
#include "models/moe_block.h"
#include "models/per_layer_inputs.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

// Shapes: H hidden, D per-layer input width, L layers, I_l a layer's MLP width, hd a layer's
// head_dim (sliding or full), T max_batch_tokens, n a step's tokens, E experts, k top_k_experts.

struct Layer {
  OwnedTensor input_norm, post_attn_norm, pre_ffw_norm, post_ffw_norm;  // [H] f32
  LinearWeight qkv;          // [(H_q + 2 KV) hd, H] (k_eq_v: k_proj's rows twice); q rows alone in a layer reusing K/V
  OwnedTensor q_norm, k_norm;  // [hd] f32 (k_norm empty in a layer reusing K/V)
  OwnedTensor o;             // [H, H_q hd]
  LinearWeight gate_up;      // [2 I_l, H]
  OwnedTensor down;          // [H, I_l]
  int64_t inter = 0;         // I_l
  // The MoE block (Gemma4Fields::moe): router, experts, and the three extra norms [H] f32.
  MoeBlock moe;
  OwnedTensor router_norm;   // [H] f32: router.scale * hidden^-0.5 (the norm itself has no weight)
  OwnedTensor expert_scale;  // [E] f32: router.per_expert_scale
  OwnedTensor post_ffw_norm_1, pre_ffw_norm_2, post_ffw_norm_2;
  OwnedTensor pl_gate;       // [D, H] per_layer_input_gate
  OwnedTensor pl_proj;       // [H, D] per_layer_projection
  OwnedTensor post_pl_norm;  // [H] f32
  float scalar = 1.0f;       // layer_scalar
  bool full = false;         // full_attention (else sliding)
  bool shared_kv = false;    // reads an earlier layer's K/V (Gemma4Fields::kv_layer)
};

struct Scratch {
  OwnedTensor x;               // [T, H] the residual stream
  OwnedTensor normed, delta, ffw, selected, zero;  // [T, H] (zero: never written, the logits' delta)
  OwnedTensor qkv;             // [T, max row width]
  OwnedTensor q;               // [T, H_q max hd]: a K/V-reusing layer's q before it joins qkv
  OwnedTensor attn;            // [T, H_q max hd]
  OwnedTensor gate_up, act;    // [T, 2 max I], [T, max I]
  OwnedTensor pl_gate;         // [T, D]
  OwnedTensor q_rows[2];       // per geometry (sliding, full) [T (H_q + 2 KV)] i32: head j of qkv row t reads
                               // q head (t, min(j, H_q - 1))
  MoeScratch moe;
};

std::string layer_name(int l, const char* suffix) { return "model.layers." + std::to_string(l) + "." + suffix; }

class Gemma4Model final : public Model {
 public:
  Gemma4Model(std::unique_ptr<Checkpoint> ck, Backend& backend, const LoadOptions& options)
      : ck_(std::move(ck)), config_(ck_->config()), backend_(backend), options_(options),
        geometry_{QkvLayout{config_.n_heads, config_.n_kv_heads, config_.head_dim},
                  QkvLayout{config_.n_heads, config_.gemma4.full_kv_heads, config_.gemma4.full_head_dim}},
        images_(backend, config_, options.max_batch_tokens) {}

  Status load();

  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    const QkvLayout& s = geometry_[0];
    KvLayout layout{config_.gemma4.n_kv_layers(), n_pages, page_size, s.n_kv_heads, s.head_dim, dtype};
    layout.layer_shapes = layer_shapes();
    return layout;
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;
  bool has_vision() const override { return images_.loaded(); }
  VisionStats vision_stats() const override { return images_.stats(); }

 private:
  bool ple() const { return config_.gemma4.per_layer_dim > 0; }
  const QkvLayout& qkv(const Layer& layer) const { return geometry_[layer.full ? 1 : 0]; }
  // Each cache layer's shape (the layers before the K/V-reusing ones), uniform or not.
  std::vector<KvLayerShape> layer_shapes() const;
  Expected<OwnedTensor> scaled_vector(const std::string& name, int64_t size, float scale);
  Status load_attention(WeightLoader& w, int l, Layer& layer);
  Status load_moe(WeightLoader& w, int l, Layer& layer);
  Status load_layer(WeightLoader& w, int l, Layer& layer);
  Status allocate_scratch();
  void run_attention(const Layer& layer, const KvLayer& cache, const AttentionMeta& meta, int n);
  void run_mlp(const Layer& layer, const Tensor& x, const Tensor& out, int n);
  void run_moe(const Layer& layer, const Tensor& h, const Tensor& out, int n);
  void run_layer(int l, const KvCache& kv, const AttentionMeta& meta, int n);
  Tensor rows(const OwnedTensor& buf, int n) const { return buf.tensor.rows(0, n); }
  Tensor cols(const OwnedTensor& buf, int n, int64_t width) const {
    return Tensor(buf.tensor.data, buf.tensor.dtype, {n, width});
  }

  std::unique_ptr<Checkpoint> ck_;  // kept: its mapping holds embed_tokens_per_layer
  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  QkvLayout geometry_[2];  // sliding, full
  DecoderEnds ends_;
  std::vector<Layer> layers_;
  PerLayerInputs ple_;
  std::vector<int32_t> ple_tokens_;  // a step's tokens with its image tokens as the pad token (per-layer inputs)
  MoeShard shard_;
  RopeConfig rope_full_, rope_sliding_;
  Scratch scratch_;
  StepInputs ints_;
  ImageInputs images_;  // the vision tower (VisionKind::gemma4) and its features over the image rows
  float embed_scale_ = 0.0f;
  int64_t n_params_ = 0, weight_bytes_ = 0, expert_params_ = 0;
};

std::vector<KvLayerShape> Gemma4Model::layer_shapes() const {
  std::vector<KvLayerShape> shapes;
  for (int l = 0; l < config_.gemma4.n_kv_layers(); ++l) {
    const QkvLayout& g = geometry_[config_.layer_window(l) > 0 ? 0 : 1];
    shapes.push_back({g.n_kv_heads, g.head_dim});
  }
  const bool uniform = std::all_of(shapes.begin(), shapes.end(), [&](const KvLayerShape& s) { return s == shapes[0]; });
  if (uniform && !shapes.empty() && shapes[0] == KvLayerShape{geometry_[0].n_kv_heads, geometry_[0].head_dim}) return {};
  return shapes;
}

// A vector [size] times `scale` in f32, as vector_f32 keeps it (Gemma4TextRouter's scale with
// its hidden^-0.5).
Expected<OwnedTensor> Gemma4Model::scaled_vector(const std::string& name, int64_t size, float scale) {
  BRIGADE_ASSIGN_OR_RETURN(const RawTensor t, ck_->tensor(name, {size}));
  std::vector<float> v(static_cast<size_t>(size));
  t.dequantize(0, size, v.data());
  for (float& x : v) x *= scale;
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor out, alloc_tensor(backend_, DType::f32, 1, size));
  out.tensor = out.tensor.reshaped({size});
  backend_.upload(out.tensor, v.data());
  backend_.synchronize();  // before v is freed
  weight_bytes_ += static_cast<int64_t>(out.tensor.nbytes());
  n_params_ += size;
  return out;
}

Status Gemma4Model::load_attention(WeightLoader& w, int l, Layer& layer) {
  const ModelConfig& c = config_;
  const QkvLayout& g = qkv(layer);
  const int64_t h = c.hidden_size, q = g.q_width(), kv = g.kv_width();
  const std::string qn = layer_name(l, "self_attn.q_proj.weight"), kn = layer_name(l, "self_attn.k_proj.weight");
  if (layer.shared_kv) {  // no k/v projections or norms (transformers ignores them if stored)
    BRIGADE_ASSIGN_OR_RETURN(layer.qkv, w.fused_linear({qn}, {q}, h));
  } else {
    // attention_k_eq_v: the full layers' value is k_proj's output (before k_norm and RoPE).
    const std::string vn = c.gemma4.k_eq_v && layer.full ? kn : layer_name(l, "self_attn.v_proj.weight");
    BRIGADE_ASSIGN_OR_RETURN(layer.qkv, w.fused_linear({qn, kn, vn}, {q, kv, kv}, h));
    BRIGADE_ASSIGN_OR_RETURN(layer.k_norm, w.vector_f32({layer_name(l, "self_attn.k_norm.weight")}, {g.head_dim}));
  }
  BRIGADE_ASSIGN_OR_RETURN(layer.q_norm, w.vector_f32({layer_name(l, "self_attn.q_norm.weight")}, {g.head_dim}));
  BRIGADE_ASSIGN_OR_RETURN(layer.o, w.matrix(layer_name(l, "self_attn.o_proj.weight"), h, q));
  return Status::ok();
}

Status Gemma4Model::load_moe(WeightLoader& w, int l, Layer& layer) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size;
  BRIGADE_ASSIGN_OR_RETURN(layer.moe, load_moe_block(w, c, l, shard_));
  expert_params_ += int64_t{c.n_experts} * 3 * c.moe_intermediate_size * h;
  const float root = static_cast<float>(std::pow(static_cast<double>(h), -0.5));
  BRIGADE_ASSIGN_OR_RETURN(layer.router_norm, scaled_vector(layer_name(l, "router.scale"), h, root));
  BRIGADE_ASSIGN_OR_RETURN(layer.expert_scale, w.vector_f32({layer_name(l, "router.per_expert_scale")}, {c.n_experts}));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_ffw_norm_1, w.vector_f32({layer_name(l, "post_feedforward_layernorm_1.weight")}, {h}));
  BRIGADE_ASSIGN_OR_RETURN(layer.pre_ffw_norm_2, w.vector_f32({layer_name(l, "pre_feedforward_layernorm_2.weight")}, {h}));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_ffw_norm_2, w.vector_f32({layer_name(l, "post_feedforward_layernorm_2.weight")}, {h}));
  return Status::ok();
}

Status Gemma4Model::load_layer(WeightLoader& w, int l, Layer& layer) {
  const ModelConfig& c = config_;
  const auto& g4 = c.gemma4;
  const int64_t h = c.hidden_size;
  layer.full = c.layer_window(l) == 0;
  layer.shared_kv = g4.shares_kv(l);
  auto norm = [&](const char* name) { return w.vector_f32({layer_name(l, name)}, {h}); };
  BRIGADE_ASSIGN_OR_RETURN(layer.input_norm, norm("input_layernorm.weight"));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_attn_norm, norm("post_attention_layernorm.weight"));
  BRIGADE_ASSIGN_OR_RETURN(layer.pre_ffw_norm, norm("pre_feedforward_layernorm.weight"));
  BRIGADE_ASSIGN_OR_RETURN(layer.post_ffw_norm, norm("post_feedforward_layernorm.weight"));
  BRIGADE_RETURN_IF_ERROR(load_attention(w, l, layer));
  layer.inter = g4.intermediate[static_cast<size_t>(l)];
  BRIGADE_ASSIGN_OR_RETURN(layer.gate_up, w.fused_linear({layer_name(l, "mlp.gate_proj.weight"),
                                                          layer_name(l, "mlp.up_proj.weight")},
                                                         {layer.inter, layer.inter}, h));
  BRIGADE_ASSIGN_OR_RETURN(layer.down, w.matrix(layer_name(l, "mlp.down_proj.weight"), h, layer.inter));
  if (g4.moe) BRIGADE_RETURN_IF_ERROR(load_moe(w, l, layer));
  if (ple()) {
    const int64_t d = g4.per_layer_dim;
    BRIGADE_ASSIGN_OR_RETURN(layer.pl_gate, w.matrix(layer_name(l, "per_layer_input_gate.weight"), d, h));
    BRIGADE_ASSIGN_OR_RETURN(layer.pl_proj, w.matrix(layer_name(l, "per_layer_projection.weight"), h, d));
    BRIGADE_ASSIGN_OR_RETURN(layer.post_pl_norm, norm("post_per_layer_input_norm.weight"));
  }
  // layer_scalar [1]: a buffer the forward multiplies each layer's output by, read here.
  BRIGADE_ASSIGN_OR_RETURN(const float scalar, w.scalar_f32(layer_name(l, "layer_scalar")));
  layer.scalar = round_to(scalar, backend_.activation_dtype());
  return Status::ok();
}

Status Gemma4Model::load() {
  const ModelConfig& c = config_;
  const auto& g4 = c.gemma4;
  WeightLoader w(*ck_, backend_, options_.weight_dtype);
  shard_ = moe_shard(c, 0, 1, false);
  BRIGADE_RETURN_IF_ERROR(ends_.load_embedding(w, c));
  if (ple())
    BRIGADE_RETURN_IF_ERROR(ple_.load(*ck_, w, backend_, c.n_layers, c.hidden_size, g4.per_layer_dim,
                                      g4.per_layer_vocab, c.rms_eps, options_.max_batch_tokens));
  BRIGADE_RETURN_IF_ERROR(load_layers_with_progress(
      load_progress_name(*ck_), c.n_layers, options_.progress,
      [&](int l) { return load_layer(w, l, layers_.emplace_back()); }, [&] { return w.n_bytes() + weight_bytes_; }));
  BRIGADE_RETURN_IF_ERROR(ends_.load_head(w, c, true));
  // The vision tower runs where the vision ops are (the CPU backend); elsewhere the model serves
  // text (the engine says so).
  if (c.vision.present() && backend_.supports_vision()) BRIGADE_RETURN_IF_ERROR(images_.load(w));
  n_params_ += w.n_params() + (ple() ? ple_.table_numel() : 0);
  weight_bytes_ += w.n_bytes();  // the per-layer table stays in the mapping, host memory
  rope_sliding_.rotary_dim = c.head_dim;
  rope_sliding_.inv_freq = rope_inv_freq(c.rope_local_theta, c.head_dim);
  // transformers' _compute_proportional_rope_parameters: the first partial * hd / 2 pairs rotate
  // at base^(-2i / hd), the rest not at all (frequency 0), all over the factor.
  const int full_hd = g4.full_head_dim;
  rope_full_.rotary_dim = full_hd;
  rope_full_.inv_freq = rope_inv_freq(c.rope_theta, full_hd);
  const auto rotated = static_cast<size_t>(g4.full_rope_partial * static_cast<float>(full_hd) / 2.0f);
  for (size_t i = 0; i < rope_full_.inv_freq.size(); ++i)
    rope_full_.inv_freq[i] = i < rotated ? rope_full_.inv_freq[i] / g4.full_rope_factor : 0.0f;
  embed_scale_ = round_to(c.embed_scale, backend_.activation_dtype());
  BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  backend_.synchronize();
  return Status::ok();
}

Status Gemma4Model::allocate_scratch() {
  const ModelConfig& c = config_;
  const DType a = backend_.activation_dtype();
  const int64_t t = options_.max_batch_tokens, h = c.hidden_size;
  const int64_t row = std::max(geometry_[0].row_width(), geometry_[1].row_width());
  const int64_t q = std::max(geometry_[0].q_width(), geometry_[1].q_width());
  Scratch& s = scratch_;
  for (OwnedTensor* o : {&s.x, &s.normed, &s.delta, &s.ffw, &s.selected, &s.zero}) {
    BRIGADE_ASSIGN_OR_RETURN(*o, alloc_tensor(backend_, a, t, h));
  }
  const std::vector<char> zeros(s.zero.tensor.nbytes(), 0);
  backend_.upload(s.zero.tensor, zeros.data());
  BRIGADE_ASSIGN_OR_RETURN(s.qkv, alloc_tensor(backend_, a, t, row));
  BRIGADE_ASSIGN_OR_RETURN(s.q, alloc_tensor(backend_, a, t, q));
  BRIGADE_ASSIGN_OR_RETURN(s.attn, alloc_tensor(backend_, a, t, q));
  BRIGADE_ASSIGN_OR_RETURN(s.gate_up, alloc_tensor(backend_, a, t, 2 * int64_t{c.intermediate_size}));
  BRIGADE_ASSIGN_OR_RETURN(s.act, alloc_tensor(backend_, a, t, c.intermediate_size));
  if (ple()) {
    BRIGADE_ASSIGN_OR_RETURN(s.pl_gate, alloc_tensor(backend_, a, t, c.gemma4.per_layer_dim));
  }
  for (int i = 0; i < 2; ++i) {
    const QkvLayout& g = geometry_[i];
    const int64_t heads = g.n_heads, row_heads = g.n_heads + 2 * int64_t{g.n_kv_heads};
    BRIGADE_ASSIGN_OR_RETURN(s.q_rows[i], alloc_tensor(backend_, DType::i32, t * row_heads, 1));
    std::vector<int32_t> idx(static_cast<size_t>(t * row_heads));
    for (int64_t j = 0; j < t * row_heads; ++j)
      idx[static_cast<size_t>(j)] = static_cast<int32_t>(j / row_heads * heads + std::min(j % row_heads, heads - 1));
    backend_.upload(s.q_rows[i].tensor, idx.data());
    backend_.synchronize();  // before idx is freed
  }
  if (c.gemma4.moe) {
    BRIGADE_ASSIGN_OR_RETURN(s.moe, allocate_moe_scratch(backend_, c, shard_, t));
  }
  return ints_.allocate(backend_, t);
}

// delta = o_proj(attention(normed)) of one layer (Gemma4TextAttention.forward).
void Gemma4Model::run_attention(const Layer& layer, const KvLayer& cache, const AttentionMeta& meta, int n) {
  const QkvLayout& g = qkv(layer);
  const Tensor x = rows(scratch_.normed, n), qkv_rows = cols(scratch_.qkv, n, g.row_width());
  const Tensor attn = cols(scratch_.attn, n, g.q_width());
  if (layer.shared_kv) {  // q alone, laid out as qkv's rows (their k/v heads copies of a q head, not read)
    const Tensor q = cols(scratch_.q, n, g.q_width());
    layer.qkv.matmul(backend_, x, Tensor(), q);
    const int64_t row_heads = g.row_width() / g.head_dim;
    backend_.gather_rows(q.reshaped({n * int64_t{g.n_heads}, g.head_dim}),
                         scratch_.q_rows[layer.full ? 1 : 0].tensor.rows(0, n * row_heads).reshaped({n * row_heads}),
                         qkv_rows.reshaped({n * row_heads, g.head_dim}));
  } else {
    layer.qkv.matmul(backend_, x, Tensor(), qkv_rows);
  }
  backend_.qk_head_norm(qkv_rows, g, layer.q_norm.tensor, layer.shared_kv ? layer.q_norm.tensor : layer.k_norm.tensor,
                        config_.rms_eps);
  if (!layer.shared_kv) backend_.v_head_norm(qkv_rows, g, config_.rms_eps);
  backend_.rope(qkv_rows, g, ints_.positions(n), layer.full ? rope_full_ : rope_sliding_);
  if (!layer.shared_kv) backend_.write_kv(cache, qkv_rows, g, ints_.slots(n));
  backend_.attention(qkv_rows, g, cache, meta, config_.attn_scale, attn);
  backend_.matmul(attn, layer.o.tensor, Tensor(), rows(scratch_.delta, n));
}

// out = down(gelu_tanh(gate(x)) * up(x)) (Gemma4TextMLP).
void Gemma4Model::run_mlp(const Layer& layer, const Tensor& x, const Tensor& out, int n) {
  const Tensor gate_up = cols(scratch_.gate_up, n, 2 * layer.inter), act = cols(scratch_.act, n, layer.inter);
  layer.gate_up.matmul(backend_, x, Tensor(), gate_up);
  backend_.gelu_tanh_mul(gate_up, act);
  backend_.matmul(act, layer.down.tensor, Tensor(), out);
}

// out = post_ffw_norm_2(experts(pre_ffw_norm_2(h))), routed on h (Gemma4TextRouter: its RMSNorm
// without weight, times scale * hidden^-0.5, is one rms_norm with router_norm). Uses scratch
// normed.
void Gemma4Model::run_moe(const Layer& layer, const Tensor& h, const Tensor& out, int n) {
  const ModelConfig& c = config_;
  const MoeScratch& s = scratch_.moe;
  const Tensor normed = rows(scratch_.normed, n), logits = s.router_logits.tensor.rows(0, n);
  const Tensor ids = s.ids.tensor.rows(0, n), weights = s.weights.tensor.rows(0, n);
  backend_.rms_norm(h, layer.router_norm.tensor, c.rms_eps, normed);
  backend_.matmul(normed, layer.moe.router.tensor, Tensor(), logits);
  MoeRouting routing;
  routing.k = c.n_experts_per_tok;
  routing.scoring = MoeScoring::softmax;
  routing.normalize = true;
  routing.expert_scale = layer.expert_scale.tensor;
  backend_.moe_route(logits, routing, ids, weights);
  backend_.rms_norm(h, layer.pre_ffw_norm_2.tensor, c.rms_eps, normed);
  MoeExpertMlp mlp;
  mlp.gelu_tanh = true;
  backend_.moe_experts(normed, layer.moe.gate_up.tensor, layer.moe.down.tensor, ids, weights, mlp, s.workspace.tensor,
                       out);
  backend_.rms_norm(out, layer.post_ffw_norm_2.tensor, c.rms_eps, out);
}

// One decoder layer on scratch x in place (Gemma4TextDecoderLayer.forward).
void Gemma4Model::run_layer(int l, const KvCache& kv, const AttentionMeta& meta, int n) {
  const Layer& layer = layers_[static_cast<size_t>(l)];
  const ModelConfig& c = config_;
  const float eps = c.rms_eps;
  const Tensor x = rows(scratch_.x, n), normed = rows(scratch_.normed, n), delta = rows(scratch_.delta, n);
  const Tensor ffw = rows(scratch_.ffw, n);
  backend_.rms_norm(x, layer.input_norm.tensor, eps, normed);
  run_attention(layer, kv.layer(c.gemma4.kv_layer[static_cast<size_t>(l)]), meta, n);
  backend_.rms_norm(delta, layer.post_attn_norm.tensor, eps, delta);
  backend_.add(x, delta);
  backend_.rms_norm(x, layer.pre_ffw_norm.tensor, eps, normed);
  run_mlp(layer, normed, ffw, n);
  if (c.gemma4.moe) {  // the dense MLP's and the experts' outputs, each normed, summed
    backend_.rms_norm(ffw, layer.post_ffw_norm_1.tensor, eps, ffw);
    run_moe(layer, x, delta, n);
    backend_.add(ffw, delta);
  }
  backend_.rms_norm(ffw, layer.post_ffw_norm.tensor, eps, ffw);
  backend_.add(x, ffw);
  if (ple()) {
    const Tensor gate = rows(scratch_.pl_gate, n);
    backend_.matmul(x, layer.pl_gate.tensor, Tensor(), gate);
    backend_.gelu_tanh_gate(gate, ple_.layer(l, n));
    backend_.matmul(gate, layer.pl_proj.tensor, Tensor(), delta);
    backend_.rms_norm(delta, layer.post_pl_norm.tensor, eps, delta);
    backend_.add(x, delta);
  }
  if (layer.scalar != 1.0f) backend_.scale(x, layer.scalar);
}

Status Gemma4Model::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const ModelConfig& c = config_;
  StepLimits limits{c.vocab_size, c.max_position, options_.max_batch_tokens, c.gemma4.n_kv_layers(),
                    geometry_[0].n_kv_heads, geometry_[0].head_dim};
  limits.layer_shapes = layer_shapes();
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, c.hidden_size, backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(check_no_lora(batch));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> attend_until, images_.begin_step(batch));
  if (ple() && !batch.device_tokens.empty())  // (actors/engine/instance.cpp runs these on the host step path)
    return unsupported("gemma4 with per-layer inputs gathers its per-layer embedding rows from the mapped checkpoint "
                       "on the host, so it needs the step's token ids there: pass StepBatch::tokens without "
                       "device_tokens");
  const int n = batch.n_tokens();
  // Placeholders: the image token only in the rows of the step's images (check_step_images saw
  // them hold it; any other is refused), video and audio never (their towers are not built).
  int64_t image_rows = 0, claimed = 0;
  for (const StepImage& im : batch.images) claimed += step_image_rows(batch, im, c.vision.image_tokens(im.grid_h, im.grid_w));
  for (int32_t id : batch.tokens)
    for (size_t k = 0; k < c.gemma4.tower_tokens.size(); ++k)
      if (id == c.gemma4.tower_tokens[k]) {
        if (k == 0 && images_.loaded()) {
          ++image_rows;
          continue;
        }
        return invalid_argument("token id " + std::to_string(id) + " is a Gemma 4 image, video or audio placeholder "
                                "(its towers, which fill it, are not loaded); send text token ids only");
      }
  if (image_rows != claimed)
    return invalid_argument("the step holds " + std::to_string(image_rows) + " Gemma 4 image tokens (id " +
                            std::to_string(c.gemma4.tower_tokens[0]) + ") but its images claim " + std::to_string(claimed) +
                            "; an image token stands only inside an image's run");
  // transformers embeds the pad token at the placeholders (their rows then take the features:
  // images_.put), and their per-layer inputs read the pad token's row (llm_input_ids) and
  // project the features (the merged inputs_embeds).
  const std::vector<int32_t>* ple_tokens = &batch.tokens;
  if (ple() && image_rows > 0) {
    ple_tokens_ = batch.tokens;
    for (int32_t& id : ple_tokens_)
      if (id == c.gemma4.tower_tokens[0]) id = c.gemma4.pad_token;
    ple_tokens = &ple_tokens_;
  }
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch, attend_until));
  // Gemma4Model's masks: the sliding layers' image rows see their whole image (attend_until,
  // under use_bidirectional_attention "vision"); the full layers stay causal.
  AttentionMeta full = ints_.meta(batch, bounds, 0);
  full.attend_until = Tensor();
  const AttentionMeta sliding = ints_.meta(batch, bounds, c.sliding_window);
  const Tensor x = rows(scratch_.x, n);
  backend_.embedding(ends_.embed.tensor, ints_.tokens(batch), x);
  backend_.scale(x, embed_scale_);
  BRIGADE_RETURN_IF_ERROR(images_.put(batch, x));
  if (ple()) ple_.compute(backend_, *ple_tokens, x, n);
  for (int l = 0; l < c.n_layers; ++l) run_layer(l, kv, c.layer_window(l) > 0 ? sliding : full, n);
  images_.end_step();
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), hr = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && hr == 0) return Status::ok();
  ends_.logits(backend_, c, x, rows(scratch_.zero, n), rows(scratch_.normed, n), scratch_.selected.tensor.rows(0, r),
               ints_.logit_rows(r), logits, ints_.hidden_rows(hr), batch.hidden);
  return Status::ok();
}

// Bytes: the device weights once (of the experts, min(E, n k) per layer: an upper bound on those
// the step touches), the embedding rows and per-layer table rows of the step's tokens, the head
// when a row wants logits, every layer's attention reads of its cache layer's K/V (a K/V-reusing
// layer reads its source's again) and the writes of the cache layers. Flops: 2 per linear weight
// per token (k of the E experts'), 2 per head weight per logits row, 4 hd per query head per
// (query, visible key) pair.
StepCost Gemma4Model::step_cost(const StepBatch& b, double kv_bytes_per_token) const {
  const ModelConfig& c = config_;
  const double n = b.n_tokens(), rows_out = static_cast<double>(b.logit_rows.size());
  const double table = static_cast<double>(c.vocab_size) * c.hidden_size;
  const double experts = static_cast<double>(expert_params_);
  const double active = c.n_experts > 0 ? static_cast<double>(c.n_experts_per_tok) / c.n_experts : 0.0;
  const double touched = c.n_experts > 0 ? std::min<double>(c.n_experts, n * c.n_experts_per_tok) / c.n_experts : 0.0;
  const double linear_params =
      static_cast<double>(n_params_ - images_.params() - (ple() ? ple_.table_numel() : 0)) - table - experts;
  // kv_bytes_per_token is K and V of every cache layer; a layer's share is its row width over
  // the cache layers' sum (full layers' rows are wider than sliding ones': KvLayout::layer_shapes).
  double cache_width = 0.0;
  for (int l = 0; l < c.gemma4.n_kv_layers(); ++l) cache_width += geometry_[c.layer_window(l) > 0 ? 0 : 1].kv_width();
  double attn_flops = 0.0, kv_read_bytes = 0.0;
  for (int l = 0; l < c.n_layers; ++l) {
    const AttentionWork work = attention_work(b, c.layer_window(l));
    const QkvLayout& g = geometry_[c.layer_window(l) > 0 ? 0 : 1];  // a sharing layer's source has its type
    attn_flops += 4.0 * g.n_heads * g.head_dim * work.pairs;
    kv_read_bytes += kv_bytes_per_token * g.kv_width() / cache_width * work.kv_read;
  }
  const double expert_bytes = experts > 0.0 ? static_cast<double>(weight_bytes_) * experts / static_cast<double>(n_params_)
                                            : 0.0;  // the experts' share of the weight bytes
  StepCost cost;
  cost.flops = 2.0 * (linear_params + experts * active) * n + 2.0 * table * rows_out + attn_flops;
  cost.bytes = static_cast<double>(weight_bytes_ - images_.bytes()) - expert_bytes * (1.0 - touched) - ends_.loaded_bytes() +
               ends_.step_bytes(c, n, rows_out > 0) + (ple() ? n * ple_.row_bytes() : 0.0) +
               kv_read_bytes + kv_bytes_per_token * n;
  images_.add_cost(b, cost);  // the tower's work for the images it encodes this step
  return cost;
}

Status check_gemma4_load(const ModelConfig& c, Backend& backend, const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_float_weights_load(c, backend, options));
  if (!backend.supports_altup())
    return unsupported("backend '" + backend.name() + "' has no Gemma 4 ops (v norm, the per-layer gate); " + c.arch +
                       " runs on the CPU and CUDA backends");
  if (c.gemma4.moe && !(backend.supports_moe() && backend.supports_gelu_experts()))
    return unsupported("backend '" + backend.name() + "' has no gelu_tanh experts or per-expert scale (Gemma 4's MoE "
                       "block); it runs on the CPU and CUDA backends");
  if (const int most = backend.max_attention_head_dim(); most > 0 && std::max(c.head_dim, c.gemma4.full_head_dim) > most)
    return unsupported("backend '" + backend.name() + "' runs attention over heads of at most " + std::to_string(most) +
                       " dims, and this Gemma 4's full_attention layers have global_head_dim " +
                       std::to_string(c.gemma4.full_head_dim) + " (sliding: head_dim " + std::to_string(c.head_dim) +
                       "); run it on the CPU backend");
  if (options.communicator != nullptr && options.communicator->size() > 1)
    return unsupported("gemma4 does not run under tensor parallelism yet; use tp 1");
  if (options.mtp || !options.eagle3.empty())
    return unsupported("gemma4 has no MTP module or EAGLE-3 head here; drop the speculative config (n-gram drafting "
                       "works)");
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<Model>> load_gemma4(std::unique_ptr<Checkpoint> checkpoint, Backend& backend,
                                             const LoadOptions& options) {
  BRIGADE_RETURN_IF_ERROR(check_gemma4_load(checkpoint->config(), backend, options));
  auto model = std::make_unique<Gemma4Model>(std::move(checkpoint), backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
