#include "models/llama.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "models/load_progress.h"
#include "models/decoder_ends.h"
#include "models/eagle3_head.h"
#include "models/image_inputs.h"
#include "models/lora.h"
#include "models/mtp_module.h"
#include "models/moe_block.h"
#include "models/tensor_parallel.h"
#include "models/rope_scaling.h"
#include "models/step_check.h"
#include "models/step_inputs.h"
#include "models/weight_loader.h"
#include "models/widened_attention.h"

namespace brigade {
namespace {

// Shapes below are one tensor-parallel rank's: H, KV and I are the rank's query heads, kv heads
// and intermediate columns (the model's divided by the group size; all of them without TP).

// Attention block weights. Optional pieces are empty tensors when the architecture lacks them.
struct AttentionBlock {
  LinearWeight qkv;      // [(H + 2 KV) * hd, hidden]: q rows, then k, then v
  OwnedTensor qkv_bias;  // [(H + 2 KV) * hd] f32, or empty
  OwnedTensor q_norm;    // [hd] f32 per-head norm (Qwen3), [H * hd] over all of q (OLMo 2), or empty
  OwnedTensor k_norm;    // [hd] f32 ([KV * hd] with OLMo 2's), or empty
  OwnedTensor o;         // [hidden, H * hd]
  OwnedTensor o_bias;    // [hidden] f32, or empty (and empty on ranks other than 0: added once)
  OwnedTensor sinks;     // [H] f32 attention sink logits (gpt-oss), or empty
  OwnedTensor gate;      // [H * hd, hidden] the output gate's projection (ModelConfig::attn_gate), or empty
  OwnedTensor sub_norm;  // [H * hd] f32: BitNet's attn_sub_norm before o (ModelConfig::sub_norms), or empty
};

struct MlpBlock {
  LinearWeight gate_up;   // [2 I, hidden]: gate rows, then up rows; Apertus's up rows alone [I, hidden]
  XieluParams xielu;      // Apertus's activation (ModelConfig::mlp_activation xielu)
  OwnedTensor gate_up_bias;  // [2 I] f32 (ModelConfig::mlp_bias), or empty
  OwnedTensor down;       // [hidden, I]
  OwnedTensor down_bias;  // [hidden] f32 (mlp_bias; rank 0's only: added once), or empty
  OwnedTensor sub_norm;   // [I] f32: BitNet's ffn_sub_norm before down (ModelConfig::sub_norms), or empty
};

// Which part of the model a rank holds: heads [rank * H, (rank + 1) * H) of the q heads, the same
// for kv heads, intermediate columns [rank * I, (rank + 1) * I).
struct Shard {
  int rank = 0;
  int size = 1;
  QkvLayout qkv;     // this rank's heads
  int64_t inter = 0; // this rank's intermediate columns
  MoeShard moe;      // this rank's part of the sparse layers (its experts, or its columns of each)
  Slice q_rows() const { return {int64_t{rank} * qkv.q_width(), qkv.q_width()}; }
  Slice kv_rows() const { return {int64_t{rank} * qkv.kv_width(), qkv.kv_width()}; }
  Slice inter_rows() const { return {rank * inter, inter}; }
};

struct DecoderLayer {
  OwnedTensor attn_norm;       // [hidden] f32, or empty (ModelConfig::post_norms: the attention reads the residual)
  AttentionBlock attn;
  OwnedTensor post_attn_norm;  // [hidden] f32 on the attention output (ModelConfig::sandwich_norms, post_norms), or empty
  OwnedTensor mlp_norm;        // [hidden] f32, or empty (post_norms)
  OwnedTensor attn_norm_bias;  // [hidden] f32 each (ModelConfig::norm_bias: Phi-3.5-MoE's), or empty
  OwnedTensor mlp_norm_bias;
  OwnedTensor post_mlp_norm;   // [hidden] f32 on the MLP output (sandwich_norms, post_norms), or empty
  MlpBlock mlp;           // empty in a sparse layer
  MoeBlock moe;           // qwen3_moe's sparse layers (ModelConfig::is_moe_layer); empty otherwise
  bool nope = false;      // no RoPE in its attention (SmolLM3's NoPE layers, ModelConfig::nope_layers)
  bool unit_qk_norm = false;  // per-head q/k norms without weights (ModelConfig::qk_norm_weightless; LlamaModel::unit_norm_)
};

// Activations for up to max_batch_tokens rows, in the backend's activation dtype.
struct Scratch {
  OwnedTensor residual;  // [T, hidden] the residual stream
  OwnedTensor normed;    // [T, hidden] input of the next projection
  OwnedTensor delta;     // [T, hidden] block output to add to the residual
  OwnedTensor qkv;       // [T, (H + 2 KV) * hd]
  OwnedTensor attn;      // [T, H * hd]
  OwnedTensor attn_gate; // [T, H * hd] with ModelConfig::attn_gate, or empty
  OwnedTensor gate_up;   // [T, 2 I] (not allocated when every layer is sparse)
  OwnedTensor act;       // [T, I]
  OwnedTensor selected;  // [T, hidden] rows whose logits are wanted
  OwnedTensor qk_sums;   // [T, 2] f32: whole-width q/k norms' sums of squares under TP (qk_norm_whole), or empty
  MoeScratch moe;        // allocated when the model has sparse layers
};


// v as the activation dtype t holds it (transformers rounds Gemma's embedding normalizer so).
float round_to(float v, DType t) {
  if (t == DType::bf16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::f16) return f16_to_f32(f32_to_f16(v));
  return v;
}

std::string layer_name(int l, const char* suffix) { return "model.layers." + std::to_string(l) + "." + suffix; }
// A dense MLP's tensor (Llama 4 names the block feed_forward).
std::string mlp_name(const ModelConfig& c, int l, const char* suffix) {
  return layer_name(l, (std::string(c.arch == "llama4_text" ? "feed_forward." : "mlp.") + suffix).c_str());
}

class LlamaModel final : public Model {
 public:
  LlamaModel(const ModelConfig& config, Backend& backend, const LoadOptions& options)
      : config_(config), backend_(backend), options_(options), comm_(options.communicator),
        images_(backend, config_, options.max_batch_tokens) {
    if (comm_ != nullptr) {
      shard_.rank = comm_->rank();
      shard_.size = comm_->size();
    }
    shard_.qkv = {config.n_heads / shard_.size, config.n_kv_heads / shard_.size, config.head_dim};
    shard_.inter = config.intermediate_size / shard_.size;
    shard_.moe = moe_shard(config, shard_.rank, shard_.size, options.expert_parallel);
  }

  Status load(const Checkpoint& ck);

