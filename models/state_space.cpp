#include "models/state_space.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "models/decoder_ends.h"
#include "models/image_inputs.h"
#include "models/kimi_linear.h"
#include "models/minimax.h"
#include "models/mla_block.h"
#include "models/moe_block.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/tensor_parallel.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

int group_size(const LoadOptions& o) { return o.communicator != nullptr ? o.communicator->size() : 1; }

// Where a family keeps its tensors: the Mamba1/Mamba2/FalconMamba and Nemotron-H checkpoints'
// backbone.* (a mixer, attention or MLP block per layer, each under mixer.), or Granite 4.0-H's,
// Jamba's, Qwen3-Next's, LFM2's and Falcon-H1's model.* (a mixer or attention, or Falcon-H1's
// both, then the MLP, per layer).
struct Names {
  const char* prefix;      // of every tensor but lm_head
  const char* embed;
  const char* final_norm;
  const char* mixer_norm;  // before the mixer (or attention, or MLP block)
  const char* mixer;       // the mixer's tensors
  const char* attention;   // q/k/v/o_proj's
  const char* ffn_norm;    // before the MLP that follows the mixer or attention; nullptr: none
};
constexpr Names kBackboneNames{"backbone.", "embeddings.weight", "norm_f.weight", "norm.weight", "mixer.", "mixer.",
                               nullptr};
constexpr Names kGraniteNames{"model.", "embed_tokens.weight", "norm.weight", "input_layernorm.weight", "mamba.",
                              "self_attn.", "post_attention_layernorm.weight"};
constexpr Names kJambaNames{"model.", "embed_tokens.weight", "final_layernorm.weight", "input_layernorm.weight", "mamba.",
                            "self_attn.", "pre_ff_layernorm.weight"};
constexpr Names kQwenNextNames{"model.", "embed_tokens.weight", "norm.weight", "input_layernorm.weight", "linear_attn.",
                               "self_attn.", "post_attention_layernorm.weight"};
constexpr Names kFalconH1Names{"model.", "embed_tokens.weight", "final_layernorm.weight", "input_layernorm.weight",
                               "mamba.", "self_attn.", "pre_ff_layernorm.weight"};
constexpr Names kKimiNames{"model.", "embed_tokens.weight", "norm.weight", "input_layernorm.weight", "self_attn.",
                           "self_attn.", "post_attention_layernorm.weight"};
constexpr Names kLfm2Names{"model.", "embed_tokens.weight", "embedding_norm.weight", "operator_norm.weight", "conv.",
                           "self_attn.", "ffn_norm.weight"};

class StateSpaceModel final : public Model {
 public:
  StateSpaceModel(const ModelConfig& config, Backend& backend, const LoadOptions& options)
      : config_(config), backend_(backend), options_(options), layout_(ssm_rank_layout(config, group_size(options))),
        names_(config.arch == "granitemoehybrid" ? kGraniteNames
               : config.arch == "jamba" || config.arch == "bamba" ? kJambaNames
               : config.ssm.gated_delta          ? kQwenNextNames
               : config.ssm.kda || config.ssm.lightning ? kKimiNames  // (MiniMax's names are Kimi's)
               : config.ssm.short_conv           ? kLfm2Names
               : config.parallel_attention       ? kFalconH1Names
                                                 : kBackboneNames),
        n_attn_(config.n_attention_layers()), images_(backend, config_, options.max_batch_tokens) {
    comm_ = options.communicator;
    tp_ = group_size(options);
    rank_ = comm_ != nullptr ? comm_->rank() : 0;
    full_ = config.ssm.layout;
    qkv_ = config.qkv_layout();
    qkv_.n_heads /= tp_;
    qkv_.n_kv_heads /= tp_;
    // A Mamba2 gated norm of one group over every head spans the ranks: its sums are all-reduced.
    split_norm_ = groups_whole() && config.ssm.gated_norm && !gated() && !short_conv();
    if (gated()) {  // Qwen3-Next's attention rotates the first rotary_dim dims of each head
      rope_.style = RopeStyle::neox;
      rope_.rotary_dim = config.rope_dims();
      rope_.inv_freq = rope_inv_freq_scaled(config.rope_theta, config.rope_dims(), config.rope_scaling);
      rope_.attention_factor = rope_attention_factor(config.rope_scaling);
      images_.set_text_rope(rope_);
    } else if (!config.nope && n_attn_ > 0) {  // LFM2's, Falcon-H1's, Granite 4.0's (position_embedding_type rope): whole heads
      rope_.style = RopeStyle::neox;
      rope_.rotary_dim = config.rope_dims();
      rope_.inv_freq = rope_inv_freq_scaled(config.rope_theta, config.rope_dims(), config.rope_scaling);
      rope_.attention_factor = rope_attention_factor(config.rope_scaling);
    }
  }

  Status load(const Checkpoint& ck);
  const ModelConfig& config() const override { return config_; }
  // K/V of the attention layers only; none at all for Mamba1/2 (pages then only count positions).
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    if (config_.is_mla()) {  // Kimi Linear's MLA layers: the latent [c | k_pe] per token
      KvLayout l{n_attn_, n_pages, page_size, 1, config_.kv_lora_rank + config_.qk_rope_head_dim, dtype};
      l.latent = true;
      return l;
    }
    return KvLayout{n_attn_, n_pages, page_size, n_attn_ > 0 ? qkv_.n_kv_heads : 0, n_attn_ > 0 ? config_.head_dim : 0,
                    dtype};
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  bool has_vision() const override { return images_.loaded(); }
  VisionStats vision_stats() const override { return images_.stats(); }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;
  int state_slots() const override { return n_slots_; }
  int64_t state_bytes_per_slot() const override { return recurrent_state_bytes(config_, tp_); }

 private:
  enum class Kind : uint8_t { ssm, attention, mlp, moe };
  struct Layer {
    Kind kind = Kind::ssm;
    OwnedTensor norm;  // before the mixer, attention or MLP block
    // The mixer (Kind::ssm; LFM2's short conv: in_proj, conv_w, conv_b, out_proj and their biases).
    OwnedTensor in_proj, in_bias, conv_w, conv_b, a, d, dt_bias, gated_norm, out_proj, out_bias;
    OwnedTensor conv_state, ssm_state;  // [slots, kernel - 1, conv channels], [slots, H, P, N] f32
    // Gated DeltaNet's input projection q|k|v|z|b|a: its parts' block types kept as stored (a
    // GGUF's attn_qkv Q4_K beside ssm_alpha F32) in row groups of one type each.
    LinearWeight delta_in;
    // Mamba1's: x_proj's dt, B and C rows as three matrices, dt_proj (+ bias); a is [D, N] there.
    OwnedTensor x_dt, x_b, x_c, dt_proj, dt_bias1;
    OwnedTensor dt_norm, b_norm, c_norm;  // Jamba's weights of those norms (FalconMamba's have none)
    // Attention (Kind::attention): q|k|v fused, o; its K/V is layer kv_index of the KV cache.
    // Qwen3-Next's adds the output gate's rows of q_proj (q_gate) and the q/k head norms, LFM2's
    // the q/k head norms.
    OwnedTensor qkv, o, q_gate, q_norm, k_norm;
    int kv_index = -1;
    // The MLP after the mixer or attention (Names::ffn_norm): a SwiGLU (Granite's shared MLP, a
    // Jamba layer's), or a MoE block (Granite's experts with the shared MLP as its shared expert,
    // a Jamba expert layer's).
    OwnedTensor ffn_norm, mlp_gate_up, mlp_down;
    MoeBlock moe;
    // Nemotron-H's MLP block (Kind::mlp): up_proj, relu2, down_proj (biases with mlp_bias); Nemotron
    // 3's MoE block (Kind::moe) is `moe` alone.
    OwnedTensor up, up_bias, down, down_bias;
    // Kimi Linear's (models/kimi_linear.h): a KDA block (Kind::ssm; its states conv_state and
    // ssm_state above) or an MLA block (Kind::attention).
    KdaBlock kda;
    MlaWeights mla;
    // MiniMax's lightning attention (models/minimax.h; Kind::ssm, its state ssm_state above).
    LightningBlock lightning;
  };
  // A tensor of `shape` read as f32 through f (element, index in the whole tensor), uploaded as a
  // vector: of its rows (the first dimension) those in `rows` in turn (all when empty).
  template <typename F>
  Expected<OwnedTensor> host_vector(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape, F f,
                                    const std::vector<Slice>& rows = {});
  // This rank's part of a `total`-row segment at `offset` (the whole segment at tp 1).
  Slice part(int64_t offset, int64_t total) const { return {offset + rank_ * (total / tp_), total / tp_}; }
  // Whether a Mamba2 mixer's groups stay whole on every rank (one group under tp > 1).
  bool groups_whole() const { return tp_ > 1 && full_.n_groups % tp_ != 0; }
  // A Mamba2 mixer's B or C rows (or conv channels) at `offset`: this rank's groups, or all.
  Slice bc_rows(int64_t offset) const {
    const int64_t gn = int64_t{full_.n_groups} * full_.state_size;
    return groups_whole() ? Slice{offset, gn} : part(offset, gn);
  }
  // x = the sum of every rank's x (a sublayer's output under tensor parallelism).
  Status reduce(const Tensor& x) { return comm_ != nullptr ? comm_->all_reduce_sum(x) : Status::ok(); }
  Status load_mixer(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L);
  Status load_mixer1(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L);
  Status load_delta(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L);
  Status load_short_conv(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L);
  // A = -exp(A_log) of `name` (`shape`), f32: llama.cpp's files hold A itself (ssm_a).
  Expected<OwnedTensor> load_a(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<Slice>& rows = {}) {
    const bool stored = gguf_;
    return host_vector(ck, name, shape, [stored](float v, int64_t) { return stored ? v : -std::exp(v); }, rows);
  }
  // A Mamba1 mixer of normed [n, hidden] into delta (this rank's part of it).
  Status run_mixer1(const Layer& L, int64_t n, const SsmSeqs& seqs, const Tensor& normed, const Tensor& delta);
  Status load_attention(WeightLoader& w, const std::string& p, Layer& L);
  Status load_mlp(WeightLoader& w, const std::string& p, int l, Layer& L);
  Status load_mlp_block(WeightLoader& w, const std::string& p, Layer& L);
  Status load_nemotron_moe(WeightLoader& w, const std::string& p, Layer& L);
  // Checks the step's state slots and decides which sequences start afresh (fresh_).
  Status plan_states(const StepBatch& batch);
  Status plan_snapshots(const StepBatch& batch);
  bool granite() const { return config_.arch == "granitemoehybrid"; }
  // Gated DeltaNet mixers and Qwen3-Next's attention (Qwen3-Next, Qwen3.5).
  bool gated() const { return config_.ssm.gated_delta; }
  // LFM2's short-conv blocks.
  bool short_conv() const { return config_.ssm.short_conv; }
  // Kimi Linear's KDA and MLA blocks.
  bool kimi() const { return config_.ssm.kda; }
  // MiniMax's lightning attention layers and residual scalings.
  bool minimax() const { return config_.ssm.lightning; }
  // Falcon-H1's layers: attention beside the mixer, their outputs summed; muP multipliers folded
  // into the weights at load (ModelConfig::mup).
  bool parallel() const { return config_.parallel_attention; }
  // Attention of normed [n, hidden] into out: q|k|v, head norms and RoPE where the family has
  // them, K/V into the layer's pages, Qwen3-Next's output gate, o.
  void run_attention(const Layer& L, int64_t n, const KvCache& kv, const AttentionMeta& meta, const Tensor& normed,
                     const Tensor& out);
  // MiniMax's residual after block `kind` (ModelConfig::block_alpha / block_beta: 0 lightning, 1
  // softmax attention, 2 MLP): residual = alpha * normed (the block's input) and delta *= beta, so
  // the next add_rms_norm's residual + delta is transformers' residual * alpha + output * beta.
  void rescale_residual(size_t kind, const Tensor& residual, const Tensor& normed, const Tensor& delta) {
    const float alpha = config_.block_alpha[kind], beta = config_.block_beta[kind];
    backend_.copy(residual, normed);
    if (alpha != 1.0f) backend_.scale(residual, alpha);
    if (beta != 1.0f) backend_.scale(delta, beta);
  }
  // Qwen3-Next's zero-centred RMSNorms scale by 1 + w (a GGUF file holds 1 + w already).
  float norm_offset() const { return gated() && !gguf_ ? 1.0f : 0.0f; }
  // The in_proj width: Mamba2's z|xBC|dt, Gated DeltaNet's q|k|v|z|b|a, or the short conv's B|C|x.
  int64_t proj_width() const {
    return gated()        ? layout_.conv_dim() + layout_.d_inner() + 2 * int64_t{layout_.n_heads}
           : short_conv() ? 3 * layout_.d_inner()
                          : layout_.proj_width();
  }
  bool has_ffn() const { return names_.ffn_norm != nullptr; }
  // The width of the dense SwiGLU after a mixer or attention: Granite's shared MLP, Jamba's MLP.
  int64_t ffn_width() const { return granite() ? config_.shared_expert_intermediate_size : config_.intermediate_size; }
  // The MLP after a mixer or attention (has_ffn), of normed [n, hidden] into delta.
  void run_mlp(const Layer& L, int64_t n, const Tensor& normed, const Tensor& delta);

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  SsmLayout layout_;  // this rank's mixers (ssm_rank_layout); full_ the whole model's
  SsmLayout full_;
  Communicator* comm_ = nullptr;  // nullptr without tensor parallelism
  int rank_ = 0, tp_ = 1;
  QkvLayout qkv_;            // this rank's attention heads
  bool split_norm_ = false;  // a Mamba2 gated norm across the ranks (groups_whole)
  OwnedTensor sums_;         // its rows' sums of squares [n, 2]
  Names names_;
  int n_attn_ = 0;
  bool gguf_ = false;  // llama.cpp's file (models/gguf_*.h): ssm_a holds A, Qwen3.5's norms 1 + w, experts kept as stored
  RopeConfig rope_;  // Qwen3-Next's attention's (gated()), LFM2's (short_conv()), Falcon-H1's (parallel())
  // Qwen3.5's vision tower and its M-RoPE (ModelConfig::vision, mrope_section; a step's images
  // go over their tokens' rows after the embedding).
  ImageInputs images_;
  DecoderEnds ends_;
  std::vector<Layer> layers_;
  int n_slots_ = 0;
  std::vector<int32_t> slot_next_;  // the position each slot's state continues at (-1: none)
  std::vector<int32_t> slot_page_;  // the first KV page of the sequence whose state the slot holds
  int64_t n_params_ = 0, weight_bytes_ = 0, host_params_ = 0, host_bytes_ = 0;
  double dense_linear_ = 0.0, expert_params_ = 0.0;  // per step_cost: all layers' dense linear weights, one expert's
  MoeShard moe_shard_;
  MoeScratch moe_scratch_;
  StepInputs ints_;
  OwnedTensor slots_, fresh_, save_rows_, save_slots_;
  OwnedTensor parallel_out_;  // Falcon-H1: the attention's output beside the mixer's
  KimiScratch kimi_;          // Kimi Linear's blocks' activations
  LightningScratch lightning_;  // MiniMax's lightning blocks' activations
  OwnedTensor residual_, normed_, delta_, proj_, xbc_, y_, selected_, qkv_scratch_, attn_, gate_, mlp_, act_, up_;
  OwnedTensor dtr_, bm_, cm_, dt_, ones_;  // Mamba1: x_proj's parts, dt, FalconMamba's unit norm weights
  std::vector<int32_t> slots_host_, fresh_host_;  // the step's slot of each sequence, and which start afresh
  std::vector<char> slot_used_;                    // plan_states' scratch: the slots the step names
  // The step's snapshots (plan_snapshots): per sequence the rows before its save (0: none) and
  // the slot it saves into, and the restores (snapshot slot, sequence's slot) made before it.
  std::vector<int32_t> save_rows_host_, save_slots_host_;
  std::vector<std::pair<int32_t, int32_t>> restores_;
};

