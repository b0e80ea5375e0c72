#include "models/mamba2.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/decoder_ends.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

class Mamba2Model final : public Model {
 public:
  Mamba2Model(const ModelConfig& config, Backend& backend, const LoadOptions& options)
      : config_(config), backend_(backend), options_(options), layout_(config.ssm.layout) {}

  Status load(const Checkpoint& ck);
  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    return KvLayout{0, n_pages, page_size, 0, 0, dtype};
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;
  int state_slots() const override { return n_slots_; }
  int64_t state_bytes_per_slot() const override { return mamba2_state_bytes(config_); }

 private:
  struct Layer {
    OwnedTensor norm, in_proj, in_bias, conv_w, conv_b, a, d, dt_bias, gated_norm, out_proj, out_bias;
    OwnedTensor conv_state, ssm_state;  // [slots, kernel - 1, conv_dim], [slots, H, P, N] f32
  };
  // A vector of `shape` (numel n) read as f32 through f (element, index), uploaded.
  template <typename F>
  Expected<OwnedTensor> host_vector(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape, F f);
  // Checks the step's state slots and decides which sequences start afresh (fresh_).
  Status plan_states(const StepBatch& batch);

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  SsmLayout layout_;
  DecoderEnds ends_;
  std::vector<Layer> layers_;
  int n_slots_ = 0;
  std::vector<int32_t> slot_next_;  // the position each slot's state continues at (-1: none)
  int64_t n_params_ = 0, weight_bytes_ = 0, host_params_ = 0, host_bytes_ = 0;
  StepInputs ints_;
  OwnedTensor slots_, fresh_;
  OwnedTensor residual_, normed_, delta_, proj_, xbc_, y_, selected_;
  std::vector<int32_t> slots_host_, fresh_host_;  // the step's slot of each sequence, and which start afresh
};

template <typename F>
Expected<OwnedTensor> Mamba2Model::host_vector(const Checkpoint& ck, const std::string& name,
                                               const std::vector<int64_t>& shape, F f) {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck.tensor(name, shape));
  if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
    return corrupt(t.file + ": tensor '" + name + "' is stored " + t.type_name() + "; it must be F32, BF16 or F16");
  std::vector<float> host(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) host[static_cast<size_t>(i)] = f(static_cast<float>(t.at(i)), i);
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor out, alloc_tensor(backend_, DType::f32, 1, t.numel()));
  backend_.upload(out.tensor, host.data());
  host_params_ += t.numel();
  host_bytes_ += t.numel() * static_cast<int64_t>(sizeof(float));
  return out;
}