  const ModelConfig& config() const override { return config_; }
  KvLayout kv_layout(int n_pages, int page_size, DType dtype) const override {
    return KvLayout{n_kv_layers(), n_pages, page_size, shard_.qkv.n_kv_heads, config_.head_dim, dtype};
  }
  Status forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  int n_mtp_layers() const override { return with_mtp_ || eagle3_ ? 1 : 0; }
  DraftHead draft_head() const override { return eagle3_ ? eagle3_->shape() : Model::draft_head(); }
  Status forward_mtp(const StepBatch& batch, const KvCache& kv, const Tensor& logits) override;
  bool has_vision() const override { return images_.loaded(); }
  VisionStats vision_stats() const override { return images_.stats(); }
  int64_t n_params() const override { return n_params_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  StepCost step_cost(const StepBatch& batch, double kv_bytes_per_token) const override;
  Status load_lora(int slot, const LoraModule& module) override {
    if (!lora_) return Model::load_lora(slot, module);
    return lora_->add(slot, module);
  }
  Status unload_lora(int slot) override {
    if (!lora_) return Model::unload_lora(slot);
    return lora_->remove(slot);
  }

 private:
  Status load_layer(WeightLoader& w, int l, DecoderLayer& layer);
  Status load_mtp(WeightLoader& w);
  int n_kv_layers() const { return config_.n_layers + n_mtp_layers(); }
  // Checks shared by forward and forward_mtp, the step's LoRA ids, uploads its ints.
  Expected<StepBounds> begin_step(const StepBatch& batch, const KvCache& kv, const Tensor& logits);
  // This rank's q|k|v [(H + 2 KV) * hd, hidden] and gate|up [2 I, hidden] of layer l, from separate
  // tensors or, with ModelConfig::fused_weights, from the fused ones.
  Expected<LinearWeight> load_qkv(WeightLoader& w, int l);
  Expected<LinearWeight> load_gate_up(WeightLoader& w, int l);
  Expected<XieluParams> load_xielu(WeightLoader& w, int l);
  Status allocate_scratch();
  Status run_attention(const DecoderLayer& layer, const KvLayer& cache, const AttentionMeta& meta,
                       const RopeConfig& rope, int n);
  Status run_mlp(const DecoderLayer& layer, int n);
  // q/k norms of qkv's rows: per head, or over the whole projections (OLMo 2, MiniMax-M2), whose
  // sums of squares span every rank's heads under tensor parallelism (all-reduced first).
  Status norm_qk(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm) {
    if (config_.layer_norms) {  // Command R+'s per-head LayerNorms
      backend_.qk_head_layer_norm(qkv, shard_.qkv, q_norm, k_norm, config_.rms_eps);
      return Status::ok();
    }
    if (!config_.qk_norm_whole || shard_.size == 1) {
      backend_.qk_head_norm(qkv, shard_.qkv, q_norm, k_norm, config_.rms_eps);
      return Status::ok();
    }
    const Tensor sums = scratch_.qk_sums.tensor.rows(0, qkv.dim(0));
    backend_.qk_sum_squares(qkv, shard_.qkv, sums);
    BRIGADE_RETURN_IF_ERROR(comm_->all_reduce_sum(sums));
    backend_.qk_norm_by_sums(qkv, shard_.qkv, sums, config_.qkv_layout().q_width(), config_.qkv_layout().kv_width(), q_norm,
                             k_norm, config_.rms_eps);
    return Status::ok();
  }
  // A decoder layer after its input norm (scratch normed holds it): attention, the post-attention
  // norm where the model has one, the MLP's norm, the MLP and its post norm; its output is left in
  // delta for the next norm to add to the residual.
  Status run_layer(const DecoderLayer& layer, const KvLayer& cache, const AttentionMeta& meta, const RopeConfig& rope, int n);
  // Sums a block's partial output over the tensor-parallel ranks (nothing to do without TP).
  int layer_index(const DecoderLayer& layer) const { return static_cast<int>(&layer - layers_.data()); }
  Status reduce(const Tensor& delta) { return comm_ != nullptr ? comm_->all_reduce_sum(delta) : Status::ok(); }
  // residual += delta, then normed = its norm; where the next block has no norm before it
  // (ModelConfig::post_norms) the block reads the residual itself (block_input).
  void join(const Tensor& residual, const Tensor& delta, const OwnedTensor& norm, const OwnedTensor& bias,
            const Tensor& normed) {
    if (norm.tensor.empty()) return backend_.add(residual, delta);
    add_norm(backend_, config_, residual, delta, norm.tensor, normed, bias.tensor);
  }
  // A block's input: the normed rows, or the residual where the block has no norm before it;
  // with parallel blocks (Cohere) the MLP's is the attention's, the layer's one normed input.
  Tensor block_input(const OwnedTensor& norm, int n) const {
    if (config_.parallel_blocks) return scratch_.normed.tensor.rows(0, n);
    return (norm.tensor.empty() ? scratch_.residual : scratch_.normed).tensor.rows(0, n);
  }
  // Granite's logits_scaling and Cohere's logit_scale: the step's r logit rows scaled by them.
  void scale_logits(int64_t r, const Tensor& logits) {
    const float s = config_.logits_multiplier();
    if (r > 0 && s != 1.0f) backend_.scale(logits, s);
  }

  ModelConfig config_;
  Backend& backend_;
  LoadOptions options_;
  Communicator* comm_;  // nullptr without tensor parallelism
  Shard shard_;
  RopeConfig rope_;
  RopeConfig rope_local_;  // the sliding layers' (ModelConfig::rope_local_theta > 0), else unused
  DecoderEnds ends_;      // lm_head empty when tied and on ranks other than 0
  std::vector<DecoderLayer> layers_;
  // GLM-4.5's MTP layer (LoadOptions::mtp; models/mtp_module.h): its K/V is layer n_layers.
  bool with_mtp_ = false;
  MtpEnds mtp_;
  DecoderLayer mtp_layer_;
  // An EAGLE-3 draft head (LoadOptions::eagle3; models/eagle3_head.h) in the MTP module's place:
  // forward() captures its aux hidden states, forward_mtp() runs it; its K/V is layer n_layers.
  std::unique_ptr<Eagle3Head> eagle3_;
  int64_t mtp_params_ = 0, mtp_bytes_ = 0;  // the module's part of n_params_ / weight_bytes_
  Scratch scratch_;
  StepInputs ints_;
  bool ternary_ = config_.quant.ternary();  // BitNet's ternary linears (QuantConfig::ternary): their inputs quantized to int8
  float embed_scale_ = 0.0f;  // ModelConfig::embed_scale rounded to the activation dtype, as transformers does
  OwnedTensor unit_norm_;     // [head_dim] f32 ones: the weight of ModelConfig::qk_norm_weightless's norms
  OwnedTensor embed_norm_;    // [hidden] f32 ones: ModelConfig::embed_norm's weightless RMSNorm; BLOOM's LayerNorm weight
  OwnedTensor embed_norm_bias_;  // [hidden] f32: BLOOM's word_embeddings_layernorm bias (embed_norm with layer_norms)
  OwnedTensor alibi_;         // [this rank's heads] f32: ModelConfig::alibi_slopes, or empty
  std::unique_ptr<LoraSet> lora_;  // the served LoRA adapters; null when none
  // Gemma 3's or the Qwen2-VL family's vision tower, where the backend runs it at tp 1 (else the
  // model serves text), and M-RoPE: a step with images or shifted sequences rotates by its three
  // planes of positions (models/mrope.h), else by its own positions (every plane would equal them).
  ImageInputs images_;
  int64_t n_params_ = 0;
  int64_t weight_bytes_ = 0;
  int64_t expert_params_ = 0;  // parameters of every expert of every sparse layer (in n_params_)
  int64_t expert_bytes_ = 0;   // their bytes as loaded (in weight_bytes_)
};

StepCost LlamaModel::step_cost(const StepBatch& b, double kv_bytes_per_token) const {
  const double n = b.n_tokens(), rows = static_cast<double>(b.logit_rows.size());
  const double table = static_cast<double>(config_.vocab_size) * config_.hidden_size;
  // n_params counts the whole checkpoint on every rank; a rank's linear layers are 1/size of it.
  // The MTP module (forward_mtp) is not part of a forward step; GPT-2's position table is a lookup.
  const double positions = config_.learned_positions ? static_cast<double>(config_.max_position) * config_.hidden_size : 0.0;
  const double linear_params = static_cast<double>(n_params_ - mtp_params_ - images_.params()) - table -
                               (config_.tie_embeddings ? 0.0 : table) - positions;
  // Sparse layers: a token runs k of the E experts (flops; a rank runs 1/size of that, by columns
  // or, with expert parallelism, on average by experts), and the step reads the experts its
  // tokens chose, at most min(E', n * k) of the E' experts a rank holds per layer: that upper
  // bound is what is counted, since the routing is not known before the step.
  const double n_experts = config_.n_experts, held = shard_.moe.n_experts;
  const double active = n_experts > 0 ? config_.n_experts_per_tok / n_experts : 0.0;
  const double touched = held > 0 ? std::min(held, n * config_.n_experts_per_tok) / held : 0.0;
  const double dense_params = (linear_params - static_cast<double>(expert_params_) * (1.0 - active)) / shard_.size;
  // Attention summed over the layers (their windows may differ), as per layer.
  double pairs = 0.0, kv_read = 0.0;
  for (int l = 0; l < config_.n_layers; ++l) {
    const AttentionWork work = attention_work(b, config_.layer_window(l), config_.layer_chunk(l));
    pairs += work.pairs;
    kv_read += work.kv_read / config_.n_layers;
  }
  StepCost c;
  c.flops = 2.0 * dense_params * n + 2.0 * table * rows + 4.0 * shard_.qkv.n_heads * config_.head_dim * pairs;
  c.bytes = static_cast<double>(weight_bytes_ - mtp_bytes_ - images_.bytes()) -
            static_cast<double>(expert_bytes_) * (1.0 - touched) - ends_.loaded_bytes() +
            ends_.step_bytes(config_, n, rows > 0) + kv_bytes_per_token * (kv_read + n);
  images_.add_cost(b, c);
  return c;
}

// A fused stored tensor (phi3) is read as its parts: part i is rows [offset_i, offset_i + rows_i)
// of it, and a rank takes the same rows of each part as from separate tensors.
Expected<LinearWeight> LlamaModel::load_qkv(WeightLoader& w, int l) {
  const auto& c = config_;
  const int64_t hidden = c.hidden_size, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const Slice qr = shard_.q_rows(), kvr = shard_.kv_rows();
  if (widened_attention(c)) return load_widened_qkv(w, c, l, shard_.qkv, shard_.rank);  // MiMo-V2-Flash's
  if (!c.fused_weights)
    return w.fused_linear({layer_name(l, "self_attn.q_proj.weight"), layer_name(l, "self_attn.k_proj.weight"),
                    layer_name(l, "self_attn.v_proj.weight")},
                   {q, kv, kv}, hidden, {qr, kvr, kvr});
  const std::string name = layer_name(l, "self_attn.qkv_proj.weight");  // [q + 2 kv, hidden]: q, k, v rows
  const int64_t rows = q + 2 * kv;
  return w.fused_linear({name, name, name}, {rows, rows, rows}, hidden,
                 {qr, {q + kvr.begin, kvr.size}, {q + kv + kvr.begin, kvr.size}});
}

Expected<LinearWeight> LlamaModel::load_gate_up(WeightLoader& w, int l) {
  const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
  const Slice ir = shard_.inter_rows();
  if (!config_.mlp_gated())  // up_proj alone (StarCoder2's c_fc, Phi's fc1: classic_decoder_tensors)
    return w.fused_linear({layer_name(l, "mlp.up_proj.weight")}, {inter}, hidden, {ir});
  if (!config_.fused_weights && config_.arch != "glm4" && config_.arch != "glm")  // GLM's gate|up is one tensor, its q, k, v apart
    return w.fused_linear({mlp_name(config_, l, "gate_proj.weight"), mlp_name(config_, l, "up_proj.weight")}, {inter, inter},
                          hidden, {ir, ir});
  const std::string name = layer_name(l, "mlp.gate_up_proj.weight");  // [2 I, hidden]: gate rows, then up rows
  return w.fused_linear({name, name}, {2 * inter, 2 * inter}, hidden, {ir, {inter + ir.begin, ir.size}});
}

// Apertus's xIELU parameters as transformers' XIELUActivation uses them: alpha_p = softplus(raw),
// alpha_n = beta + softplus(raw); beta and eps as stored (buffers some checkpoints leave out:
// the class's 0.5 and -1e-6 then).
Expected<XieluParams> LlamaModel::load_xielu(WeightLoader& w, int l) {
  auto softplus = [](float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); };  // torch's threshold 20
  XieluParams p;
  for (auto [key, v] : {std::pair{"mlp.act_fn.beta", &p.beta}, {"mlp.act_fn.eps", &p.eps}}) {
    if (w.has(layer_name(l, key))) {
      BRIGADE_ASSIGN_OR_RETURN(*v, w.scalar_f32(layer_name(l, key)));
    }
  }
  BRIGADE_ASSIGN_OR_RETURN(const float alpha_p, w.scalar_f32(layer_name(l, "mlp.act_fn.alpha_p")));
  BRIGADE_ASSIGN_OR_RETURN(const float alpha_n, w.scalar_f32(layer_name(l, "mlp.act_fn.alpha_n")));
  p.alpha_p = softplus(alpha_p);
  p.alpha_n = p.beta + softplus(alpha_n);
  return p;
}

Status LlamaModel::load_layer(WeightLoader& w, int l, DecoderLayer& layer) {
  layer.nope = (l < static_cast<int>(config_.nope_layers.size()) && config_.nope_layers[static_cast<size_t>(l)]) ||
               config_.learned_positions ||  // GPT-2's positions are in the embeddings (DecoderEnds::add_positions)
               !config_.alibi_slopes.empty();  // BLOOM's and MPT's are ALiBi's (AttentionMeta::alibi_slopes)
  const auto& c = config_;
  const int64_t hidden = c.hidden_size, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;
  const Shard& s = shard_;
  const std::vector<Slice> qkv_rows = {s.q_rows(), s.kv_rows(), s.kv_rows()};
  auto norm = [&](const char* name, int64_t size) {
    return c.norms_weightless ? w.constant_f32(size, 1.0f)  // OLMo 1's OlmoLayerNorm
                              : w.vector_f32({layer_name(l, name)}, {size}, {}, c.norm_offset);
  };
  if (c.parallel_blocks) {  // Cohere: one norm, the attention's and the MLP's input both
    BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm, norm("input_layernorm.weight", hidden));
    if (c.parallel_mlp_norm) {  // GPT-NeoX: the MLP's own norm of the layer's input
      BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm, norm("post_attention_layernorm.weight", hidden));
    }
  } else if (c.post_norms) {  // OLMo 2, EXAONE 4: each block's output normed, nothing before it
    BRIGADE_ASSIGN_OR_RETURN(layer.post_attn_norm, norm("post_attention_layernorm.weight", hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.post_mlp_norm, norm("post_feedforward_layernorm.weight", hidden));
  } else if (c.arch == "vaultgemma") {  // VaultGemmaDecoderLayer: Gemma 2's first and third norms only
    BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm, norm("input_layernorm.weight", hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm, norm("pre_feedforward_layernorm.weight", hidden));
  } else if (c.arch == "apertus") {  // ApertusDecoderLayer's names for Llama's two
    BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm, norm("attention_layernorm.weight", hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm, norm("feedforward_layernorm.weight", hidden));
  } else if (c.sandwich_norms) {  // attn, post-attn, MLP, post-MLP: Gemma's names, Glm4DecoderLayer's (Kolibri-1's), AfmoeDecoderLayer's, HyperCLOVAX's
    using Names = std::array<const char*, 4>;
    static constexpr Names kGemma = {"input_layernorm.weight", "post_attention_layernorm.weight",
                                     "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"};
    static constexpr Names kGlm4 = {"input_layernorm.weight", "post_self_attn_layernorm.weight",
                                    "post_attention_layernorm.weight", "post_mlp_layernorm.weight"};
    static constexpr Names kAfmoe = {"input_layernorm.weight", "post_attention_layernorm.weight",
                                     "pre_mlp_layernorm.weight", "post_mlp_layernorm.weight"};
    static constexpr Names kHyperClovax = {"input_layernorm.weight", "post_norm1.weight",
                                           "post_attention_layernorm.weight", "post_norm2.weight"};
    const Names& n = c.arch == "glm4" || c.arch == "kolibri1" ? kGlm4 : c.arch == "afmoe" ? kAfmoe : c.arch == "hyperclovax" ? kHyperClovax : kGemma;
    BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm, norm(n[0], hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.post_attn_norm, norm(n[1], hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm, norm(n[2], hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.post_mlp_norm, norm(n[3], hidden));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm, norm("input_layernorm.weight", hidden));
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm, norm("post_attention_layernorm.weight", hidden));
  }
  if (c.norm_bias) {  // Phi-3.5-MoE, StarCoder2, StableLM: Llama's two norms, each with a bias (Phi's one)
    BRIGADE_ASSIGN_OR_RETURN(layer.attn_norm_bias, w.vector_f32({layer_name(l, "input_layernorm.bias")}, {hidden}));
    if (!c.parallel_blocks || c.parallel_mlp_norm) {
      BRIGADE_ASSIGN_OR_RETURN(layer.mlp_norm_bias, w.vector_f32({layer_name(l, "post_attention_layernorm.bias")}, {hidden}));
    }
  }
  BRIGADE_ASSIGN_OR_RETURN(layer.attn.qkv, load_qkv(w, l));
  if (widened_attention(c)) {  // MiMo-V2-Flash's narrower v heads
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.o, load_widened_o(w, c, l, s.qkv, s.rank));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.o, w.matrix(layer_name(l, "self_attn.o_proj.weight"), hidden, q, {}, s.q_rows()));
  }
  if (c.qkv_bias) {
    BRIGADE_ASSIGN_OR_RETURN(
        layer.attn.qkv_bias,
        w.vector_f32({layer_name(l, "self_attn.q_proj.bias"), layer_name(l, "self_attn.k_proj.bias"),
                      layer_name(l, "self_attn.v_proj.bias")},
                     {q, kv, kv}, qkv_rows));
  }
  if (c.o_bias && s.rank == 0) {
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.o_bias, w.vector_f32({layer_name(l, "self_attn.o_proj.bias")}, {hidden}));
  } else if (c.o_bias) {  // rank 0 adds it; the others check and count it
    BRIGADE_RETURN_IF_ERROR(w.skip(layer_name(l, "self_attn.o_proj.bias"), {hidden}));
  }
  if (c.sub_norms) {  // BitNet: over the whole q width (tensor parallelism is refused: check_ternary)
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.sub_norm, norm("self_attn.attn_sub_norm.weight", q));
  }
  if (c.attn_gate) {  // one row per q column: this rank's heads' rows
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.gate, w.matrix(layer_name(l, "self_attn.gate_proj.weight"), q, hidden, s.q_rows()));
  }
  if (c.attn_sinks && (!c.sinks_sliding_only || c.layer_window(l) > 0)) {  // one per query head: this rank's heads
    const int64_t heads = s.qkv.n_heads;
    const char* sinks = c.arch == "mimo_v2_flash" ? "self_attn.attention_sink_bias" : "self_attn.sinks";  // the Hub's
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.sinks, w.vector_f32({layer_name(l, sinks)}, {c.n_heads},
                                                            {{s.rank * heads, heads}}));
  }
  if (c.qk_norm && c.qk_norm_weightless) {  // Llama 4: unit weights (LlamaModel::unit_norm_), RoPE layers only
    layer.unit_qk_norm = !layer.nope;
  } else if (c.qk_norm && c.layer_norms && !w.has(layer_name(l, "self_attn.q_norm.weight"))) {
    // StableLM 2: per-head LayerNorms stored one tensor per head; this rank's heads
    auto heads = [&](const char* which, int first, int n) {
      std::vector<std::string> names;
      for (int h = first; h < first + n; ++h) {
        const std::string name = std::string("self_attn.") + which + ".norms." + std::to_string(h) + ".weight";
        names.push_back(layer_name(l, name.c_str()));
      }
      return w.vector_f32(names, std::vector<int64_t>(names.size(), c.head_dim));
    };
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.q_norm, heads("q_layernorm", s.rank * s.qkv.n_heads, s.qkv.n_heads));
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.k_norm, heads("k_layernorm", s.rank * s.qkv.n_kv_heads, s.qkv.n_kv_heads));
  } else if (c.qk_norm && c.layer_norms) {
    // Command R+ (and StableLM's GGUF): per-head LayerNorms, each head's own weights; this rank's heads
    std::vector<int64_t> cols(static_cast<size_t>(c.head_dim));
    for (int64_t i = 0; i < c.head_dim; ++i) cols[static_cast<size_t>(i)] = i;
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.q_norm, w.gathered_f32({layer_name(l, "self_attn.q_norm.weight")}, c.n_heads,
                                                               c.head_dim, {s.rank * s.qkv.n_heads, s.qkv.n_heads}, cols));
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.k_norm, w.gathered_f32({layer_name(l, "self_attn.k_norm.weight")}, c.n_kv_heads,
                                                               c.head_dim, {s.rank * s.qkv.n_kv_heads, s.qkv.n_kv_heads},
                                                               cols));
  } else if (c.qk_norm_whole) {  // OLMo 2, MiniMax-M2: over the whole projections, this rank's heads' part
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.q_norm, w.vector_f32({layer_name(l, "self_attn.q_norm.weight")}, {q},
                                                             {s.q_rows()}, c.norm_offset));
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.k_norm, w.vector_f32({layer_name(l, "self_attn.k_norm.weight")}, {kv},
                                                             {s.kv_rows()}, c.norm_offset));
  } else if (c.qk_norm) {  // per head; Hunyuan's names
    const bool hunyuan = c.arch == "hunyuan_v1_dense" || c.arch == "hunyuan_v1_moe";
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.q_norm,
                             norm(hunyuan ? "self_attn.query_layernorm.weight" : "self_attn.q_norm.weight", c.head_dim));
    BRIGADE_ASSIGN_OR_RETURN(layer.attn.k_norm,
                             norm(hunyuan ? "self_attn.key_layernorm.weight" : "self_attn.k_norm.weight", c.head_dim));
  }
  if (c.is_moe_layer(l)) {
    // Under weights: q8_0 / q4_0 / q4_1 the experts are quantized where the backend's moe_experts
    // multiplies the type (Backend::moe_experts); the router stays float.
    const std::optional<DType> want = options_.weight_dtype;
    const bool quantize = want && is_block_quantized(*want) && backend_.supports_weight_dtype(*want);
    BRIGADE_ASSIGN_OR_RETURN(layer.moe, load_moe_block(w, c, l, s.moe, quantize ? want : std::nullopt));
    expert_params_ += int64_t{3} * c.n_experts * c.moe_intermediate_size * hidden;
    expert_bytes_ += static_cast<int64_t>(layer.moe.expert_bytes());
    return Status::ok();
  }
  BRIGADE_ASSIGN_OR_RETURN(layer.mlp.gate_up, load_gate_up(w, l));
  BRIGADE_ASSIGN_OR_RETURN(layer.mlp.down,
                           w.matrix(mlp_name(c, l, "down_proj.weight"), hidden, inter, {}, s.inter_rows()));
  if (c.mlp_activation == MlpActivation::xielu) {
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp.xielu, load_xielu(w, l));
  }
  if (c.sub_norms) {
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp.sub_norm, norm("mlp.ffn_sub_norm.weight", inter));
  }
  if (!c.mlp_bias) return Status::ok();
  if (!c.mlp_gated()) {
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp.gate_up_bias,
                             w.vector_f32({layer_name(l, "mlp.up_proj.bias")}, {inter}, {s.inter_rows()}));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(layer.mlp.gate_up_bias,
                           w.vector_f32({layer_name(l, "mlp.gate_proj.bias"), layer_name(l, "mlp.up_proj.bias")},
                                        {inter, inter}, {s.inter_rows(), s.inter_rows()}));
  }
  if (s.rank != 0) return w.skip(layer_name(l, "mlp.down_proj.bias"), {hidden});  // rank 0 adds it
  BRIGADE_ASSIGN_OR_RETURN(layer.mlp.down_bias, w.vector_f32({layer_name(l, "mlp.down_proj.bias")}, {hidden}));
  return Status::ok();
}