template <typename F>
Expected<OwnedTensor> StateSpaceModel::host_vector(const Checkpoint& ck, const std::string& name,
                                               const std::vector<int64_t>& shape, F f, const std::vector<Slice>& rows) {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck.tensor(name, shape));
  if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
    return corrupt(t.file + ": tensor '" + name + "' is stored " + t.type_name() + "; it must be F32, BF16 or F16");
  const int64_t width = t.numel() / std::max<int64_t>(shape.front(), 1);
  std::vector<float> host;
  host.reserve(static_cast<size_t>(t.numel()));
  const auto take = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * width; i < end * width; ++i) host.push_back(f(static_cast<float>(t.at(i)), i));
  };
  if (rows.empty()) take(0, shape.front());
  for (const Slice& r : rows) {
    BRIGADE_CHECK(r.begin >= 0 && r.size >= 0 && r.begin + r.size <= shape.front(), "host_vector: rows out of range");
    take(r.begin, r.begin + r.size);
  }
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor out, alloc_tensor(backend_, DType::f32, 1, static_cast<int64_t>(host.size())));
  backend_.upload(out.tensor, host.data());
  host_params_ += t.numel();
  host_bytes_ += static_cast<int64_t>(host.size() * sizeof(float));
  return out;
}

Status StateSpaceModel::load_mixer(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, di = full_.d_inner(), heads = full_.n_heads, k = layout_.conv_kernel;
  const int64_t gn = int64_t{full_.n_groups} * full_.state_size, pw = full_.proj_width();
  const std::string m = p + names_.mixer;
  // This rank's rows of in_proj's z, x, B, C and dt (all of them at tp 1) and of the conv's x, B
  // and C channels; its heads of A, D and dt_bias, its columns of out_proj.
  const std::vector<Slice> proj_rows = {part(0, di), part(di, di), bc_rows(2 * di), bc_rows(2 * di + gn),
                                        part(2 * di + 2 * gn, heads)};
  const std::vector<Slice> conv_rows = {part(0, di), bc_rows(di), bc_rows(di + gn)};
  const Slice head_rows = part(0, heads), inner_cols = part(0, di);
  const std::vector<std::string> in_proj(proj_rows.size(), m + "in_proj.weight");
  const std::vector<int64_t> in_rows(proj_rows.size(), pw);
  if (parallel()) {  // Falcon-H1: in_proj's z, x, B, C and dt rows (and its input) and out_proj scaled
    const ModelConfig::MupMultipliers& mu = config_.mup;
    const int64_t segment[5] = {di, di, gn, gn, heads};
    std::vector<float> scales;
    for (size_t i = 0; i < 5; ++i) scales.push_back(mu.ssm_rows[i] * mu.ssm_in);
    BRIGADE_ASSIGN_OR_RETURN(L.in_proj, w.scaled(in_proj, in_rows, h, proj_rows, scales));
    BRIGADE_ASSIGN_OR_RETURN(L.out_proj, w.scaled({m + "out_proj.weight"}, {h}, di, {}, {mu.ssm_out}, inner_cols));
    if (config_.ssm.proj_bias) {  // the bias scaled as its rows' outputs are (not by the input's multiplier)
      const auto row_scale = [&](int64_t r) {
        int s = 0;
        for (int64_t end = segment[0]; r >= end && s < 4; end += segment[++s]) {}
        return mu.ssm_rows[static_cast<size_t>(s)];
      };
      BRIGADE_ASSIGN_OR_RETURN(L.in_bias, host_vector(ck, m + "in_proj.bias", {pw}, [&](float v, int64_t i) { return v * row_scale(i); },
                                                      proj_rows));
      if (rank_ == 0) {  // added once, after the all-reduce's sum
        BRIGADE_ASSIGN_OR_RETURN(L.out_bias, host_vector(ck, m + "out_proj.bias", {h}, [&](float v, int64_t) { return v * mu.ssm_out; }));
      } else {
        BRIGADE_RETURN_IF_ERROR(w.skip(m + "out_proj.bias", {h}));
      }
    }
  } else {
    BRIGADE_ASSIGN_OR_RETURN(L.in_proj, w.fused(in_proj, in_rows, h, proj_rows));
    BRIGADE_ASSIGN_OR_RETURN(L.out_proj, w.matrix(m + "out_proj.weight", h, di, {}, inner_cols));
  }
  if (config_.ssm.proj_bias && !parallel()) {
    BRIGADE_ASSIGN_OR_RETURN(L.in_bias, w.vector_f32(std::vector<std::string>(proj_rows.size(), m + "in_proj.bias"), in_rows, proj_rows));
    if (rank_ == 0) {  // added once, after the all-reduce's sum
      BRIGADE_ASSIGN_OR_RETURN(L.out_bias, w.vector_f32({m + "out_proj.bias"}, {h}));
    } else {
      BRIGADE_RETURN_IF_ERROR(w.skip(m + "out_proj.bias", {h}));
    }
  }
  const int64_t ch = full_.conv_dim();
  BRIGADE_ASSIGN_OR_RETURN(L.conv_w, host_vector(ck, m + "conv1d.weight", {ch, 1, k}, [](float v, int64_t) { return v; }, conv_rows));
  if (config_.ssm.conv_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.conv_b, w.vector_f32(std::vector<std::string>(3, m + "conv1d.bias"), {ch, ch, ch}, conv_rows));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.a, load_a(ck, m + "A_log", {heads}, {head_rows}));
  BRIGADE_ASSIGN_OR_RETURN(L.d, w.vector_f32({m + "D"}, {heads}, {head_rows}));
  BRIGADE_ASSIGN_OR_RETURN(L.dt_bias, w.vector_f32({m + "dt_bias"}, {heads}, {head_rows}));
  if (config_.ssm.gated_norm) {
    BRIGADE_ASSIGN_OR_RETURN(L.gated_norm, w.vector_f32({m + "norm.weight"}, {di}, {inner_cols}));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.conv_state, alloc_tensor(backend_, DType::f32, n_slots_, (k - 1) * layout_.conv_dim()));
  BRIGADE_ASSIGN_OR_RETURN(L.ssm_state, alloc_tensor(backend_, DType::f32, n_slots_, layout_.d_inner() * layout_.state_size));
  dense_linear_ += static_cast<double>(pw * h + h * di);
  return Status::ok();
}