Status Mamba2Model::load(const Checkpoint& ck) {
  WeightLoader w(ck, backend_, options_.weight_dtype);
  const int64_t h = config_.hidden_size, di = layout_.d_inner(), ch = layout_.conv_dim(), heads = layout_.n_heads;
  const int64_t k = layout_.conv_kernel;
  const std::string embed = w.has("backbone.embeddings.weight") ? "backbone.embeddings.weight" : "backbone.embedding.weight";
  BRIGADE_ASSIGN_OR_RETURN(ends_.embed, w.table(embed, config_.vocab_size, h));
  BRIGADE_ASSIGN_OR_RETURN(ends_.final_norm, w.vector_f32({"backbone.norm_f.weight"}, {h}));
  if (!config_.tie_embeddings) {
    BRIGADE_ASSIGN_OR_RETURN(ends_.lm_head, w.table("lm_head.weight", config_.vocab_size, h));
  }
  n_slots_ = std::max(options_.state_slots, 1);
  slot_next_.assign(static_cast<size_t>(n_slots_), -1);
  layers_.resize(static_cast<size_t>(config_.n_layers));
  auto same = [](float v, int64_t) { return v; };
  for (int l = 0; l < config_.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    BRIGADE_ASSIGN_OR_RETURN(L.norm, w.vector_f32({p + "norm.weight"}, {h}));
    BRIGADE_ASSIGN_OR_RETURN(L.in_proj, w.matrix(p + "mixer.in_proj.weight", layout_.proj_width(), h));
    BRIGADE_ASSIGN_OR_RETURN(L.out_proj, w.matrix(p + "mixer.out_proj.weight", h, di));
    if (config_.ssm.proj_bias) {
      BRIGADE_ASSIGN_OR_RETURN(L.in_bias, w.vector_f32({p + "mixer.in_proj.bias"}, {layout_.proj_width()}));
      BRIGADE_ASSIGN_OR_RETURN(L.out_bias, w.vector_f32({p + "mixer.out_proj.bias"}, {h}));
    }
    BRIGADE_ASSIGN_OR_RETURN(L.conv_w, host_vector(ck, p + "mixer.conv1d.weight", {ch, 1, k}, same));
    if (config_.ssm.conv_bias) {
      BRIGADE_ASSIGN_OR_RETURN(L.conv_b, w.vector_f32({p + "mixer.conv1d.bias"}, {ch}));
    }
    BRIGADE_ASSIGN_OR_RETURN(L.a, host_vector(ck, p + "mixer.A_log", {heads}, [](float v, int64_t) { return -std::exp(v); }));
    BRIGADE_ASSIGN_OR_RETURN(L.d, w.vector_f32({p + "mixer.D"}, {heads}));
    BRIGADE_ASSIGN_OR_RETURN(L.dt_bias, w.vector_f32({p + "mixer.dt_bias"}, {heads}));
    if (config_.ssm.gated_norm) {
      BRIGADE_ASSIGN_OR_RETURN(L.gated_norm, w.vector_f32({p + "mixer.norm.weight"}, {di}));
    }
    BRIGADE_ASSIGN_OR_RETURN(L.conv_state, alloc_tensor(backend_, DType::f32, n_slots_, (k - 1) * ch));
    BRIGADE_ASSIGN_OR_RETURN(L.ssm_state, alloc_tensor(backend_, DType::f32, n_slots_, di * layout_.state_size));
  }
  n_params_ = w.n_params() + host_params_;
  weight_bytes_ = w.n_bytes() + host_bytes_;
  const int64_t n = options_.max_batch_tokens;
  const DType act = backend_.activation_dtype();
  BRIGADE_RETURN_IF_ERROR(ints_.allocate(backend_, n));
  BRIGADE_ASSIGN_OR_RETURN(slots_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(fresh_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(residual_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(normed_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(delta_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(selected_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(proj_, alloc_tensor(backend_, act, n, layout_.proj_width()));
  BRIGADE_ASSIGN_OR_RETURN(xbc_, alloc_tensor(backend_, act, n, ch));
  BRIGADE_ASSIGN_OR_RETURN(y_, alloc_tensor(backend_, act, n, di));
  return Status::ok();
}

Status Mamba2Model::plan_states(const StepBatch& batch) {
  const int n_seqs = batch.n_seqs();
  if (!batch.state_slots.empty() && static_cast<int>(batch.state_slots.size()) != n_seqs)
    return invalid_argument("a recurrent model's step needs a state slot per sequence (StepBatch::state_slots): " +
                            std::to_string(batch.state_slots.size()) + " for " + std::to_string(n_seqs) + " sequences");
  slots_host_.resize(static_cast<size_t>(n_seqs));
  for (int s = 0; s < n_seqs; ++s)
    slots_host_[static_cast<size_t>(s)] = batch.state_slots.empty() ? s : batch.state_slots[static_cast<size_t>(s)];
  fresh_host_.assign(static_cast<size_t>(n_seqs), 0);
  std::vector<bool> used(static_cast<size_t>(n_slots_), false);
  for (int s = 0; s < n_seqs; ++s) {
    const int32_t slot = slots_host_[static_cast<size_t>(s)];
    if (slot < 0 || slot >= n_slots_)
      return invalid_argument("state slot " + std::to_string(slot) + " of sequence " + std::to_string(s) +
                              " is outside [0, " + std::to_string(n_slots_) + ")");
    if (used[static_cast<size_t>(slot)])
      return invalid_argument("state slot " + std::to_string(slot) + " is given to two sequences of one step");
    used[static_cast<size_t>(slot)] = true;
    const int32_t first = batch.positions[static_cast<size_t>(batch.q_start[static_cast<size_t>(s)])];
    if (first == 0) {
      fresh_host_[static_cast<size_t>(s)] = 1;
    } else if (slot_next_[static_cast<size_t>(slot)] != first) {
      const int32_t held = slot_next_[static_cast<size_t>(slot)];
      return invalid_argument("sequence " + std::to_string(s) + " continues at position " + std::to_string(first) +
                              " but its state slot " + std::to_string(slot) +
                              (held < 0 ? std::string(" holds no state") : " holds the state after " + std::to_string(held) + " positions") +
                              ": a recurrent model's state cannot start from a cached prefix or skip positions");
    }
  }
  return Status::ok();
}

Status Mamba2Model::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const StepLimits limits{config_.vocab_size, config_.max_position, options_.max_batch_tokens, 0, 0, 0};
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, config_.hidden_size,
                                            backend_.activation_dtype()));
  if (!batch.images.empty()) return unsupported("mamba2 takes no images");
  for (int32_t id : batch.lora)
    if (id != 0) return unsupported("mamba2 runs no LoRA adapters");
  BRIGADE_RETURN_IF_ERROR(plan_states(batch));
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch));
  const int n_seqs = batch.n_seqs();
  backend_.upload(Tensor(slots_.tensor.data, DType::i32, {n_seqs}), slots_host_.data());
  backend_.upload(Tensor(fresh_.tensor.data, DType::i32, {n_seqs}), fresh_host_.data());
  const AttentionMeta meta = ints_.meta(batch, bounds, 0);
  const SsmSeqs seqs{meta.q_start, Tensor(slots_.tensor.data, DType::i32, {n_seqs}),
                     Tensor(fresh_.tensor.data, DType::i32, {n_seqs}), n_seqs};

  const int64_t n = batch.n_tokens();
  const Tensor residual = residual_.tensor.rows(0, n), normed = normed_.tensor.rows(0, n), delta = delta_.tensor.rows(0, n);
  const Tensor proj = proj_.tensor.rows(0, n), xbc = xbc_.tensor.rows(0, n), y = y_.tensor.rows(0, n);
  const float eps = config_.rms_eps;
  Backend& b = backend_;
  b.embedding(ends_.embed.tensor, ints_.tokens(batch), residual);
  for (int l = 0; l < config_.n_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    if (l == 0) b.rms_norm(residual, L.norm.tensor, eps, normed);
    else b.add_rms_norm(residual, delta, L.norm.tensor, eps, normed);
    b.matmul(normed, L.in_proj.tensor, L.in_bias.tensor, proj);
    b.ssm_conv(proj, layout_, L.conv_w.tensor, L.conv_b.tensor, seqs, L.conv_state.tensor, xbc);
    const SsmParams params{L.a.tensor, L.d.tensor, L.dt_bias.tensor, config_.ssm.dt_min, config_.ssm.dt_max,
                           L.gated_norm.tensor, eps};
    b.ssm_scan(proj, xbc, layout_, params, seqs, L.ssm_state.tensor, y);
    b.matmul(y, L.out_proj.tensor, L.out_bias.tensor, delta);
  }
  for (int s = 0; s < n_seqs; ++s)
    slot_next_[static_cast<size_t>(slots_host_[static_cast<size_t>(s)])] = batch.ctx_len[static_cast<size_t>(s)];
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), hr = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && hr == 0) return Status::ok();
  ends_.logits(b, config_, residual, delta, normed, selected_.tensor.rows(0, r), ints_.logit_rows(r), logits,
               ints_.hidden_rows(hr), batch.hidden);
  return Status::ok();
}