Status LlamaModel::load(const Checkpoint& ck) {
  const auto& c = config_;
  if (c.prefix_lm && !backend_.supports_vision())
    return unsupported("this model's prompt attends to all of itself (PaliGemma's prefix attention, "
                       "AttentionMeta::attend_until), which the " + std::string(backend_.name()) +
                       " backend does not compute; run it on the CPU backend");
  WeightLoader w(ck, backend_, options_.weight_dtype);
  BRIGADE_RETURN_IF_ERROR(ends_.load_embedding(w, c));
  // Sizes from the config (layer count, head_dim) are trusted for allocation only once the
  // tensors have confirmed them: a corrupt header cannot ask for memory the weights do not back.
  BRIGADE_RETURN_IF_ERROR(load_layers_with_progress(
      load_progress_name(ck), c.n_layers, options_.progress,
      [&](int l) { return load_layer(w, l, layers_.emplace_back()); }, [&] { return w.n_bytes(); }));
  BRIGADE_RETURN_IF_ERROR(ends_.load_head(w, c, shard_.rank == 0));  // only rank 0 computes logits
  if (c.embed_norm && c.layer_norms) {  // BLOOM's word_embeddings_layernorm
    BRIGADE_ASSIGN_OR_RETURN(embed_norm_, w.vector_f32({"model.embed_norm.weight"}, {c.hidden_size}));
    BRIGADE_ASSIGN_OR_RETURN(embed_norm_bias_, w.vector_f32({"model.embed_norm.bias"}, {c.hidden_size}));
  }
  if (options_.mtp) BRIGADE_RETURN_IF_ERROR(load_mtp(w));
  if (!options_.eagle3.empty()) {
    if (shard_.size > 1)
      return unsupported("the EAGLE-3 head runs on one rank: speculative method eagle3 needs tp 1 (got tp " +
                         std::to_string(shard_.size) + ")");
    BRIGADE_ASSIGN_OR_RETURN(eagle3_, Eagle3Head::load(options_.eagle3, c, backend_, ends_.embed.tensor,
                                                       options_.weight_dtype, options_.max_batch_tokens));
  }
  if (c.vision.present() && backend_.supports_vision() && shard_.size == 1) BRIGADE_RETURN_IF_ERROR(images_.load(w));
  n_params_ = w.n_params();
  weight_bytes_ = w.n_bytes();
  rope_.style = c.rope_style;
  rope_.rotary_dim = c.rope_dims();
  rope_.inv_freq = rope_inv_freq_scaled(c.rope_theta, c.rope_dims(), c.rope_scaling);
  rope_.attention_factor = rope_attention_factor(c.rope_scaling);
  if (c.rope_reversed)  // sin(-a) = -sin(a) exactly: transformers' flipped rotate_half to the bit
    for (float& f : rope_.inv_freq) f = -f;
  rope_local_ = rope_;
  images_.set_text_rope(rope_);
  if (c.rope_local_theta > 0.0f) {
    rope_local_.inv_freq = rope_inv_freq(c.rope_local_theta, c.rope_dims());
    rope_local_.attention_factor = 1.0f;
  }
  embed_scale_ = round_to(c.embed_scale, backend_.activation_dtype());
  if (c.qk_norm_weightless) {
    BRIGADE_ASSIGN_OR_RETURN(unit_norm_, alloc_tensor(backend_, DType::f32, 1, c.head_dim));
    const std::vector<float> ones(static_cast<size_t>(c.head_dim), 1.0f);
    backend_.upload(unit_norm_.tensor, ones.data());
  }
  if (c.embed_norm && !c.layer_norms) {
    BRIGADE_ASSIGN_OR_RETURN(embed_norm_, alloc_tensor(backend_, DType::f32, 1, c.hidden_size));
    const std::vector<float> ones(static_cast<size_t>(c.hidden_size), 1.0f);
    backend_.upload(embed_norm_.tensor, ones.data());
  }
  if (!c.alibi_slopes.empty()) {  // this rank's heads' slopes
    const int64_t heads = shard_.qkv.n_heads;
    BRIGADE_ASSIGN_OR_RETURN(alibi_, alloc_tensor(backend_, DType::f32, 1, heads));
    backend_.upload(alibi_.tensor, c.alibi_slopes.data() + shard_.rank * heads);
  }
  BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  if (options_.lora_enabled()) {
    BRIGADE_ASSIGN_OR_RETURN(lora_, LoraSet::load(options_.loras, c, backend_, options_.max_batch_tokens,
                                                  options_.max_lora_rank, options_.max_loras, shard_.rank,
                                                  shard_.size));
  }
  backend_.synchronize();  // uploads from staging memory have finished before it is freed
  return Status::ok();
}