// MambaMixer's tensors: in_proj [2 D, hidden] (x rows, then z), conv1d [D, 1, K], x_proj
// [R + 2 N, D] (loaded as its dt, B and C rows), dt_proj [D, R] + bias, A_log [D, N], D [D],
// out_proj [hidden, D].
Status StateSpaceModel::load_mixer1(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, di = full_.d_inner(), ns = layout_.state_size, k = layout_.conv_kernel;
  const int64_t r = config_.ssm.dt_rank;
  const std::string m = p + names_.mixer;
  // This rank's channels: its rows of in_proj's x and z, of the conv, dt_proj, A and D, its
  // columns of x_proj (whose dt, B and C outputs the ranks then sum) and of out_proj.
  const Slice ch = part(0, di);
  const std::vector<Slice> xz_rows = {ch, part(di, di)};
  BRIGADE_ASSIGN_OR_RETURN(L.in_proj, w.fused({m + "in_proj.weight", m + "in_proj.weight"}, {2 * di, 2 * di}, h, xz_rows));
  BRIGADE_ASSIGN_OR_RETURN(L.out_proj, w.matrix(m + "out_proj.weight", h, di, {}, ch));
  if (config_.ssm.proj_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.in_bias, w.vector_f32({m + "in_proj.bias", m + "in_proj.bias"}, {2 * di, 2 * di}, xz_rows));
    if (rank_ == 0) {  // added once, after the all-reduce's sum
      BRIGADE_ASSIGN_OR_RETURN(L.out_bias, w.vector_f32({m + "out_proj.bias"}, {h}));
    } else {
      BRIGADE_RETURN_IF_ERROR(w.skip(m + "out_proj.bias", {h}));
    }
  }
  BRIGADE_ASSIGN_OR_RETURN(L.conv_w, host_vector(ck, m + "conv1d.weight", {di, 1, k}, [](float v, int64_t) { return v; }, {ch}));
  if (config_.ssm.conv_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.conv_b, w.vector_f32({m + "conv1d.bias"}, {di}, {ch}));
  }
  const std::string x_proj = m + "x_proj.weight";
  BRIGADE_ASSIGN_OR_RETURN(L.x_dt, w.matrix(x_proj, r + 2 * ns, di, {0, r}, ch));
  BRIGADE_ASSIGN_OR_RETURN(L.x_b, w.matrix(x_proj, r + 2 * ns, di, {r, ns}, ch));
  BRIGADE_ASSIGN_OR_RETURN(L.x_c, w.matrix(x_proj, r + 2 * ns, di, {r + ns, ns}, ch));
  BRIGADE_ASSIGN_OR_RETURN(L.dt_proj, w.matrix(m + "dt_proj.weight", di, r, ch));
  BRIGADE_ASSIGN_OR_RETURN(L.dt_bias1, w.vector_f32({m + "dt_proj.bias"}, {di}, {ch}));
  BRIGADE_ASSIGN_OR_RETURN(L.a, load_a(ck, m + "A_log", {di, ns}, {ch}));
  BRIGADE_ASSIGN_OR_RETURN(L.d, w.vector_f32({m + "D"}, {di}, {ch}));
  if (config_.arch == "jamba") {  // its dt, B and C norms have weights
    BRIGADE_ASSIGN_OR_RETURN(L.dt_norm, w.vector_f32({m + "dt_layernorm.weight"}, {r}));
    BRIGADE_ASSIGN_OR_RETURN(L.b_norm, w.vector_f32({m + "b_layernorm.weight"}, {ns}));
    BRIGADE_ASSIGN_OR_RETURN(L.c_norm, w.vector_f32({m + "c_layernorm.weight"}, {ns}));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.conv_state, alloc_tensor(backend_, DType::f32, n_slots_, (k - 1) * layout_.d_inner()));
  BRIGADE_ASSIGN_OR_RETURN(L.ssm_state, alloc_tensor(backend_, DType::f32, n_slots_, layout_.d_inner() * ns));
  dense_linear_ += static_cast<double>(2 * di * h + h * di + (r + 2 * ns) * di + di * r);
  return Status::ok();
}

// Gated DeltaNet's tensors under linear_attn.: the input projection loaded as one matrix of rows
// q (G N) | k (G N) | v (H P) | z (H P) | b (H) | a (H) — Qwen3.5's in_proj_qkv, in_proj_z,
// in_proj_b and in_proj_a stacked, or Qwen3-Next's in_proj_qkvz and in_proj_ba, which interleave
// them per key head (each key head's q, k, then its H / G value heads' v and z; its heads' b,
// then a), taken apart; conv1d [conv_dim, 1, K] without bias, A_log and dt_bias [H], the gated
// norm's weight [P], out_proj [hidden, H P].
Status StateSpaceModel::load_delta(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, heads = full_.n_heads, pv = full_.head_dim, g = full_.n_groups;
  const int64_t nk = full_.state_size, k = layout_.conv_kernel, ch = full_.conv_dim(), vd = full_.d_inner();
  const std::string m = p + names_.mixer;
  const int64_t per = heads / g, ba = 2 * heads, gk = g * nk;
  // This rank's key heads (and their value heads): [first, first + g / tp).
  const int64_t first = rank_ * (g / tp_), mine = g / tp_;
  std::vector<std::string> names;
  std::vector<int64_t> rows;
  std::vector<Slice> slices;
  // Rows [offset, offset + size) of this rank's period-row blocks of `name` [total rows], in turn.
  const auto blocks = [&](const std::string& name, int64_t total, int64_t period, int64_t offset, int64_t size) {
    for (int64_t i = first; i < first + mine; ++i) {
      names.push_back(name);
      rows.push_back(total);
      slices.push_back({i * period + offset, size});
    }
  };
  // q, k and v rows (or conv channels) of this rank in a q | k | v tensor.
  const std::vector<Slice> qkv_rows = {part(0, gk), part(gk, gk), part(2 * gk, vd)};
  if (w.has(m + "in_proj_qkvz.weight")) {
    const int64_t group = 2 * nk + 2 * per * pv, qkvz = g * group;
    blocks(m + "in_proj_qkvz.weight", qkvz, group, 0, nk);                  // q
    blocks(m + "in_proj_qkvz.weight", qkvz, group, nk, nk);                 // k
    blocks(m + "in_proj_qkvz.weight", qkvz, group, 2 * nk, per * pv);       // v
    blocks(m + "in_proj_qkvz.weight", qkvz, group, 2 * nk + per * pv, per * pv);  // z
    blocks(m + "in_proj_ba.weight", ba, 2 * per, 0, per);                   // b
    blocks(m + "in_proj_ba.weight", ba, 2 * per, per, per);                 // a
    BRIGADE_ASSIGN_OR_RETURN(L.delta_in, w.fused_linear(names, rows, h, slices));
  } else if (w.has(m + "in_proj_ba.weight")) {  // Qwen3-Next's GGUF: q|k|v and z apart, b and a as in_proj_ba
    names = {m + "in_proj_qkv.weight", m + "in_proj_qkv.weight", m + "in_proj_qkv.weight", m + "in_proj_z.weight"};
    rows = {ch, ch, ch, vd};
    slices = {qkv_rows[0], qkv_rows[1], qkv_rows[2], part(0, vd)};
    blocks(m + "in_proj_ba.weight", ba, 2 * per, 0, per);  // b
    blocks(m + "in_proj_ba.weight", ba, 2 * per, per, per);  // a
    BRIGADE_ASSIGN_OR_RETURN(L.delta_in, w.fused_linear(names, rows, h, slices));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(L.delta_in,
                             w.fused_linear({m + "in_proj_qkv.weight", m + "in_proj_qkv.weight", m + "in_proj_qkv.weight",
                                             m + "in_proj_z.weight", m + "in_proj_b.weight", m + "in_proj_a.weight"},
                                            {ch, ch, ch, vd, heads, heads}, h,
                                            {qkv_rows[0], qkv_rows[1], qkv_rows[2], part(0, vd), part(0, heads),
                                             part(0, heads)}));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.out_proj, w.matrix(m + "out_proj.weight", h, vd, {}, part(0, vd)));
  BRIGADE_ASSIGN_OR_RETURN(L.conv_w, host_vector(ck, m + "conv1d.weight", {ch, 1, k}, [](float v, int64_t) { return v; }, qkv_rows));
  BRIGADE_ASSIGN_OR_RETURN(L.a, load_a(ck, m + "A_log", {heads}, {part(0, heads)}));
  BRIGADE_ASSIGN_OR_RETURN(L.dt_bias, w.vector_f32({m + "dt_bias"}, {heads}, {part(0, heads)}));
  BRIGADE_ASSIGN_OR_RETURN(L.gated_norm, w.vector_f32({m + "norm.weight"}, {pv}));
  BRIGADE_ASSIGN_OR_RETURN(L.conv_state, alloc_tensor(backend_, DType::f32, n_slots_, (k - 1) * layout_.conv_dim()));
  BRIGADE_ASSIGN_OR_RETURN(L.ssm_state, alloc_tensor(backend_, DType::f32, n_slots_, layout_.d_inner() * nk));
  dense_linear_ += static_cast<double>((ch + vd + 2 * heads) * h + h * vd);
  return Status::ok();
}

// LFM2's short-conv block under conv.: in_proj [3 hidden, hidden] (B, C, x rows), conv [hidden,
// 1, K], out_proj [hidden, hidden], each with a bias where conv_bias.
Status StateSpaceModel::load_short_conv(const Checkpoint& ck, WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, k = layout_.conv_kernel;
  const std::string m = p + names_.mixer;
  // This rank's channels: of in_proj's B, C and x rows, of the conv, of out_proj's columns.
  const std::vector<Slice> proj_rows = {part(0, h), part(h, h), part(2 * h, h)};
  const std::vector<std::string> in_proj(3, m + "in_proj.weight");
  BRIGADE_ASSIGN_OR_RETURN(L.in_proj, w.fused(in_proj, {3 * h, 3 * h, 3 * h}, h, proj_rows));
  BRIGADE_ASSIGN_OR_RETURN(L.out_proj, w.matrix(m + "out_proj.weight", h, h, {}, part(0, h)));
  BRIGADE_ASSIGN_OR_RETURN(L.conv_w, host_vector(ck, m + "conv.weight", {h, 1, k}, [](float v, int64_t) { return v; }, {part(0, h)}));
  if (config_.ssm.conv_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.in_bias, w.vector_f32(std::vector<std::string>(3, m + "in_proj.bias"), {3 * h, 3 * h, 3 * h}, proj_rows));
    BRIGADE_ASSIGN_OR_RETURN(L.conv_b, w.vector_f32({m + "conv.bias"}, {h}, {part(0, h)}));
    if (rank_ == 0) {  // added once, after the all-reduce's sum
      BRIGADE_ASSIGN_OR_RETURN(L.out_bias, w.vector_f32({m + "out_proj.bias"}, {h}));
    } else {
      BRIGADE_RETURN_IF_ERROR(w.skip(m + "out_proj.bias", {h}));
    }
  }
  BRIGADE_ASSIGN_OR_RETURN(L.conv_state, alloc_tensor(backend_, DType::f32, n_slots_, (k - 1) * layout_.d_inner()));
  dense_linear_ += static_cast<double>(4 * h * h);
  return Status::ok();
}