// The roofline rule of Model::step_cost: every linear weight once (2 flops each per token), the
// embedding rows and the head, and each sequence's state read and written once per step; the
// scan's flops (about 6 per state element per token: decay, input, output) and the conv's.
StepCost Mamba2Model::step_cost(const StepBatch& batch, double kv_bytes_per_token) const {
  (void)kv_bytes_per_token;
  const double n = batch.n_tokens(), h = config_.hidden_size;
  const double linear = static_cast<double>(config_.n_layers) *
                        (static_cast<double>(layout_.proj_width()) * h + static_cast<double>(layout_.d_inner()) * h);
  const double per_param = static_cast<double>(weight_bytes_) / static_cast<double>(std::max<int64_t>(n_params_, 1));
  const bool any_logits = !batch.logit_rows.empty();
  const double state = static_cast<double>(state_bytes_per_slot());
  StepCost c;
  c.flops = 2.0 * linear * n + 2.0 * static_cast<double>(batch.logit_rows.size()) * config_.vocab_size * h +
            n * config_.n_layers *
                (6.0 * static_cast<double>(layout_.d_inner()) * layout_.state_size +
                 2.0 * static_cast<double>(layout_.conv_dim()) * layout_.conv_kernel);
  c.bytes = linear * per_param + ends_.step_bytes(config_, n, any_logits) + 2.0 * batch.n_seqs() * state;
  return c;
}

}  // namespace

int64_t mamba2_state_bytes(const ModelConfig& c) {
  const SsmLayout& l = c.ssm.layout;
  const int64_t layers = std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true);
  return layers * (int64_t{l.conv_kernel - 1} * l.conv_dim() + l.d_inner() * l.state_size) *
         static_cast<int64_t>(sizeof(float));
}

Expected<std::unique_ptr<Model>> load_mamba2(const Checkpoint& checkpoint, Backend& backend, const LoadOptions& options) {
  const ModelConfig& c = checkpoint.config();
  if (options.max_batch_tokens < 1)
    return invalid_argument("max_batch_tokens must be >= 1 (got " + std::to_string(options.max_batch_tokens) + ")");
  if (!backend.supports_ssm())
    return unsupported("mamba2 runs on a backend with the state-space ops (the CPU); backend '" + backend.name() +
                       "' has none");
  if (options.communicator != nullptr && options.communicator->size() > 1)
    return unsupported("mamba2 runs at tp 1 (tensor parallelism does not split its mixers)");
  if (options.lora_enabled()) return unsupported("LoRA adapters are not supported for mamba2");
  if (options.mtp) return unsupported("mamba2 has no MTP module");
  if (const auto t = options.weight_dtype; t && *t == DType::f8e4m3)
    return unsupported("weights: fp8 is not supported for mamba2");
  auto model = std::make_unique<Mamba2Model>(c, backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