Status LlamaModel::load_mtp(WeightLoader& w) {
  const int64_t expert_params = expert_params_, expert_bytes = expert_bytes_;  // the target's experts only
  BRIGADE_ASSIGN_OR_RETURN(const MtpSize size, load_mtp_module(w, config_, shard_.size, mtp_, [&](int l) {
                             return load_layer(w, l, mtp_layer_);
                           }));
  mtp_params_ = size.params, mtp_bytes_ = size.bytes;
  expert_params_ = expert_params, expert_bytes_ = expert_bytes;
  with_mtp_ = true;
  return Status::ok();
}

Status LlamaModel::allocate_scratch() {
  const auto& c = config_;
  const DType a = backend_.activation_dtype();
  const int64_t t = options_.max_batch_tokens, hidden = c.hidden_size;
  Scratch& s = scratch_;
  BRIGADE_ASSIGN_OR_RETURN(s.residual, alloc_tensor(backend_, a, t, hidden));
  BRIGADE_ASSIGN_OR_RETURN(s.normed, alloc_tensor(backend_, a, t, hidden));
  BRIGADE_ASSIGN_OR_RETURN(s.delta, alloc_tensor(backend_, a, t, hidden));
  BRIGADE_ASSIGN_OR_RETURN(s.qkv, alloc_tensor(backend_, a, t, shard_.qkv.row_width()));
  BRIGADE_ASSIGN_OR_RETURN(s.attn, alloc_tensor(backend_, a, t, shard_.qkv.q_width()));
  if (c.attn_gate) {
    BRIGADE_ASSIGN_OR_RETURN(s.attn_gate, alloc_tensor(backend_, a, t, shard_.qkv.q_width()));
  }
  const bool mtp_sparse = with_mtp_ && c.is_moe_layer(c.n_layers);
  if (c.n_moe_layers() < c.n_layers || (with_mtp_ && !mtp_sparse)) {  // some layer has a dense MLP
    BRIGADE_ASSIGN_OR_RETURN(s.gate_up, alloc_tensor(backend_, a, t, 2 * shard_.inter));
    BRIGADE_ASSIGN_OR_RETURN(s.act, alloc_tensor(backend_, a, t, shard_.inter));
  }
  BRIGADE_ASSIGN_OR_RETURN(s.selected, alloc_tensor(backend_, a, t, hidden));
  if (c.qk_norm_whole && shard_.size > 1) {
    BRIGADE_ASSIGN_OR_RETURN(s.qk_sums, alloc_tensor(backend_, DType::f32, t, 2));
  }
  if (c.n_moe_layers() > 0 || mtp_sparse) {
    BRIGADE_ASSIGN_OR_RETURN(s.moe, allocate_moe_scratch(backend_, c, shard_.moe, t));
  }
  return ints_.allocate(backend_, t);
}