// q/k/v/o_proj; Qwen3-Next's q_proj [heads * 2 head_dim, hidden] holds per head its query rows,
// then its output gate's (loaded apart as q_gate), and q_norm / k_norm [head_dim] scale by 1 + w.
// LFM2's: q_layernorm / k_layernorm [head_dim], and out_proj for o_proj. Falcon-H1's scaled by its
// multipliers.
Status StateSpaceModel::load_attention(WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, hd = config_.head_dim, q = int64_t{config_.n_heads} * hd;
  const int64_t kv = int64_t{config_.n_kv_heads} * hd;
  const std::string a = p + names_.attention;
  // This rank's heads: its rows of q, k and v, its columns of o.
  const std::vector<Slice> qkv_rows = {part(0, q), part(0, kv), part(0, kv)};
  if (parallel()) {  // Falcon-H1: the input's multiplier on q, k, v, the keys' on k, the output's on o
    const ModelConfig::MupMultipliers& mu = config_.mup;
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.scaled({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, {q, kv, kv},
                                             h, qkv_rows, {mu.attn_in, mu.attn_in * mu.key, mu.attn_in}));
    BRIGADE_ASSIGN_OR_RETURN(L.o, w.scaled({a + "o_proj.weight"}, {h}, q, {}, {mu.attn_out}, part(0, q)));
    dense_linear_ += static_cast<double>((q + 2 * kv) * h + h * q);
    return Status::ok();
  }
  if (gated()) {
    std::vector<std::string> names;
    std::vector<int64_t> rows;
    std::vector<Slice> slices;
    const Slice heads = part(0, config_.n_heads);
    for (int64_t i = heads.begin; i < heads.begin + heads.size; ++i) {
      names.push_back(a + "q_proj.weight");
      rows.push_back(2 * q);
      slices.push_back({2 * hd * i, hd});
    }
    names.insert(names.end(), {a + "k_proj.weight", a + "v_proj.weight"});
    rows.insert(rows.end(), {kv, kv});
    slices.insert(slices.end(), {qkv_rows[1], qkv_rows[2]});
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused(names, rows, h, slices));
    BRIGADE_ASSIGN_OR_RETURN(L.q_gate, w.row_blocks(a + "q_proj.weight", 2 * q, h, 2 * hd, {hd, hd}, false, heads));
    BRIGADE_ASSIGN_OR_RETURN(L.q_norm, w.vector_f32({a + "q_norm.weight"}, {hd}, {}, norm_offset()));
    BRIGADE_ASSIGN_OR_RETURN(L.k_norm, w.vector_f32({a + "k_norm.weight"}, {hd}, {}, norm_offset()));
    dense_linear_ += static_cast<double>(q * h);
  } else {
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, {q, kv, kv}, h,
                                            qkv_rows));
  }
  if (short_conv()) {
    BRIGADE_ASSIGN_OR_RETURN(L.q_norm, w.vector_f32({a + "q_layernorm.weight"}, {hd}));
    BRIGADE_ASSIGN_OR_RETURN(L.k_norm, w.vector_f32({a + "k_layernorm.weight"}, {hd}));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.o, w.matrix(a + (short_conv() ? "out_proj.weight" : "o_proj.weight"), h, q, {}, part(0, q)));
  dense_linear_ += static_cast<double>((q + 2 * kv) * h + h * q);
  return Status::ok();
}

// The MLP after a mixer or attention. GraniteMoeHybrid's: shared_mlp.input_linear [2 S, hidden]
// (gate rows, then up) and output_linear [hidden, S]; with experts, block_sparse_moe.router.layer
// [E, hidden], input_linear [E, 2 I, hidden] (each expert's gate rows, then its up rows) and
// output_linear [E, hidden, I]: MoeBlock's layout, the shared MLP as its shared expert. Jamba's:
// feed_forward.{gate,up,down}_proj, or in its expert layers feed_forward.router and
// feed_forward.experts.{e}.* (load_moe_block). LFM2's: feed_forward.w1 (gate), w3 (up), w2
// (down), or LFM2-MoE's experts (load_moe_block). Falcon-H1's: feed_forward.{gate,up,down}_proj,
// gate and down scaled by its mlp_multipliers.
Status StateSpaceModel::load_mlp(WeightLoader& w, const std::string& p, int l, Layer& L) {
  const int64_t h = config_.hidden_size, width = ffn_width();
  const Slice cols = part(0, width);  // this rank's columns of a dense SwiGLU
  BRIGADE_ASSIGN_OR_RETURN(L.ffn_norm, w.vector_f32({p + names_.ffn_norm}, {h}, {}, norm_offset()));
  // Under weights: q8_0 / q4_0 / q4_1 the experts are quantized where moe_experts multiplies the type.
  const std::optional<DType> want = options_.weight_dtype;
  const bool quantize = want && is_block_quantized(*want) && backend_.supports_weight_dtype(*want);
  if (!granite()) {  // Jamba's (feed_forward.), Qwen3-Next's (mlp.)
    if (config_.is_moe_layer(l)) {
      BRIGADE_ASSIGN_OR_RETURN(L.moe, load_moe_block(w, config_, l, moe_shard_, quantize ? want : std::nullopt));
      expert_params_ = static_cast<double>(3 * config_.moe_intermediate_size * h);
      dense_linear_ += static_cast<double>(config_.n_experts * h);  // the router
      return Status::ok();
    }
    // Kimi Linear's dense layers: block_sparse_moe. as transformers 5 saves them, else the Hub's
    // (and llama.cpp's, renamed) mlp.
    const bool kimi_saved = kimi() && w.has(p + "block_sparse_moe.gate_proj.weight");
    const std::string f = p + (kimi_saved ? "block_sparse_moe." : gated() || kimi() ? "mlp." : "feed_forward.");
    if (parallel()) {  // Falcon-H1: the gate's and down's multipliers
      BRIGADE_ASSIGN_OR_RETURN(L.mlp_gate_up, w.scaled({f + "gate_proj.weight", f + "up_proj.weight"}, {width, width}, h,
                                                       {cols, cols}, {config_.mup.mlp_gate, 1.0f}));
      BRIGADE_ASSIGN_OR_RETURN(L.mlp_down, w.scaled({f + "down_proj.weight"}, {h}, width, {}, {config_.mup.mlp_down}, cols));
      dense_linear_ += static_cast<double>(3 * width * h);
      return Status::ok();
    }
    const bool lfm2 = short_conv();
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_gate_up, w.fused({f + (lfm2 ? "w1.weight" : "gate_proj.weight"),
                                                     f + (lfm2 ? "w3.weight" : "up_proj.weight")},
                                                    {width, width}, h, {cols, cols}));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_down, w.matrix(f + (lfm2 ? "w2.weight" : "down_proj.weight"), h, width, {}, cols));
    dense_linear_ += static_cast<double>(3 * width * h);
    return Status::ok();
  }
  dense_linear_ += static_cast<double>(3 * width * h);
  // The shared MLP's gate|up, columns `c` of each: the Hub's input_linear, or a GGUF file's gate
  // and up apart.
  const auto shared_gate_up = [&](Slice c) -> Expected<OwnedTensor> {
    if (w.has(p + "shared_mlp.gate_proj.weight"))
      return w.fused({p + "shared_mlp.gate_proj.weight", p + "shared_mlp.up_proj.weight"}, {width, width}, h, {c, c});
    return w.fused({p + "shared_mlp.input_linear.weight", p + "shared_mlp.input_linear.weight"}, {2 * width, 2 * width}, h,
                   {c, Slice{width + c.begin, c.size}});
  };
  if (config_.n_experts == 0) {
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_gate_up, shared_gate_up(cols));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_down, w.matrix(p + "shared_mlp.output_linear.weight", h, width, {}, cols));
    return Status::ok();
  }
  const int64_t e = config_.n_experts, inter = config_.moe_intermediate_size;
  const std::string m = p + "block_sparse_moe.";
  // This rank's experts (all but under expert parallelism) and columns of each (all but split by
  // columns), and its columns of the shared MLP.
  const MoeShard& sh = moe_shard_;
  const Slice items{sh.first_expert, sh.n_experts}, ic{sh.inter_begin, sh.inter}, sc{sh.shared_begin, sh.shared};
  w.quantize_linear(false);  // the router and the shared MLP stay float under weights: q8_0, as load_moe_block keeps them
  BRIGADE_ASSIGN_OR_RETURN(L.moe.router, w.matrix(m + "router.layer.weight", e, h));
  BRIGADE_ASSIGN_OR_RETURN(L.moe.shared_gate_up, shared_gate_up(sc));
  BRIGADE_ASSIGN_OR_RETURN(L.moe.shared_down, w.matrix(p + "shared_mlp.output_linear.weight", h, width, {}, sc));
  if (w.has(m + "experts.gate_proj")) {  // a GGUF file's: gate and up apart, in their stored block types
    const bool keep_blocks = true;
    BRIGADE_ASSIGN_OR_RETURN(L.moe.gate, w.stacked(m + "experts.gate_proj", e, inter, h, items, {ic}, {}, keep_blocks));
    BRIGADE_ASSIGN_OR_RETURN(L.moe.up, w.stacked(m + "experts.up_proj", e, inter, h, items, {ic}, {}, keep_blocks));
    BRIGADE_ASSIGN_OR_RETURN(L.moe.down, w.stacked(m + "output_linear.weight", e, h, inter, items, {}, ic, keep_blocks));
    w.quantize_linear(true);
    expert_params_ = static_cast<double>(3 * inter * h);
    dense_linear_ += static_cast<double>(e * h);  // the router
    return Status::ok();
  }
  w.quantize_linear(quantize && h % dtype_block_elems(*want) == 0);
  BRIGADE_ASSIGN_OR_RETURN(L.moe.gate_up, w.stacked(m + "input_linear.weight", e, 2 * inter, h, items,
                                                    {ic, Slice{inter + ic.begin, ic.size}}));
  w.quantize_linear(quantize && sh.inter % dtype_block_elems(*want) == 0);
  BRIGADE_ASSIGN_OR_RETURN(L.moe.down, w.stacked(m + "output_linear.weight", e, h, inter, items, {}, ic));
  w.quantize_linear(true);
  expert_params_ = static_cast<double>(3 * inter * h);
  dense_linear_ += static_cast<double>(e * h);  // the router
  return Status::ok();
}