Status LlamaModel::run_attention(const DecoderLayer& layer, const KvLayer& cache, const AttentionMeta& meta,
                                 const RopeConfig& rope, int n) {
  const QkvLayout l = shard_.qkv;
  const Tensor normed = block_input(layer.attn_norm, n);
  const Tensor qkv = scratch_.qkv.tensor.rows(0, n);
  const Tensor attn = scratch_.attn.tensor.rows(0, n);
  const Tensor positions = images_.positions(ints_.positions(n), n);
  const Tensor slots = ints_.slots(n);
  if (ternary_) backend_.quantize_rows_int8(normed);  // BitNet: each ternary linear's int8 input
  layer.attn.qkv.matmul(backend_, normed, layer.attn.qkv_bias.tensor, qkv);
  if (lora_) lora_->apply(layer_index(layer), LoraProj::qkv, normed, qkv);
  const Tensor& q_norm = layer.unit_qk_norm ? unit_norm_.tensor : layer.attn.q_norm.tensor;
  const Tensor& k_norm = layer.unit_qk_norm ? unit_norm_.tensor : layer.attn.k_norm.tensor;
  const bool qk_norm = !q_norm.empty(), after = config_.qk_norm_after_rope;
  if (qk_norm && !after) BRIGADE_RETURN_IF_ERROR(norm_qk(qkv, q_norm, k_norm));
  if (config_.clip_qkv > 0.0f) backend_.clamp(qkv, -config_.clip_qkv, config_.clip_qkv);  // OLMo, OLMoE
  if (!layer.nope) backend_.rope(qkv, l, positions, images_.rope(rope));
  if (qk_norm && after) BRIGADE_RETURN_IF_ERROR(norm_qk(qkv, q_norm, k_norm));
  if ((layer.nope || config_.attn_temperature_all_layers) && config_.attn_temperature_floor > 0.0f)
    backend_.attention_temperature(qkv, l, positions, config_.attn_temperature_floor, config_.attn_temperature_scale,
                                   config_.attn_temperature_offset);  // Llama 4's NoPE layers, Ministral 3's all
  backend_.write_kv(cache, qkv, l, slots);
  const float scale =
      config_.attn_scale > 0.0f ? config_.attn_scale : 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  if (layer.attn.sinks.tensor.empty()) {
    backend_.attention(qkv, l, cache, meta, scale, attn);
  } else {
    AttentionMeta with_sinks = meta;
    with_sinks.sinks = layer.attn.sinks.tensor;
    backend_.attention(qkv, l, cache, with_sinks, scale, attn);
  }
  if (!layer.attn.gate.tensor.empty()) {  // AFMoE's output gate, per q column
    const Tensor gate = scratch_.attn_gate.tensor.rows(0, n);
    backend_.matmul(normed, layer.attn.gate.tensor, Tensor(), gate);
    backend_.sigmoid_mul(attn, gate);
  }
  if (!layer.attn.sub_norm.tensor.empty()) backend_.rms_norm(attn, layer.attn.sub_norm.tensor, config_.rms_eps, attn);
  if (ternary_) backend_.quantize_rows_int8(attn);
  backend_.matmul(attn, layer.attn.o.tensor, layer.attn.o_bias.tensor, scratch_.delta.tensor.rows(0, n));
  if (lora_) lora_->apply(layer_index(layer), LoraProj::o, attn, scratch_.delta.tensor.rows(0, n));
  return reduce(scratch_.delta.tensor.rows(0, n));
}

Status LlamaModel::run_mlp(const DecoderLayer& layer, int n) {
  const Tensor normed = block_input(layer.mlp_norm, n);
  if (!layer.moe.empty()) {
    run_moe_block(backend_, config_, shard_.moe, layer.moe, scratch_.moe, normed, scratch_.delta.tensor.rows(0, n));
    return reduce(scratch_.delta.tensor.rows(0, n));
  }
  const Tensor gate_up = scratch_.gate_up.tensor.rows(0, n);
  const Tensor act = scratch_.act.tensor.rows(0, n);
  if (ternary_) backend_.quantize_rows_int8(normed);
  if (!config_.mlp_gated()) {  // Apertus, Arcee AFM, StarCoder2, Phi: up (and its bias) straight into act, no gate
    layer.mlp.gate_up.matmul(backend_, normed, layer.mlp.gate_up_bias.tensor, act);
    if (config_.mlp_activation == MlpActivation::xielu) backend_.xielu(act, layer.mlp.xielu);
    else if (config_.mlp_activation == MlpActivation::relu2) backend_.relu_squared(act);
    else if (config_.mlp_activation == MlpActivation::gelu) backend_.gelu(act);  // Pythia's exact GELU
    else if (config_.mlp_activation == MlpActivation::relu)  // OPT's
      backend_.clamp(act, 0.0f, std::numeric_limits<float>::infinity());
    else backend_.gelu_tanh(act);
  } else {
    layer.mlp.gate_up.matmul(backend_, normed, layer.mlp.gate_up_bias.tensor, gate_up);
    if (lora_) lora_->apply(layer_index(layer), LoraProj::gate_up, normed, gate_up);
    if (config_.mlp_activation == MlpActivation::gelu_tanh) backend_.gelu_tanh_mul(gate_up, act);
    else if (config_.mlp_activation == MlpActivation::relu2_glu) backend_.relu2_mul(gate_up, act);  // BitNet's
    else backend_.silu_mul(gate_up, act);
  }
  if (!layer.mlp.sub_norm.tensor.empty()) backend_.rms_norm(act, layer.mlp.sub_norm.tensor, config_.rms_eps, act);
  if (ternary_) backend_.quantize_rows_int8(act);
  backend_.matmul(act, layer.mlp.down.tensor, layer.mlp.down_bias.tensor, scratch_.delta.tensor.rows(0, n));
  if (lora_) lora_->apply(layer_index(layer), LoraProj::down, act, scratch_.delta.tensor.rows(0, n));
  return reduce(scratch_.delta.tensor.rows(0, n));
}