Status StateSpaceModel::load_mlp_block(WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, inter = config_.intermediate_size;
  const Slice cols = part(0, inter);  // this rank's columns
  BRIGADE_ASSIGN_OR_RETURN(L.up, w.matrix(p + "mixer.up_proj.weight", inter, h, cols));
  BRIGADE_ASSIGN_OR_RETURN(L.down, w.matrix(p + "mixer.down_proj.weight", h, inter, {}, cols));
  if (config_.mlp_bias) {
    BRIGADE_ASSIGN_OR_RETURN(L.up_bias, w.vector_f32({p + "mixer.up_proj.bias"}, {inter}, {cols}));
    if (rank_ == 0) {  // added once, after the all-reduce's sum
      BRIGADE_ASSIGN_OR_RETURN(L.down_bias, w.vector_f32({p + "mixer.down_proj.bias"}, {h}));
    } else {
      BRIGADE_RETURN_IF_ERROR(w.skip(p + "mixer.down_proj.bias", {h}));
    }
  }
  dense_linear_ += static_cast<double>(2 * inter * h);
  return Status::ok();
}

// Nemotron 3's MoE block under mixer. (NemotronHMoE): the router gate.weight [E, hidden] with its
// selection bias gate.e_score_correction_bias [E], the experts' up_proj [I, hidden] and down_proj
// [hidden, I] (the Hub's experts.{e}.*, or transformers 5's stacked experts.up_proj [E, I, hidden]
// and experts.down_proj [E, hidden, I]), the shared expert's shared_experts.up_proj / down_proj.
// The router and the shared expert stay float under weights: q8_0 / q4_0 / q4_1, as
// load_moe_block (models/moe_block.h) keeps them. A rank takes its experts' columns (or, with
// expert parallelism, its experts) and its columns of the shared expert (moe_shard_).
Status StateSpaceModel::load_nemotron_moe(WeightLoader& w, const std::string& p, Layer& L) {
  const int64_t h = config_.hidden_size, e = config_.n_experts, inter = config_.moe_intermediate_size;
  const int64_t shared = config_.shared_width();
  const std::string m = p + "mixer.";
  const std::optional<DType> want = options_.weight_dtype;
  const bool quantize = want && is_block_quantized(*want) && backend_.supports_weight_dtype(*want);
  const MoeShard& sh = moe_shard_;
  const Slice items{sh.first_expert, sh.n_experts}, ic{sh.inter_begin, sh.inter}, sc{sh.shared_begin, sh.shared};
  w.quantize_linear(false);
  BRIGADE_ASSIGN_OR_RETURN(L.moe.router, w.matrix(m + "gate.weight", e, h));
  BRIGADE_ASSIGN_OR_RETURN(L.moe.bias, w.vector_f32({m + "gate.e_score_correction_bias"}, {e}));
  BRIGADE_ASSIGN_OR_RETURN(L.moe.shared_gate_up, w.matrix(m + "shared_experts.up_proj.weight", shared, h, sc));
  BRIGADE_ASSIGN_OR_RETURN(L.moe.shared_down, w.matrix(m + "shared_experts.down_proj.weight", h, shared, {}, sc));
  // This rank's experts' rows `rs` and columns `cs` of `proj` ([rows, cols] each): the stacked
  // tensor's, or the Hub's one per expert (the others' counted, not loaded).
  const auto experts = [&](const char* proj, int64_t rows, int64_t cols, Slice rs, Slice cs) -> Expected<OwnedTensor> {
    w.quantize_linear(quantize && cs.length(cols) % dtype_block_elems(*want) == 0);
    if (w.has(m + "experts." + proj))  // (a GGUF file's block types kept)
      return w.stacked(m + "experts." + proj, e, rows, cols, items, {rs}, cs, /*keep_blocks=*/gguf_);
    std::vector<std::string> names;
    for (int64_t i = 0; i < e; ++i) {
      const std::string name = m + "experts." + std::to_string(i) + "." + proj + ".weight";
      if (i >= items.begin && i < items.begin + items.size) names.push_back(name);
      else BRIGADE_RETURN_IF_ERROR(w.skip(name, {rows, cols}));
    }
    return w.fused(names, std::vector<int64_t>(names.size(), rows), cols, std::vector<Slice>(names.size(), rs), cs);
  };
  BRIGADE_ASSIGN_OR_RETURN(L.moe.gate_up, experts("up_proj", inter, h, ic, {}));  // relu2 experts: their up rows alone
  BRIGADE_ASSIGN_OR_RETURN(L.moe.down, experts("down_proj", h, inter, {}, ic));
  w.quantize_linear(true);
  expert_params_ = static_cast<double>(2 * inter * h);
  dense_linear_ += static_cast<double>(e * h + 2 * shared * h);  // the router and the shared expert
  return Status::ok();
}