Status LlamaModel::run_layer(const DecoderLayer& layer, const KvLayer& cache, const AttentionMeta& meta,
                             const RopeConfig& rope, int n) {
  const Tensor residual = scratch_.residual.tensor.rows(0, n);
  const Tensor normed = scratch_.normed.tensor.rows(0, n);
  const Tensor delta = scratch_.delta.tensor.rows(0, n);
  const float eps = config_.rms_eps;
  // Granite's residual_multiplier: each sublayer's output scaled before its residual add.
  const float residual_scale = config_.residual_multiplier;
  const bool scale_residual = residual_scale > 0.0f && residual_scale != 1.0f;
  BRIGADE_RETURN_IF_ERROR(run_attention(layer, cache, meta, rope, n));
  if (!layer.post_attn_norm.tensor.empty()) backend_.rms_norm(delta, layer.post_attn_norm.tensor, eps, delta);
  if (scale_residual) backend_.scale(delta, residual_scale);
  // Parallel blocks (Cohere): residual + attention now, + MLP at the next norm; the MLP reads
  // the normed input the attention read, or (GPT-NeoX) its own norm of the layer's input, taken
  // before the attention joins the residual.
  if (config_.parallel_blocks) {
    if (!layer.mlp_norm.tensor.empty())
      apply_norm(backend_, config_, residual, layer.mlp_norm.tensor, normed, layer.mlp_norm_bias.tensor);
    backend_.add(residual, delta);
  } else join(residual, delta, layer.mlp_norm, layer.mlp_norm_bias, normed);
  BRIGADE_RETURN_IF_ERROR(run_mlp(layer, n));
  if (!layer.post_mlp_norm.tensor.empty()) backend_.rms_norm(delta, layer.post_mlp_norm.tensor, eps, delta);
  if (scale_residual) backend_.scale(delta, residual_scale);
  return Status::ok();
}

Expected<StepBounds> LlamaModel::begin_step(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  const StepLimits limits{config_.vocab_size, config_.max_position, options_.max_batch_tokens,
                          n_kv_layers(), shard_.qkv.n_kv_heads, config_.head_dim};
  // Checked before the first collective, as check_step is, so a refused step never leaves a peer
  // waiting.
  if (shard_.rank != 0 && (!batch.logit_rows.empty() || !batch.hidden_rows.empty()))
    return invalid_argument("tensor-parallel rank " + std::to_string(shard_.rank) +
                            " computes no logits (rank 0 does): pass a step without logit rows");
  BRIGADE_ASSIGN_OR_RETURN(StepBounds bounds, check_step(batch, limits, kv.layout(), logits));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, options_.max_batch_tokens, config_.hidden_size, backend_.activation_dtype()));
  BRIGADE_RETURN_IF_ERROR(lora_ ? lora_->begin_step(batch) : check_no_lora(batch));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> attend_until, images_.begin_step(batch));
  if (config_.prefix_lm) {
    attend_until = prefix_lm_until(batch, std::move(attend_until));
    BRIGADE_ASSIGN_OR_RETURN(bounds.unwindowed, prefix_lm_opens_window(batch, config_.sliding_window));
  }
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch, attend_until));
  return bounds;
}

Status LlamaModel::forward(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, begin_step(batch, kv, logits));
  if (eagle3_) BRIGADE_RETURN_IF_ERROR(eagle3_->begin_capture(batch));
  else if (!batch.aux_rows.empty()) return invalid_argument("aux_rows are an EAGLE-3 head's (LoadOptions::eagle3)");
  const int n = batch.n_tokens();
  // Full-attention layers and sliding ones (every layer where ModelConfig::sliding_layers is empty).
  // (PaliGemma 2: a prompt longer than the window runs unwindowed, prefix_lm_opens_window.)
  AttentionMeta full = ints_.meta(batch, bounds, 0),
                sliding = ints_.meta(batch, bounds, bounds.unwindowed ? 0 : config_.sliding_window);
  full.softcap = sliding.softcap = config_.attn_softcap;
  full.alibi_slopes = sliding.alibi_slopes = alibi_.tensor;  // BLOOM's, MPT's; empty for others
  AttentionMeta chunked = full;  // Llama 4's chunked layers (ModelConfig::chunked_layers)
  chunked.chunk = config_.attention_chunk;

  const Tensor residual = scratch_.residual.tensor.rows(0, n);
  const Tensor normed = scratch_.normed.tensor.rows(0, n);
  const Tensor delta = scratch_.delta.tensor.rows(0, n);
  backend_.embedding(ends_.embed.tensor, ints_.tokens(batch), residual);
  ends_.add_positions(backend_, ints_.positions(n), residual, delta);  // GPT-2's learned positions, if any
  if (config_.embed_scale > 0.0f) backend_.scale(residual, embed_scale_);  // the images' features are not scaled
  if (config_.embedding_multiplier > 0.0f && config_.embedding_multiplier != 1.0f)  // Granite's
    backend_.scale(residual, config_.embedding_multiplier);
  if (config_.embed_norm) {  // nanochat: the residual starts as the embeddings' RMSNorm; BLOOM's LayerNorm
    if (config_.layer_norms) backend_.layer_norm(residual, embed_norm_.tensor, embed_norm_bias_.tensor, config_.rms_eps, delta);
    else backend_.rms_norm(residual, embed_norm_.tensor, config_.rms_eps, delta);
    backend_.copy(residual, delta);
  }
  BRIGADE_RETURN_IF_ERROR(images_.put(batch, residual));
  for (int l = 0; l < config_.n_layers; ++l) {
    const DecoderLayer& layer = layers_[static_cast<size_t>(l)];
    const bool local = config_.layer_window(l) > 0;
    // The previous block's output joins the residual in the same pass as the next norm.
    if (l == 0 && !layer.attn_norm.tensor.empty())
      apply_norm(backend_, config_, residual, layer.attn_norm.tensor, normed, layer.attn_norm_bias.tensor);
    else if (l > 0) join(residual, delta, layer.attn_norm, layer.attn_norm_bias, normed);
    if (eagle3_) eagle3_->capture(l, residual);  // the residual entering layer l
    const AttentionMeta& meta = config_.layer_chunk(l) > 0 ? chunked : local ? sliding : full;
    BRIGADE_RETURN_IF_ERROR(run_layer(layer, kv.layer(l), meta, local ? rope_local_ : rope_, n));
    // Qwen3-VL: the layer's output (residual + delta) plus the tap's features on the image rows.
    if (l < images_.n_deepstack()) images_.add_deepstack(l, residual);
  }
  images_.end_step();
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), h = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && h == 0) return Status::ok();
  ends_.logits(backend_, config_, residual, delta, normed, scratch_.selected.tensor.rows(0, r), ints_.logit_rows(r), logits,
               ints_.hidden_rows(h), batch.hidden);
  scale_logits(r, logits);
  return Status::ok();
}

// GLM-4.5's MTP layer: its input (models/mtp_module.h), one decoder layer of the model's kind
// over the module's K/V (full attention, the model's RoPE), shared_head.norm, the model's head.
Status LlamaModel::forward_mtp(const StepBatch& batch, const KvCache& kv, const Tensor& logits) {
  if (eagle3_) return eagle3_->forward(batch, kv, config_.n_layers, logits);
  if (!with_mtp_) return Model::forward_mtp(batch, kv, logits);
  BRIGADE_RETURN_IF_ERROR(check_prev_hidden(batch, config_.hidden_size, backend_.activation_dtype()));
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, begin_step(batch, kv, logits));
  const int n = batch.n_tokens();
  AttentionMeta meta = ints_.meta(batch, bounds, 0);
  meta.softcap = config_.attn_softcap;
  const Tensor residual = scratch_.residual.tensor.rows(0, n);
  const Tensor normed = scratch_.normed.tensor.rows(0, n);
  const Tensor delta = scratch_.delta.tensor.rows(0, n);
  mtp_.input(backend_, config_, ends_.embed.tensor, ints_.tokens(batch), batch.prev_hidden, residual, normed, delta);
  join(residual, delta, mtp_layer_.attn_norm, mtp_layer_.attn_norm_bias, normed);
  BRIGADE_RETURN_IF_ERROR(run_layer(mtp_layer_, kv.layer(config_.n_layers), meta, rope_, n));
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), h = static_cast<int64_t>(batch.hidden_rows.size());
  if (r == 0 && h == 0) return Status::ok();
  ends_.logits_with(mtp_.head_norm.tensor, backend_, config_, residual, delta, normed,
                    scratch_.selected.tensor.rows(0, r), ints_.logit_rows(r), logits, ints_.hidden_rows(h), batch.hidden);
  scale_logits(r, logits);
  return Status::ok();
}

// The matrices' element type: a float type; f8e4m3 for the linear layers where the backend
// multiplies fp8 (the embedding table and lm_head then stay bf16, as vLLM keeps them); q8_0,
// q4_0 or q4_1 for the linear layers where the backend multiplies them (the CPU; tables stay as stored).
// Checked before any weight is read.
Status check_weight_dtype(std::optional<DType> want, const Backend& backend) {
  if (!want) return Status::ok();
  const DType t = *want;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16 && t != DType::f8e4m3 && t != DType::q8_0 &&
      t != DType::q4_0 && t != DType::q4_1 && t != DType::mxfp4)
    return unsupported(std::string("weight dtype ") + dtype_name(t) +
                       " is not supported; supported: f32, f16, bf16, f8e4m3 (fp8), q8_0, q4_0, q4_1, mxfp4");
  if (t == DType::f8e4m3 && !backend.supports_weight_dtype(t))
    return unsupported("fp8 weights need a CUDA GPU with compute capability >= 8.9; backend '" + backend.name() +
                       "' cannot run them (load with weights: bf16 or auto)");
  if (is_block_quantized(t) && !backend.supports_weight_dtype(t))
    return unsupported(std::string(dtype_name(t)) + " weights run on the CPU backend; backend '" + backend.name() +
                       "' cannot multiply them (load with weights: auto or bf16)");
  if (!backend.supports_weight_dtype(t))
    return unsupported(std::string("backend '") + backend.name() + "' does not keep " + dtype_name(t) +
                       " weights (load with weights: auto or bf16)");
  return Status::ok();
}

// Experts run through Backend::moe_route / moe_experts, in the backend's float weight type or,
// on the CPU, their GGUF block types; GGUF's gate and up apart through moe_experts_split.
Status check_moe_support(const Checkpoint& ck, std::optional<DType> want, const Backend& backend) {
  const ModelConfig& c = ck.config();
  if (c.n_moe_layers() == 0) return Status::ok();
  if (!backend.supports_moe())
    return unsupported("backend '" + backend.name() + "' has no mixture-of-experts ops; " + c.arch +
                       " runs on the CPU and CUDA backends");
  for (int l = 0; l < c.n_layers; ++l)
    if (c.is_moe_layer(l) && ck.tensors().count(layer_name(l, "mlp.experts.gate_proj")) > 0 &&
        !backend.supports_split_experts())
      return unsupported("the experts of this GGUF file (ffn_gate_exps and ffn_up_exps apart) run on the CPU backend; "
                         "backend '" + backend.name() + "' multiplies only experts fused from Hugging Face checkpoints");
  if (want == DType::f8e4m3)
    return unsupported("fp8 weights are not supported for mixture-of-experts models (" + c.arch +
                       "); load with weights: bf16 or auto");
  return Status::ok();
}

// BLOOM's and MPT's ALiBi is in the CPU and CUDA attention (supports_alibi). AFMoE's output gate
// (Backend::sigmoid_mul) and Arcee AFM's relu2 MLP (Backend::relu_squared) are the state-space
// ops' (supports_ssm: the CPU and CUDA backends).
Status check_gate_ops(const ModelConfig& c, const Backend& backend) {
  if (!c.alibi_slopes.empty() && !backend.supports_alibi())
    return unsupported("backend '" + backend.name() + "' has no ALiBi attention (AttentionMeta::alibi_slopes); " +
                       c.arch + " runs on the CPU and CUDA backends");
  const bool relu2 = c.mlp_activation == MlpActivation::relu2 || c.mlp_activation == MlpActivation::relu2_glu;
  if ((c.attn_gate || relu2 || c.quant.ternary()) && !backend.supports_ssm())
    return unsupported("backend '" + backend.name() + "' has no sigmoid_mul / relu_squared / relu2_mul / "
                       "quantize_rows_int8 ops; " + c.arch + " runs on the CPU and CUDA backends");
  // StarCoder2's and Phi's ungated gelu_tanh MLP, Pythia's gelu (Backend::gelu_tanh, gelu).
  const bool gelu = c.mlp_activation == MlpActivation::gelu_tanh || c.mlp_activation == MlpActivation::gelu;
  if (c.mlp_ungated && gelu && !backend.supports_gelu())
    return unsupported("backend '" + backend.name() + "' has no ungated gelu_tanh / gelu op; " + c.arch +
                       " (an ungated GELU MLP) runs on the CPU and CUDA backends");
  return Status::ok();
}

// BitNet's sub-norms and int8 activations span whole rows of o's and down's inputs, which tensor
// parallelism splits by columns; its ternary linears are the dense decoder's, without biases
// (AutoBitLinear would scale them with the output).
Status check_ternary(const ModelConfig& c, const LoadOptions& o) {
  if (!c.quant.ternary() && !c.sub_norms) return Status::ok();
  if (o.communicator != nullptr && o.communicator->size() > 1)
    return unsupported(c.arch + " (BitNet's sub-norms and int8 activations over whole rows) is not supported with "
                       "tensor parallelism; run it at tp 1 (data parallelism replicates it)");
  if (!c.quant.ternary()) return Status::ok();
  if (c.n_moe_layers() > 0 || c.qkv_bias || c.o_bias || c.mlp_bias || !c.mlp_gated() || c.parallel_blocks ||
      c.post_norms || c.attn_gate)
    return unsupported("config.json: quantization_config " + c.quant.describe() + " is supported for the dense, "
                       "pre-norm, bias-free Llama decoder (bitnet, llama) only");
  if (o.lora_enabled()) return unsupported("LoRA adapters are not supported with ternary (bitnet) weights");
  return Status::ok();
}

}  // namespace

std::vector<float> rope_inv_freq(float theta, int rotary_dim) {
  std::vector<float> inv(static_cast<size_t>(rotary_dim / 2));
  for (int i = 0; i < rotary_dim / 2; ++i)
    inv[static_cast<size_t>(i)] = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  return inv;
}

Expected<std::unique_ptr<Model>> load_llama(const Checkpoint& checkpoint, Backend& backend,
                                            const LoadOptions& options) {
  if (options.max_batch_tokens < 1)
    return invalid_argument("max_batch_tokens must be >= 1 (got " + std::to_string(options.max_batch_tokens) + ")");
  BRIGADE_RETURN_IF_ERROR(check_moe_support(checkpoint, options.weight_dtype, backend));
  BRIGADE_RETURN_IF_ERROR(check_gate_ops(checkpoint.config(), backend));
  BRIGADE_RETURN_IF_ERROR(check_weight_dtype(options.weight_dtype, backend));
  BRIGADE_RETURN_IF_ERROR(check_ternary(checkpoint.config(), options));  // (its tp refusal before the divisibility one)
  BRIGADE_RETURN_IF_ERROR(check_tensor_parallel(checkpoint.config(), options, /*split_kv_heads=*/true));
  BRIGADE_RETURN_IF_ERROR(check_lora_support(checkpoint.config(), options));
  auto model = std::make_unique<LlamaModel>(checkpoint.config(), backend, options);
  BRIGADE_RETURN_IF_ERROR(model->load(checkpoint));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace brigade