Status StateSpaceModel::load(const Checkpoint& ck) {
  gguf_ = ck.format() == "gguf";
  WeightLoader w(ck, backend_, options_.weight_dtype);
  const int64_t h = config_.hidden_size;
  const std::string pre = names_.prefix;
  std::string embed = pre + names_.embed;
  if (!w.has(embed) && w.has("backbone.embedding.weight")) embed = "backbone.embedding.weight";  // older Mamba2 files
  BRIGADE_ASSIGN_OR_RETURN(ends_.embed, w.table(embed, config_.vocab_size, h));
  BRIGADE_ASSIGN_OR_RETURN(ends_.final_norm, w.vector_f32({pre + names_.final_norm}, {h}, {}, norm_offset()));
  // A stored lm_head is the head even where the config says tied: transformers' Nemotron-H never
  // ties (its _tied_weights_keys is empty), so its checkpoints may carry both.
  if (config_.tie_embeddings && w.has("lm_head.weight")) config_.tie_embeddings = false;
  if (!config_.tie_embeddings && rank_ == 0) {  // (only rank 0 computes logits)
    BRIGADE_ASSIGN_OR_RETURN(ends_.lm_head, w.table("lm_head.weight", config_.vocab_size, h));
  } else if (!config_.tie_embeddings) {
    BRIGADE_RETURN_IF_ERROR(w.skip("lm_head.weight", {config_.vocab_size, h}));
  }
  n_slots_ = config_.recurrent() ? std::max(options_.state_slots, 1) : 0;  // (a hybrid of attention layers only: none)
  slot_next_.assign(static_cast<size_t>(n_slots_), -1);
  slot_page_.assign(static_cast<size_t>(n_slots_), -1);
  if (config_.n_experts > 0) moe_shard_ = moe_shard(config_, rank_, tp_, options_.expert_parallel);  // this rank's part
  layers_.resize(static_cast<size_t>(config_.n_layers));
  int kv_index = 0;
  for (int l = 0; l < config_.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string p = pre + "layers." + std::to_string(l) + ".";
    const size_t i = static_cast<size_t>(l);
    L.kind = config_.ssm_layers[i] ? Kind::ssm
             : config_.relu2_experts && config_.is_moe_layer(l)     ? Kind::moe
             : !config_.mlp_layers.empty() && config_.mlp_layers[i] ? Kind::mlp
                                                                    : Kind::attention;
    BRIGADE_ASSIGN_OR_RETURN(L.norm, w.vector_f32({p + names_.mixer_norm}, {h}, {}, norm_offset()));
    if (minimax() && L.kind == Kind::ssm) {  // no conv: its state is S alone
      BRIGADE_RETURN_IF_ERROR(load_lightning_block(w, backend_, config_, l, p, part(0, full_.n_heads), L.lightning));
      BRIGADE_ASSIGN_OR_RETURN(L.ssm_state, alloc_tensor(backend_, DType::f32, n_slots_, layout_.d_inner() * layout_.state_size));
      dense_linear_ += static_cast<double>(lightning_linear_params(config_));
    } else if (kimi() && L.kind == Kind::ssm) {
      const int64_t k = layout_.conv_kernel;
      BRIGADE_RETURN_IF_ERROR(load_kda_block(ck, w, backend_, config_, p, gguf_, part(0, full_.n_heads), L.kda, host_params_));
      BRIGADE_ASSIGN_OR_RETURN(L.conv_state, alloc_tensor(backend_, DType::f32, n_slots_, (k - 1) * layout_.conv_dim()));
      BRIGADE_ASSIGN_OR_RETURN(L.ssm_state, alloc_tensor(backend_, DType::f32, n_slots_, layout_.d_inner() * layout_.state_size));
      dense_linear_ += static_cast<double>(kda_linear_params(config_));
    } else if (kimi()) {
      BRIGADE_RETURN_IF_ERROR(load_mla_weights(w, config_, p, part(0, config_.n_heads), L.mla));
      L.kv_index = kv_index++;
      dense_linear_ += static_cast<double>(mla_linear_params(config_));
    } else if (L.kind == Kind::ssm && config_.ssm.mamba1()) {
      BRIGADE_RETURN_IF_ERROR(load_mixer1(ck, w, p, L));
    } else if (L.kind == Kind::ssm && gated()) {
      BRIGADE_RETURN_IF_ERROR(load_delta(ck, w, p, L));
    } else if (L.kind == Kind::ssm && short_conv()) {
      BRIGADE_RETURN_IF_ERROR(load_short_conv(ck, w, p, L));
    } else if (L.kind == Kind::ssm) {
      BRIGADE_RETURN_IF_ERROR(load_mixer(ck, w, p, L));
      if (parallel()) {
        BRIGADE_RETURN_IF_ERROR(load_attention(w, p, L));
        L.kv_index = kv_index++;
      }
    } else if (L.kind == Kind::mlp) {
      BRIGADE_RETURN_IF_ERROR(load_mlp_block(w, p, L));
    } else if (L.kind == Kind::moe) {
      BRIGADE_RETURN_IF_ERROR(load_nemotron_moe(w, p, L));
    } else {
      BRIGADE_RETURN_IF_ERROR(load_attention(w, p, L));
      L.kv_index = kv_index++;
    }
    if (has_ffn()) BRIGADE_RETURN_IF_ERROR(load_mlp(w, p, l, L));
  }
  if (config_.vision.present() && backend_.supports_vision() && tp_ == 1) BRIGADE_RETURN_IF_ERROR(images_.load(w));
  n_params_ = w.n_params() + host_params_;
  dense_linear_ /= tp_;  // (step_cost: this rank's share)
  expert_params_ /= tp_;
  weight_bytes_ = w.n_bytes() + host_bytes_;
  const int64_t n = options_.max_batch_tokens;
  const DType act = backend_.activation_dtype();
  BRIGADE_RETURN_IF_ERROR(ints_.allocate(backend_, n));
  BRIGADE_ASSIGN_OR_RETURN(slots_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(fresh_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(save_rows_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(save_slots_, alloc_tensor(backend_, DType::i32, 1, n));
  BRIGADE_ASSIGN_OR_RETURN(residual_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(normed_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(delta_, alloc_tensor(backend_, act, n, h));
  BRIGADE_ASSIGN_OR_RETURN(selected_, alloc_tensor(backend_, act, n, h));
  if (std::count(config_.mlp_layers.begin(), config_.mlp_layers.end(), true) > 0) {
    BRIGADE_ASSIGN_OR_RETURN(up_, alloc_tensor(backend_, act, n, config_.intermediate_size / tp_));
  }
  if (split_norm_ || (minimax() && tp_ > 1)) {  // norms across the ranks' heads
    BRIGADE_ASSIGN_OR_RETURN(sums_, alloc_tensor(backend_, DType::f32, n, 2));
  }
  if (config_.ssm.mamba1()) {  // proj_ holds x|z [n, 2 D], xbc_ the conv's output [n, D]
    const int64_t di = layout_.d_inner(), ns = layout_.state_size;
    BRIGADE_ASSIGN_OR_RETURN(proj_, alloc_tensor(backend_, act, n, 2 * di));
    BRIGADE_ASSIGN_OR_RETURN(xbc_, alloc_tensor(backend_, act, n, di));
    BRIGADE_ASSIGN_OR_RETURN(y_, alloc_tensor(backend_, act, n, di));
    BRIGADE_ASSIGN_OR_RETURN(dt_, alloc_tensor(backend_, act, n, di));
    BRIGADE_ASSIGN_OR_RETURN(dtr_, alloc_tensor(backend_, act, n, config_.ssm.dt_rank));
    BRIGADE_ASSIGN_OR_RETURN(bm_, alloc_tensor(backend_, act, n, ns));
    BRIGADE_ASSIGN_OR_RETURN(cm_, alloc_tensor(backend_, act, n, ns));
    const std::vector<float> ones(static_cast<size_t>(std::max<int64_t>(config_.ssm.dt_rank, ns)), 1.0f);
    BRIGADE_ASSIGN_OR_RETURN(ones_, alloc_tensor(backend_, DType::f32, 1, static_cast<int64_t>(ones.size())));
    backend_.upload(ones_.tensor, ones.data());
  } else if (kimi()) {
    BRIGADE_RETURN_IF_ERROR(allocate_kimi_scratch(backend_, config_, layout_, config_.n_heads / tp_, n, kimi_));
  } else if (minimax()) {
    BRIGADE_RETURN_IF_ERROR(allocate_lightning_scratch(backend_, layout_, n, lightning_));
  } else if (config_.recurrent()) {  // (the short conv's output goes from proj_ to y_ directly)
    BRIGADE_ASSIGN_OR_RETURN(proj_, alloc_tensor(backend_, act, n, proj_width()));
    if (!short_conv()) {
      BRIGADE_ASSIGN_OR_RETURN(xbc_, alloc_tensor(backend_, act, n, layout_.conv_dim()));
    }
    BRIGADE_ASSIGN_OR_RETURN(y_, alloc_tensor(backend_, act, n, layout_.d_inner()));
  }
  if (parallel()) {
    BRIGADE_ASSIGN_OR_RETURN(parallel_out_, alloc_tensor(backend_, act, n, h));
  }
  if (n_attn_ > 0 && !kimi()) {
    const QkvLayout& q = qkv_;
    BRIGADE_ASSIGN_OR_RETURN(qkv_scratch_, alloc_tensor(backend_, act, n, int64_t{q.n_heads + 2 * q.n_kv_heads} * q.head_dim));
    BRIGADE_ASSIGN_OR_RETURN(attn_, alloc_tensor(backend_, act, n, int64_t{q.n_heads} * q.head_dim));
    if (gated()) {
      BRIGADE_ASSIGN_OR_RETURN(gate_, alloc_tensor(backend_, act, n, int64_t{q.n_heads} * q.head_dim));
    }
  }
  if (has_ffn() && config_.n_moe_layers() < config_.n_layers) {  // layers with a dense SwiGLU
    BRIGADE_ASSIGN_OR_RETURN(mlp_, alloc_tensor(backend_, act, n, 2 * ffn_width() / tp_));
    BRIGADE_ASSIGN_OR_RETURN(act_, alloc_tensor(backend_, act, n, ffn_width() / tp_));
  }
  if (config_.n_experts > 0) {  // the MLP's experts, or Nemotron 3's MoE blocks
    BRIGADE_ASSIGN_OR_RETURN(moe_scratch_, allocate_moe_scratch(backend_, config_, moe_shard_, n));
  }
  return Status::ok();
}

Status StateSpaceModel::plan_states(const StepBatch& batch) {
  const int n_seqs = batch.n_seqs();
  if (!batch.state_slots.empty() && static_cast<int>(batch.state_slots.size()) != n_seqs)
    return invalid_argument("a recurrent model's step needs a state slot per sequence (StepBatch::state_slots): " +
                            std::to_string(batch.state_slots.size()) + " for " + std::to_string(n_seqs) + " sequences");
  slots_host_.resize(static_cast<size_t>(n_seqs));
  for (int s = 0; s < n_seqs; ++s)
    slots_host_[static_cast<size_t>(s)] = batch.state_slots.empty() ? s : batch.state_slots[static_cast<size_t>(s)];
  fresh_host_.assign(static_cast<size_t>(n_seqs), 0);
  slot_used_.assign(static_cast<size_t>(n_slots_), 0);
  for (int s = 0; s < n_seqs; ++s) {
    const int32_t slot = slots_host_[static_cast<size_t>(s)];
    if (slot < 0 || slot >= n_slots_)
      return invalid_argument("state slot " + std::to_string(slot) + " of sequence " + std::to_string(s) +
                              " is outside [0, " + std::to_string(n_slots_) + ")");
    if (slot_used_[static_cast<size_t>(slot)])
      return invalid_argument("state slot " + std::to_string(slot) + " is given to two sequences of one step");
    slot_used_[static_cast<size_t>(slot)] = 1;
    const int32_t first = batch.positions[static_cast<size_t>(batch.q_start[static_cast<size_t>(s)])];
    const int32_t page = batch.max_blocks > 0 ? batch.block_table[static_cast<size_t>(s) * static_cast<size_t>(batch.max_blocks)] : -1;
    if (first == 0) {
      fresh_host_[static_cast<size_t>(s)] = 1;
    } else if (!batch.state_from.empty() && batch.state_from[static_cast<size_t>(s)] >= 0) {
      // restored from a snapshot (plan_snapshots checks it)
    } else if (slot_next_[static_cast<size_t>(slot)] >= 0 && slot_page_[static_cast<size_t>(slot)] != page) {
      // another sequence's state (without a prefix cache no two live sequences share a page)
      return invalid_argument("sequence " + std::to_string(s) + " continues at position " + std::to_string(first) +
                              " in state slot " + std::to_string(slot) +
                              ", which holds another sequence's state (its first page differs)");
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

// Snapshots (StepBatch::state_from / state_save): checks them all, then makes the restores, so
// a refused step changes no state. plan_states has filled slots_host_ and slot_used_.
Status StateSpaceModel::plan_snapshots(const StepBatch& batch) {
  const int n_seqs = batch.n_seqs();
  const auto sized = [&](const std::vector<int32_t>& v) { return v.empty() || static_cast<int>(v.size()) == n_seqs; };
  if (!sized(batch.state_from) || !sized(batch.state_save) || batch.state_save_rows.size() != batch.state_save.size())
    return invalid_argument("a step's state_from, state_save and state_save_rows have one entry per sequence (or none)");
  save_rows_host_.assign(static_cast<size_t>(n_seqs), 0);
  save_slots_host_.assign(static_cast<size_t>(n_seqs), -1);
  restores_.clear();
  const auto slot_name = [](int32_t slot) { return "state slot " + std::to_string(slot); };
  for (int s = 0; s < n_seqs; ++s) {
    const size_t i = static_cast<size_t>(s);
    const int32_t first = batch.positions[static_cast<size_t>(batch.q_start[i])];
    const int32_t rows = batch.q_start[i + 1] - batch.q_start[i];
    if (!batch.state_from.empty() && batch.state_from[i] >= 0) {
      const int32_t from = batch.state_from[i];
      if (from >= n_slots_ || slot_used_[static_cast<size_t>(from)])
        return invalid_argument("sequence " + std::to_string(s) + " restores its state from " + slot_name(from) +
                                ", which is outside [0, " + std::to_string(n_slots_) + ") or a sequence's of the step");
      if (slot_next_[static_cast<size_t>(from)] != first || first == 0)
        return invalid_argument("sequence " + std::to_string(s) + " starts at position " + std::to_string(first) +
                                " from the snapshot in " + slot_name(from) + ", which holds " +
                                (slot_next_[static_cast<size_t>(from)] < 0
                                     ? std::string("no state")
                                     : "the state after " + std::to_string(slot_next_[static_cast<size_t>(from)]) + " positions"));
      restores_.push_back({from, slots_host_[i]});
      fresh_host_[i] = 0;
    }
    if (!batch.state_save.empty() && batch.state_save[i] >= 0) {
      const int32_t to = batch.state_save[i], after = batch.state_save_rows[i];
      if (to >= n_slots_ || slot_used_[static_cast<size_t>(to)] ||
          std::count(save_slots_host_.begin(), save_slots_host_.end(), to) > 0)
        return invalid_argument("sequence " + std::to_string(s) + " saves its state into " + slot_name(to) +
                                ", which is outside [0, " + std::to_string(n_slots_) +
                                "), a sequence's of the step or another snapshot's");
      if (after < 1 || after > rows)
        return invalid_argument("sequence " + std::to_string(s) + " saves its state after " + std::to_string(after) +
                                " of its " + std::to_string(rows) + " rows");
      save_rows_host_[i] = after;
      save_slots_host_[i] = to;
    }
  }
  for (const auto& [from, to] : restores_) {
    for (Layer& L : layers_) {
      if (L.kind != Kind::ssm) continue;
      if (!L.conv_state.tensor.empty())  // (MiniMax's lightning attention has no conv)
        backend_.copy(L.conv_state.tensor.rows(to, 1), L.conv_state.tensor.rows(from, 1));
      if (!L.ssm_state.tensor.empty())  // (LFM2's short conv keeps its conv rows alone)
        backend_.copy(L.ssm_state.tensor.rows(to, 1), L.ssm_state.tensor.rows(from, 1));
    }
  }
  return Status::ok();
}

void StateSpaceModel::run_mlp(const Layer& L, int64_t n, const Tensor& normed, const Tensor& delta) {
  if (!L.moe.empty()) {  // the routed experts (and Granite's shared MLP), summed
    run_moe_block(backend_, config_, moe_shard_, L.moe, moe_scratch_, normed, delta);
    return;
  }
  const Tensor gate_up = mlp_.tensor.rows(0, n), act = act_.tensor.rows(0, n);
  backend_.matmul(normed, L.mlp_gate_up.tensor, Tensor(), gate_up);
  backend_.silu_mul(gate_up, act);
  backend_.matmul(act, L.mlp_down.tensor, Tensor(), delta);
}

Status StateSpaceModel::run_mixer1(const Layer& L, int64_t n, const SsmSeqs& seqs, const Tensor& normed,
                                   const Tensor& delta) {
  const int64_t ns = layout_.state_size, r = config_.ssm.dt_rank;
  const Tensor xz = proj_.tensor.rows(0, n), x = xbc_.tensor.rows(0, n), y = y_.tensor.rows(0, n);
  const Tensor dtr = dtr_.tensor.rows(0, n), bm = bm_.tensor.rows(0, n), cm = cm_.tensor.rows(0, n);
  const Tensor dt = dt_.tensor.rows(0, n);
  Backend& b = backend_;
  b.matmul(normed, L.in_proj.tensor, L.in_bias.tensor, xz);
  b.ssm_conv(xz, 0, L.conv_w.tensor, L.conv_b.tensor, seqs, L.conv_state.tensor, x);
  b.matmul(x, L.x_dt.tensor, Tensor(), dtr);
  b.matmul(x, L.x_b.tensor, Tensor(), bm);
  b.matmul(x, L.x_c.tensor, Tensor(), cm);
  // Under tensor parallelism each rank's x_proj saw its channels only: dt, B and C are the sums.
  BRIGADE_RETURN_IF_ERROR(reduce(dtr));
  BRIGADE_RETURN_IF_ERROR(reduce(bm));
  BRIGADE_RETURN_IF_ERROR(reduce(cm));
  if (const float eps = config_.ssm.bcdt_norm_eps; eps > 0.0f) {  // Jamba's RMSNorms, FalconMamba's weightless ones
    const Tensor& ones = ones_.tensor;
    auto weight = [&](const OwnedTensor& w, int64_t d) { return w.tensor.empty() ? Tensor(ones.data, DType::f32, {d}) : w.tensor; };
    b.rms_norm(dtr, weight(L.dt_norm, r), eps, dtr);
    b.rms_norm(bm, weight(L.b_norm, ns), eps, bm);
    b.rms_norm(cm, weight(L.c_norm, ns), eps, cm);
  }
  b.matmul(dtr, L.dt_proj.tensor, L.dt_bias1.tensor, dt);
  b.ssm_scan_diag(x, dt, bm, cm, xz, layout_.d_inner(), L.a.tensor, L.d.tensor, seqs, L.ssm_state.tensor, y);
  b.matmul(y, L.out_proj.tensor, L.out_bias.tensor, delta);
  return Status::ok();
}

void StateSpaceModel::run_attention(const Layer& L, int64_t n, const KvCache& kv, const AttentionMeta& meta,
                                    const Tensor& normed, const Tensor& out) {
  Backend& b = backend_;
  const QkvLayout& qkv_layout = qkv_;  // this rank's heads
  const Tensor qkv = qkv_scratch_.tensor.rows(0, n), attn = attn_.tensor.rows(0, n);
  const KvLayer cache = kv.layer(L.kv_index);
  b.matmul(normed, L.qkv.tensor, Tensor(), qkv);
  if (!L.q_norm.tensor.empty()) b.qk_head_norm(qkv, qkv_layout, L.q_norm.tensor, L.k_norm.tensor, config_.rms_eps);
  if (!config_.nope)  // RoPE (over part of each head: Qwen3-Next); Granite 4.0-H's, Nemotron-H's, Jamba's have none
    b.rope(qkv, qkv_layout, images_.positions(ints_.positions(n), n), images_.rope(rope_));
  b.write_kv(cache, qkv, qkv_layout, ints_.slots(n));
  b.attention(qkv, qkv_layout, cache, meta, config_.attn_scale, attn);
  if (gated()) {  // the output gate: attn * sigmoid(the gate rows of q_proj)
    const Tensor gate = gate_.tensor.rows(0, n);
    b.matmul(normed, L.q_gate.tensor, Tensor(), gate);
    b.sigmoid_mul(attn, gate);
  }
  b.matmul(attn, L.o.tensor, Tensor(), out);
}

Status StateSpaceModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const KvLayout want = kv_layout(1, 1, DType::f32);  // the KV row shape the step's cache must have
  const StepLimits limits{config_.vocab_size,  config_.max_position, options_.max_batch_tokens, n_attn_,
                          want.n_kv_heads, want.head_dim};
  if (n_attn_ > 0 && kv.layout().latent != want.latent)
    return invalid_argument(config_.arch + (want.latent ? " needs its latent KV layout (Model::kv_layout)"
                                                        : " needs a K/V layout, not a latent one (Model::kv_layout)"));
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, config_.hidden_size,
                                            backend_.activation_dtype()));
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<int32_t> attend_until, images_.begin_step(batch));
  for (int32_t id : batch.lora)
    if (id != 0) return unsupported(config_.arch + " runs no LoRA adapters");
  if (rank_ != 0 && (!batch.logit_rows.empty() || !batch.hidden_rows.empty()))
    return invalid_argument("tensor-parallel rank " + std::to_string(rank_) + " computes no logits or hidden rows");
  if (config_.recurrent()) {
    BRIGADE_RETURN_IF_ERROR(plan_states(batch));
    BRIGADE_RETURN_IF_ERROR(plan_snapshots(batch));
  }
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch, attend_until));
  const int n_seqs = batch.n_seqs();
  if (config_.recurrent()) {
    backend_.upload(Tensor(slots_.tensor.data, DType::i32, {n_seqs}), slots_host_.data());
    backend_.upload(Tensor(fresh_.tensor.data, DType::i32, {n_seqs}), fresh_host_.data());
  }
  const AttentionMeta meta = ints_.meta(batch, bounds, 0);
  SsmSeqs seqs{meta.q_start, Tensor(slots_.tensor.data, DType::i32, {n_seqs}),
               Tensor(fresh_.tensor.data, DType::i32, {n_seqs}), n_seqs};
  const bool saves = config_.recurrent() && std::any_of(save_rows_host_.begin(), save_rows_host_.end(), [](int32_t r) { return r > 0; });
  if (saves) {
    seqs.save_rows = Tensor(save_rows_.tensor.data, DType::i32, {n_seqs});
    seqs.save_slots = Tensor(save_slots_.tensor.data, DType::i32, {n_seqs});
    backend_.upload(seqs.save_rows, save_rows_host_.data());
    backend_.upload(seqs.save_slots, save_slots_host_.data());
  }

  const int64_t n = batch.n_tokens();
  const Tensor residual = residual_.tensor.rows(0, n), normed = normed_.tensor.rows(0, n), delta = delta_.tensor.rows(0, n);
  const float eps = config_.rms_eps, residual_scale = config_.residual_multiplier;
  const bool scale_residual = residual_scale > 0.0f && residual_scale != 1.0f;
  Backend& b = backend_;
  b.embedding(ends_.embed.tensor, ints_.tokens(batch), residual);
  if (config_.embedding_multiplier > 0.0f && config_.embedding_multiplier != 1.0f)
    b.scale(residual, config_.embedding_multiplier);
  BRIGADE_RETURN_IF_ERROR(images_.put(batch, residual));
  for (int l = 0; l < config_.n_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    // The previous sublayer's output joins the residual in the same pass as this norm.
    if (l == 0) b.rms_norm(residual, L.norm.tensor, eps, normed);
    else b.add_rms_norm(residual, delta, L.norm.tensor, eps, normed);
    if (minimax() && L.kind == Kind::ssm) {  // lightning attention: silu(qkv), the decayed sum, norm, gate
      BRIGADE_RETURN_IF_ERROR(run_lightning_block(b, config_, layout_, L.lightning, lightning_, seqs, L.ssm_state.tensor,
                                                  normed, delta, comm_, sums_.tensor));
    } else if (kimi() && L.kind == Kind::ssm) {  // KDA: the conv over q|k|v, the per-channel delta rule, the gated norm
      run_kda_block(b, config_, layout_, L.kda, kimi_, seqs, L.conv_state.tensor, L.ssm_state.tensor, normed, delta);
    } else if (kimi()) {  // MLA without RoPE
      run_nope_mla(b, config_, config_.n_heads / tp_, L.mla, kimi_, kv.layer(L.kv_index), meta, ints_.slots(n), normed,
                   delta);
    } else if (L.kind == Kind::moe) {  // Nemotron 3's: relu2 experts beside a relu2 shared expert
      run_moe_block(b, config_, moe_shard_, L.moe, moe_scratch_, normed, delta);
    } else if (L.kind == Kind::mlp) {  // Nemotron-H's: up_proj, relu2, down_proj
      const Tensor up = up_.tensor.rows(0, n);
      b.matmul(normed, L.up.tensor, L.up_bias.tensor, up);
      b.relu_squared(up);
      b.matmul(up, L.down.tensor, L.down_bias.tensor, delta);
    } else if (L.kind == Kind::ssm && config_.ssm.mamba1()) {
      BRIGADE_RETURN_IF_ERROR(run_mixer1(L, n, seqs, normed, delta));
    } else if (L.kind == Kind::ssm && short_conv()) {  // LFM2: in_proj to B|C|x, C * conv(B * x), out_proj
      const Tensor proj = proj_.tensor.rows(0, n), y = y_.tensor.rows(0, n);
      b.matmul(normed, L.in_proj.tensor, L.in_bias.tensor, proj);
      b.short_conv(proj, L.conv_w.tensor, L.conv_b.tensor, seqs, L.conv_state.tensor, y);
      b.matmul(y, L.out_proj.tensor, L.out_bias.tensor, delta);
    } else if (L.kind == Kind::ssm && gated()) {  // Gated DeltaNet: in_proj, the conv over q|k|v, the rule, out_proj
      const Tensor proj = proj_.tensor.rows(0, n), qkv = xbc_.tensor.rows(0, n), y = y_.tensor.rows(0, n);
      L.delta_in.matmul(b, normed, Tensor(), proj);
      b.ssm_conv(proj, 0, L.conv_w.tensor, Tensor(), seqs, L.conv_state.tensor, qkv);
      const SsmParams params{L.a.tensor, Tensor(), L.dt_bias.tensor, 0.0f, 0.0f, L.gated_norm.tensor, eps};
      b.gated_delta(qkv, proj, layout_.conv_dim(), layout_, params, seqs, L.ssm_state.tensor, y);
      b.matmul(y, L.out_proj.tensor, Tensor(), delta);
    } else if (L.kind == Kind::ssm) {
      const Tensor proj = proj_.tensor.rows(0, n), xbc = xbc_.tensor.rows(0, n), y = y_.tensor.rows(0, n);
      b.matmul(normed, L.in_proj.tensor, L.in_bias.tensor, proj);
      b.ssm_conv(proj, layout_.d_inner(), L.conv_w.tensor, L.conv_b.tensor, seqs, L.conv_state.tensor, xbc);
      // A gated norm whose one group spans the ranks: the scan gates only, then each row's sum of
      // squares over every rank normalises it (as qk_norm_by_sums does OLMo 2's whole-width q).
      const SsmParams params{L.a.tensor, L.d.tensor, L.dt_bias.tensor, config_.ssm.dt_min, config_.ssm.dt_max,
                             split_norm_ ? Tensor() : L.gated_norm.tensor, eps};
      b.ssm_scan(proj, xbc, layout_, params, seqs, L.ssm_state.tensor, y);
      if (split_norm_)
        BRIGADE_RETURN_IF_ERROR(rms_norm_across_ranks(b, *comm_, y, layout_.n_heads, layout_.head_dim, full_.d_inner(),
                                                      L.gated_norm.tensor, eps, sums_.tensor.rows(0, n)));
      b.matmul(y, L.out_proj.tensor, L.out_bias.tensor, delta);
      if (parallel()) {  // Falcon-H1: the attention beside it, on the same normed input
        const Tensor attn_out = parallel_out_.tensor.rows(0, n);
        run_attention(L, n, kv, meta, normed, attn_out);
        b.add(delta, attn_out);
      }
    } else {  // attention: without positions (Granite 4.0-H's, Nemotron-H's, Jamba's), or Qwen3-Next's, LFM2's
      run_attention(L, n, kv, meta, normed, delta);
    }
    BRIGADE_RETURN_IF_ERROR(reduce(delta));  // (this rank's heads' or columns' part, summed)
    if (scale_residual) b.scale(delta, residual_scale);
    if (minimax()) rescale_residual(L.kind == Kind::ssm ? 0 : 1, residual, normed, delta);
    if (!has_ffn()) continue;
    b.add_rms_norm(residual, delta, L.ffn_norm.tensor, eps, normed);
    run_mlp(L, n, normed, delta);
    BRIGADE_RETURN_IF_ERROR(reduce(delta));
    if (scale_residual) b.scale(delta, residual_scale);
    if (minimax()) rescale_residual(2, residual, normed, delta);
  }
  images_.end_step();
  for (int s = 0; s < n_seqs && config_.recurrent(); ++s) {
    const size_t slot = static_cast<size_t>(slots_host_[static_cast<size_t>(s)]);
    slot_next_[slot] = batch.ctx_len[static_cast<size_t>(s)];
    slot_page_[slot] = batch.max_blocks > 0 ? batch.block_table[static_cast<size_t>(s) * static_cast<size_t>(batch.max_blocks)] : -1;
    if (const int32_t to = save_slots_host_.empty() ? -1 : save_slots_host_[static_cast<size_t>(s)]; to >= 0) {
      slot_next_[static_cast<size_t>(to)] = batch.positions[static_cast<size_t>(batch.q_start[static_cast<size_t>(s)])] +
                                             save_rows_host_[static_cast<size_t>(s)];
      slot_page_[static_cast<size_t>(to)] = -1;  // a snapshot belongs to no sequence until restored
    }
  }
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), hr = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && hr == 0) return Status::ok();
  ends_.logits(b, config_, residual, delta, normed, selected_.tensor.rows(0, r), ints_.logit_rows(r), logits,
               ints_.hidden_rows(hr), batch.hidden);
  if (r > 0 && config_.logits_scaling > 0.0f && config_.logits_scaling != 1.0f) b.scale(logits, 1.0f / config_.logits_scaling);
  return Status::ok();
}

// The roofline rule of Model::step_cost: every dense linear weight once and, of the routed
// experts, min(E, n k) per sparse layer (2 flops each per token, k experts' worth), the embedding
// rows and the head; each sequence's state read and written once per step, the scan's flops
// (about 6 per state element per token: decay, input, output) and the conv's; the attention
// layers' K/V reads and writes and 4 * head_dim flops per head per (query, key) pair.
StepCost StateSpaceModel::step_cost(const StepBatch& batch, double kv_bytes_per_token) const {
  const double n = batch.n_tokens(), h = config_.hidden_size;
  // The tower's weights are read only in the steps that encode an image (ImageInputs::add_cost).
  const double per_param = static_cast<double>(weight_bytes_ - images_.bytes()) /
                           static_cast<double>(std::max<int64_t>(n_params_ - images_.params(), 1));
  const bool any_logits = !batch.logit_rows.empty();
  const double state = static_cast<double>(state_bytes_per_slot());
  const double n_ssm = static_cast<double>(std::count(config_.ssm_layers.begin(), config_.ssm_layers.end(), true));
  const double sparse = config_.n_moe_layers();
  const double experts_read = std::min<double>(config_.n_experts, n * config_.n_experts_per_tok);
  StepCost c;
  c.flops = 2.0 * (dense_linear_ + sparse * config_.n_experts_per_tok * expert_params_) * n +
            2.0 * static_cast<double>(batch.logit_rows.size()) * config_.vocab_size * h +
            n * n_ssm *
                (6.0 * static_cast<double>(layout_.d_inner()) * layout_.state_size +
                 2.0 * static_cast<double>(config_.ssm.mamba1() ? layout_.d_inner() : layout_.conv_dim()) *
                     layout_.conv_kernel);
  c.bytes = (dense_linear_ + sparse * experts_read * expert_params_) * per_param +
            ends_.step_bytes(config_, n, any_logits) + 2.0 * batch.n_seqs() * state;
  if (n_attn_ > 0) {
    const AttentionWork work = attention_work(batch, 0);
    c.flops += 4.0 * config_.head_dim * qkv_.n_heads * n_attn_ * work.pairs;
    c.bytes += (work.kv_read + n) * kv_bytes_per_token;
  }
  images_.add_cost(batch, c);
  return c;
}

}  // namespace

SsmLayout ssm_rank_layout(const ModelConfig& c, int tp) {
  SsmLayout l = c.ssm.layout;
  if (tp <= 1) return l;
  l.n_heads /= tp;
  if (l.n_groups % tp == 0) l.n_groups /= tp;  // (else a Mamba2 mixer's one group, whole on every rank)
  return l;
}

Status check_state_space_parallel(const ModelConfig& c, int tp, bool expert_parallel) {
  if (tp <= 1) return Status::ok();
  const bool mixers = std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true) > 0;
  const std::string at = c.arch + " at tp " + std::to_string(tp) + ": ";
  const SsmLayout& l = c.ssm.layout;
  if (mixers && c.ssm.gated_delta && l.tiled_heads && l.n_groups < l.n_heads)
    return unsupported(at + "llama.cpp's file tiles the value heads over the key heads, which do not split into "
                       "contiguous ranks; run it at tp 1 (the Hub's safetensors split)");
  // What the ranks split: the mixers' heads and groups (a Mamba2 mixer's one group stays whole),
  // the attention heads, the dense MLPs' columns and the sparse layers' experts or columns.
  const bool granite = c.arch == "granitemoehybrid";
  const bool dense = c.n_moe_layers() < c.n_layers;
  const int64_t dense_width = granite ? (c.n_experts > 0 ? 0 : c.shared_expert_intermediate_size) : c.intermediate_size;
  const bool attention = c.n_attention_layers() > 0;
  const auto divides = [&](int n) {
    const bool groups = c.ssm.short_conv    ? true  // (channels alone)
                        : c.ssm.gated_delta ? l.n_groups % n == 0
                                            : l.n_groups == 1 || l.n_groups % n == 0;
    return (!mixers || (l.n_heads % n == 0 && groups)) &&
           (!attention || (c.n_heads % n == 0 && (c.is_mla() || c.n_kv_heads % n == 0))) && (!dense || dense_width % n == 0) &&
           moe_splits(c, n, expert_parallel);
  };
  if (divides(tp)) return Status::ok();
  std::string fields;
  const auto field = [&](const std::string& f) { fields += (fields.empty() ? "" : ", ") + f; };
  if (mixers) {
    field(std::string(c.ssm.short_conv ? "the short convolutions' channels ("
                      : c.ssm.mamba1()   ? "the mixers' channels ("
                                         : "the mixers' heads (") +
          std::to_string(l.n_heads) + ")");
    if (c.ssm.gated_delta) field("linear_num_key_heads (" + std::to_string(l.n_groups) + ")");
    else if (!c.ssm.short_conv && l.n_groups > 1) field("n_groups (" + std::to_string(l.n_groups) + ")");
  }
  if (attention)
    field("n_heads (" + std::to_string(c.n_heads) + ")" +
          (c.is_mla() ? "" : ", n_kv_heads (" + std::to_string(c.n_kv_heads) + ")"));
  if (dense && dense_width > 0)
    field(std::string(granite ? "shared_intermediate_size (" : "intermediate_size (") + std::to_string(dense_width) + ")");
  if (c.n_moe_layers() > 0) field(moe_split_fields(c, expert_parallel));
  return tp_refusal(tp, fields, divides, 64);
}

int64_t recurrent_state_bytes(const ModelConfig& c, int tp) {
  const SsmLayout l = ssm_rank_layout(c, tp);
  const int64_t layers = std::count(c.ssm_layers.begin(), c.ssm_layers.end(), true);
  const int64_t conv_channels = c.ssm.mamba1() ? l.d_inner() : l.conv_dim();  // Mamba1 convolves x alone
  return layers * (int64_t{l.conv_kernel - 1} * conv_channels + l.d_inner() * l.state_size) *
         static_cast<int64_t>(sizeof(float));
}

Expected<std::unique_ptr<Model>> load_state_space(const Checkpoint& checkpoint, Backend& backend, const LoadOptions& options) {
  const ModelConfig& c = checkpoint.config();
  if (options.max_batch_tokens < 1)
    return invalid_argument("max_batch_tokens must be >= 1 (got " + std::to_string(options.max_batch_tokens) + ")");
  if (!backend.supports_ssm())
    return unsupported(c.arch + " runs on a backend with the state-space ops (the CPU and CUDA backends); backend '" + backend.name() +
                       "' has none");
  BRIGADE_RETURN_IF_ERROR(check_state_space_parallel(c, group_size(options), options.expert_parallel));
  if (options.lora_enabled()) return unsupported("LoRA adapters are not supported for " + c.arch);
  if (options.mtp) return unsupported(c.arch + " has no MTP module");
  if (c.n_experts > 0 && !backend.supports_moe())
    return unsupported(c.arch + "'s experts need a backend with the MoE ops; backend '" + backend.name() + "' has none");
  if (c.relu2_experts && !backend.supports_relu2_experts())
    return unsupported(c.arch + "'s relu2 experts run on the CPU backend; backend '" + backend.name() + "' has none");
  if (const auto t = options.weight_dtype; t && *t == DType::f8e4m3)
    return unsupported("weights: fp8 is not supported for " + c.arch);
  auto model = std::make_unique<StateSpaceModel>(c, backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
