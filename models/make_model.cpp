#include "models/make_model.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <nlohmann/json.hpp>
#include <vector>

#include "models/model_config.h"
#include "models/synthetic_tokenizer.h"
#include "models/weight_quant.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;
  enum Kind { matrix, embedding, norm } kind = matrix;
  double std = 0.0;  // matrices, embeddings and biases (stored as kind embedding): standard deviation
  std::string values_of;  // non-empty: a copy of the tensor of that name (its values, drawn from its seed)
  double mean = 0.0;  // embeddings and biases: their mean (Mamba2's A_log, dt_bias and D)
  int64_t numel() const { int64_t n = 1; for (auto d : shape) n *= d; return n; }
};

// splitmix64 stream seeded per tensor, so a tensor's values do not depend on write order.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }  // (0, 1)
  double normal() {  // Box–Muller; the second value is kept for the next call
    if (has_spare_) { has_spare_ = false; return spare_; }
    const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * M_PI * uniform();
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }
 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, mixed with the seed
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

bool is_deepseek(const std::string& arch) { return arch == "deepseek_v2" || arch == "deepseek_v3"; }

TensorPlan mat(std::string n, int64_t rows, int64_t cols, double scale) {
  return TensorPlan{std::move(n), {rows, cols}, TensorPlan::matrix, scale / std::sqrt(static_cast<double>(cols))};
}

// o_proj's and down_proj's extra scale (GPT-2's), so the residual stream stays O(1) over the layers.
double residual_scale(const SyntheticModelSpec& s) { return 1.0 / std::sqrt(2.0 * s.n_layers); }

// DeepseekV3Attention's tensors (q_proj, or q_a_proj + q_a_layernorm + q_b_proj).
void plan_mla(const SyntheticModelSpec& s, const std::string& pre, double out_scale, std::vector<TensorPlan>& p) {
  const int64_t h = s.hidden_size, heads = s.n_heads, r = s.kv_lora_rank, dr = s.qk_rope_head_dim;
  const int64_t dq = s.qk_nope_head_dim + dr, dv = s.v_head_dim;
  if (s.q_lora_rank > 0) {
    p.push_back(mat(pre + "self_attn.q_a_proj.weight", s.q_lora_rank, h, 1.0));
    p.push_back({pre + "self_attn.q_a_layernorm.weight", {s.q_lora_rank}, TensorPlan::norm, 0.0});
    p.push_back(mat(pre + "self_attn.q_b_proj.weight", heads * dq, s.q_lora_rank, 1.0));
  } else {
    p.push_back(mat(pre + "self_attn.q_proj.weight", heads * dq, h, 1.0));
  }
  p.push_back(mat(pre + "self_attn.kv_a_proj_with_mqa.weight", r + dr, h, 1.0));
  p.push_back({pre + "self_attn.kv_a_layernorm.weight", {r}, TensorPlan::norm, 0.0});
  p.push_back(mat(pre + "self_attn.kv_b_proj.weight", heads * (s.qk_nope_head_dim + dv), r, 1.0));
  p.push_back(mat(pre + "self_attn.o_proj.weight", h, heads * dv, out_scale));
}

// A layer's attention tensors under `pre` ("model.layers.{l}.").
void plan_attention(const SyntheticModelSpec& s, int head_dim, const std::string& pre, std::vector<TensorPlan>& p) {
  const int64_t h = s.hidden_size, q = int64_t{s.n_heads} * head_dim, kv = int64_t{s.n_kv_heads} * head_dim;
  const double out_scale = residual_scale(s);
  if (is_deepseek(s.arch)) {
    plan_mla(s, pre, out_scale, p);
  } else if (s.arch == "phi3") {  // Phi3Attention: one qkv_proj, q rows then k then v
    p.push_back(mat(pre + "self_attn.qkv_proj.weight", q + 2 * kv, h, 1.0));
    p.push_back(mat(pre + "self_attn.o_proj.weight", h, q, out_scale));
  } else {
    p.push_back(mat(pre + "self_attn.q_proj.weight", q, h, 1.0));
    p.push_back(mat(pre + "self_attn.k_proj.weight", kv, h, 1.0));
    p.push_back(mat(pre + "self_attn.v_proj.weight", kv, h, 1.0));
    p.push_back(mat(pre + "self_attn.o_proj.weight", h, q, out_scale));
  }
  if (s.arch == "gpt_oss") {  // GptOssAttention: q/k/v/o biases and a sink logit per head
    p.push_back({pre + "self_attn.q_proj.bias", {q}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "self_attn.k_proj.bias", {kv}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "self_attn.v_proj.bias", {kv}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "self_attn.o_proj.bias", {h}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "self_attn.sinks", {int64_t{s.n_heads}}, TensorPlan::embedding, 1.0});
  }
  if (s.arch == "qwen2" || s.arch == "qwen2_moe" || s.arch == "glm4_moe") {  // Qwen2Attention, Glm4MoeAttention: q/k/v biases
    p.push_back({pre + "self_attn.q_proj.bias", {q}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "self_attn.k_proj.bias", {kv}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "self_attn.v_proj.bias", {kv}, TensorPlan::embedding, 0.02});
  }
  if (s.arch == "qwen3" || s.arch == "qwen3_moe" || s.arch == "glm4_moe") {  // per-head RMSNorm of q and k
    p.push_back({pre + "self_attn.q_norm.weight", {head_dim}, TensorPlan::norm, 0.0});
    p.push_back({pre + "self_attn.k_norm.weight", {head_dim}, TensorPlan::norm, 0.0});
  }
}

// A layer's MLP under `pre`: the sparse block when `sparse`, else the dense MLP (gpt_oss: always
// its stacked experts).
void plan_mlp(const SyntheticModelSpec& s, const std::string& pre, bool sparse, std::vector<TensorPlan>& p) {
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  const double out_scale = residual_scale(s);
  if (s.arch == "gpt_oss") {  // GptOssMLP: a biased router; experts stacked, transposed, gate/up interleaved
    const int64_t e = s.n_experts;
    p.push_back(mat(pre + "mlp.router.weight", e, h, 1.0));
    p.push_back({pre + "mlp.router.bias", {e}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "mlp.experts.gate_up_proj", {e, h, 2 * inter}, TensorPlan::matrix, 1.0 / std::sqrt(double(h))});
    p.push_back({pre + "mlp.experts.gate_up_proj_bias", {e, 2 * inter}, TensorPlan::embedding, 0.02});
    p.push_back({pre + "mlp.experts.down_proj", {e, inter, h}, TensorPlan::matrix, out_scale / std::sqrt(double(inter))});
    p.push_back({pre + "mlp.experts.down_proj_bias", {e, h}, TensorPlan::embedding, 0.02});
    return;
  }
  if (sparse) {  // the sparse block as the Hub stores it: one tensor per expert
    // Qwen3MoeSparseMoeBlock's (and DeepSeek's) names, or MixtralSparseMoeBlock's with its
    // experts intermediate_size wide.
    const bool mixtral = s.arch == "mixtral";
    const std::string block = pre + (mixtral ? "block_sparse_moe." : "mlp.");
    const std::array<const char*, 3> names = mixtral ? std::array{"w1", "w3", "w2"}
                                                     : std::array{"gate_proj", "up_proj", "down_proj"};
    const int64_t mi = mixtral ? inter : s.moe_intermediate_size;
    p.push_back(mat(block + "gate.weight", s.n_experts, h, 1.0));
    if (s.arch == "deepseek_v3" || s.arch == "glm4_moe")  // DeepseekV3TopkRouter's selection bias
      p.push_back({pre + "mlp.gate.e_score_correction_bias", {s.n_experts}, TensorPlan::embedding, 0.02});
    const bool qwen2 = s.arch == "qwen2_moe";
    if ((is_deepseek(s.arch) || s.arch == "glm4_moe" || qwen2) && s.n_shared_experts > 0) {
      // DeepseekV3MoE.shared_experts (Glm4MoeMoE's too), or Qwen2MoeSparseMoeBlock's one gated
      // shared_expert (n_shared_experts * moe_intermediate_size wide here).
      const int64_t si = int64_t{s.n_shared_experts} * mi;
      const std::string shared = pre + (qwen2 ? "mlp.shared_expert." : "mlp.shared_experts.");
      p.push_back(mat(shared + "gate_proj.weight", si, h, 1.0));
      p.push_back(mat(shared + "up_proj.weight", si, h, 1.0));
      p.push_back(mat(shared + "down_proj.weight", h, si, out_scale));
      if (qwen2) p.push_back(mat(pre + "mlp.shared_expert_gate.weight", 1, h, 1.0));
    }
    for (int e = 0; e < s.n_experts; ++e) {
      const std::string ex = block + "experts." + std::to_string(e) + ".";
      p.push_back(mat(ex + names[0] + ".weight", mi, h, 1.0));
      p.push_back(mat(ex + names[1] + ".weight", mi, h, 1.0));
      p.push_back(mat(ex + names[2] + ".weight", h, mi, out_scale));
    }
    return;
  }
  if (s.arch == "phi3") {  // Phi3MLP: one gate_up_proj, gate rows then up
    p.push_back(mat(pre + "mlp.gate_up_proj.weight", 2 * inter, h, 1.0));
  } else {
    p.push_back(mat(pre + "mlp.gate_proj.weight", inter, h, 1.0));
    p.push_back(mat(pre + "mlp.up_proj.weight", inter, h, 1.0));
  }
  p.push_back(mat(pre + "mlp.down_proj.weight", h, inter, out_scale));
}

// One decoder layer's tensors under `pre`.
void plan_layer(const SyntheticModelSpec& s, int head_dim, const std::string& pre, bool sparse, std::vector<TensorPlan>& p) {
  p.push_back({pre + "input_layernorm.weight", {int64_t{s.hidden_size}}, TensorPlan::norm, 0.0});
  plan_attention(s, head_dim, pre, p);
  p.push_back({pre + "post_attention_layernorm.weight", {int64_t{s.hidden_size}}, TensorPlan::norm, 0.0});
  plan_mlp(s, pre, sparse, p);
}

// DeepSeek-V3's (GLM-4.5's) MTP module j as the Hub's checkpoints store it, under model.layers.{n_layers + j}.:
// copies of the model's embedding and lm_head, enorm and hnorm [h], eh_proj [h, 2h] (it maps
// [enorm(embed(next token)); hnorm(hidden)]), a decoder layer by the checkpoint's rule for that
// index (sparse past first_k_dense_replace, as in the Hub's models) and shared_head.norm [h].
void plan_mtp_module(const SyntheticModelSpec& s, const ModelConfig& config, int head_dim, int j, std::vector<TensorPlan>& p) {
  const int64_t h = s.hidden_size, v = s.vocab_size;
  const int l = s.n_layers + j;
  const std::string pre = "model.layers." + std::to_string(l) + ".";
  p.push_back({pre + "embed_tokens.weight", {v, h}, TensorPlan::embedding, 0.02, "model.embed_tokens.weight"});
  p.push_back({pre + "enorm.weight", {h}, TensorPlan::norm, 0.0});
  p.push_back({pre + "hnorm.weight", {h}, TensorPlan::norm, 0.0});
  p.push_back(mat(pre + "eh_proj.weight", h, 2 * h, 1.0));
  plan_layer(s, head_dim, pre, config.is_moe_layer(l), p);
  p.push_back({pre + "shared_head.norm.weight", {h}, TensorPlan::norm, 0.0});
  p.push_back({pre + "shared_head.head.weight", {v, h}, TensorPlan::embedding, 0.02,
               s.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"});
}

// Mamba2ForCausalLM's tensors (backbone.*), with a trained model's scales: A = -exp(A_log) about
// -1.6, softplus(dt_bias) about 0.02 (a state that remembers tens of tokens), D about 1.
// One Mamba2 mixer's tensors under `m` (its prefix, ending in "mixer.").
void plan_mamba2_mixer(const SyntheticModelSpec& s, const SsmLayout& l, const std::string& m, std::vector<TensorPlan>& p) {
  const int64_t h = s.hidden_size;
  p.push_back(mat(m + "in_proj.weight", l.proj_width(), h, 1.0));
  p.push_back({m + "conv1d.weight", {l.conv_dim(), 1, l.conv_kernel}, TensorPlan::embedding,
               1.0 / std::sqrt(static_cast<double>(l.conv_kernel))});
  p.push_back({m + "conv1d.bias", {l.conv_dim()}, TensorPlan::embedding, 0.02});
  p.push_back({m + "dt_bias", {l.n_heads}, TensorPlan::embedding, 0.5, {}, -4.0});
  p.push_back({m + "A_log", {l.n_heads}, TensorPlan::embedding, 0.5, {}, 0.5});
  p.push_back({m + "D", {l.n_heads}, TensorPlan::embedding, 0.1, {}, 1.0});
  p.push_back({m + "norm.weight", {l.d_inner()}, TensorPlan::norm, 0.0});
  p.push_back(mat(m + "out_proj.weight", h, l.d_inner(), residual_scale(s)));
}

std::vector<TensorPlan> plan_mamba2(const SyntheticModelSpec& s, const ModelConfig& config) {
  const int64_t h = s.hidden_size, v = s.vocab_size;
  std::vector<TensorPlan> p;
  p.push_back({"backbone.embeddings.weight", {v, h}, TensorPlan::embedding, 0.02});
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string pre = "backbone.layers." + std::to_string(i) + ".";
    p.push_back({pre + "norm.weight", {h}, TensorPlan::norm, 0.0});
    plan_mamba2_mixer(s, config.ssm.layout, pre + "mixer.", p);
  }
  p.push_back({"backbone.norm_f.weight", {h}, TensorPlan::norm, 0.0});
  if (!s.tie_embeddings) p.push_back({"lm_head.weight", {v, h}, TensorPlan::embedding, 0.02});
  return p;
}

// MambaForCausalLM's tensors: A = -exp(A_log) about -2.7 per state element, softplus(dt_proj's
// bias) about 0.02, D about 1.
std::vector<TensorPlan> plan_mamba1(const SyntheticModelSpec& s, const ModelConfig& config) {
  const int64_t h = s.hidden_size, v = s.vocab_size, di = config.ssm.layout.d_inner();
  const int64_t ns = config.ssm.layout.state_size, k = config.ssm.layout.conv_kernel, r = config.ssm.dt_rank;
  std::vector<TensorPlan> p;
  p.push_back({"backbone.embeddings.weight", {v, h}, TensorPlan::embedding, 0.02});
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string pre = "backbone.layers." + std::to_string(i) + ".";
    p.push_back({pre + "norm.weight", {h}, TensorPlan::norm, 0.0});
    p.push_back(mat(pre + "mixer.in_proj.weight", 2 * di, h, 1.0));
    p.push_back({pre + "mixer.conv1d.weight", {di, 1, k}, TensorPlan::embedding, 1.0 / std::sqrt(static_cast<double>(k))});
    p.push_back({pre + "mixer.conv1d.bias", {di}, TensorPlan::embedding, 0.02});
    p.push_back(mat(pre + "mixer.x_proj.weight", r + 2 * ns, di, 1.0));
    p.push_back(mat(pre + "mixer.dt_proj.weight", di, r, 0.1));
    p.push_back({pre + "mixer.dt_proj.bias", {di}, TensorPlan::embedding, 0.5, {}, -4.0});
    p.push_back({pre + "mixer.A_log", {di, ns}, TensorPlan::embedding, 0.5, {}, 1.0});
    p.push_back({pre + "mixer.D", {di}, TensorPlan::embedding, 0.1, {}, 1.0});
    p.push_back(mat(pre + "mixer.out_proj.weight", h, di, residual_scale(s)));
  }
  p.push_back({"backbone.norm_f.weight", {h}, TensorPlan::norm, 0.0});
  if (!s.tie_embeddings) p.push_back({"lm_head.weight", {v, h}, TensorPlan::embedding, 0.02});
  return p;
}

// NemotronHForCausalLM's tensors: per block its norm and the mixer (plan_mamba2_mixer),
// attention or relu2 MLP under mixer.
std::vector<TensorPlan> plan_nemotron_h(const SyntheticModelSpec& s, const ModelConfig& config) {
  const int64_t h = s.hidden_size, v = s.vocab_size, inter = s.intermediate_size;
  const int64_t q = int64_t{config.n_heads} * config.head_dim, kv = int64_t{config.n_kv_heads} * config.head_dim;
  std::vector<TensorPlan> p;
  p.push_back({"backbone.embeddings.weight", {v, h}, TensorPlan::embedding, 0.02});
  for (int i = 0; i < config.n_layers; ++i) {
    const std::string pre = "backbone.layers." + std::to_string(i) + ".", m = pre + "mixer.";
    p.push_back({pre + "norm.weight", {h}, TensorPlan::norm, 0.0});
    if (config.ssm_layers[static_cast<size_t>(i)]) {
      plan_mamba2_mixer(s, config.ssm.layout, m, p);
    } else if (config.mlp_layers[static_cast<size_t>(i)]) {
      p.push_back(mat(m + "up_proj.weight", inter, h, 1.0));
      p.push_back(mat(m + "down_proj.weight", h, inter, residual_scale(s)));
    } else {
      p.push_back(mat(m + "q_proj.weight", q, h, 1.0));
      p.push_back(mat(m + "k_proj.weight", kv, h, 1.0));
      p.push_back(mat(m + "v_proj.weight", kv, h, 1.0));
      p.push_back(mat(m + "o_proj.weight", h, q, residual_scale(s)));
    }
  }
  p.push_back({"backbone.norm_f.weight", {h}, TensorPlan::norm, 0.0});
  if (!s.tie_embeddings) p.push_back({"lm_head.weight", {v, h}, TensorPlan::embedding, 0.02});
  return p;
}

// Qwen3_5ForCausalLM's tensors (model.*): per layer the Gated DeltaNet (in_proj_qkv, _z, _b, _a, a
// conv without bias, A = -exp(A_log) about -1.6 and softplus(dt_bias) about 0.02 as plan_mamba2's,
// the gated norm's weight about 1) or gated attention (q_proj twice as tall: each head's query,
// then its gate), then the SwiGLU; the zero-centred norms (input, post-attention, q/k, final)
// about 0, as they scale by 1 + w.
std::vector<TensorPlan> plan_qwen3_5(const SyntheticModelSpec& s, const ModelConfig& config) {
  const int64_t h = s.hidden_size, v = s.vocab_size, inter = s.intermediate_size, hd = config.head_dim;
  const int64_t q = int64_t{config.n_heads} * hd, kv = int64_t{config.n_kv_heads} * hd;
  const SsmLayout& l = config.ssm.layout;
  const auto centred = [](std::string name, int64_t n) { return TensorPlan{std::move(name), {n}, TensorPlan::embedding, 0.02}; };
  std::vector<TensorPlan> p;
  p.push_back({"model.embed_tokens.weight", {v, h}, TensorPlan::embedding, 0.02});
  for (int i = 0; i < config.n_layers; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    p.push_back(centred(pre + "input_layernorm.weight", h));
    if (config.ssm_layers[static_cast<size_t>(i)]) {
      const std::string m = pre + "linear_attn.";
      p.push_back(mat(m + "in_proj_qkv.weight", l.conv_dim(), h, 1.0));
      p.push_back(mat(m + "in_proj_z.weight", l.d_inner(), h, 1.0));
      p.push_back(mat(m + "in_proj_b.weight", l.n_heads, h, 1.0));
      p.push_back(mat(m + "in_proj_a.weight", l.n_heads, h, 1.0));
      p.push_back({m + "conv1d.weight", {l.conv_dim(), 1, l.conv_kernel}, TensorPlan::embedding,
                   1.0 / std::sqrt(static_cast<double>(l.conv_kernel))});
      p.push_back({m + "dt_bias", {l.n_heads}, TensorPlan::embedding, 0.5, {}, -4.0});
      p.push_back({m + "A_log", {l.n_heads}, TensorPlan::embedding, 0.5, {}, 0.5});
      p.push_back({m + "norm.weight", {l.head_dim}, TensorPlan::norm, 0.0});
      p.push_back(mat(m + "out_proj.weight", h, l.d_inner(), residual_scale(s)));
    } else {
      const std::string a = pre + "self_attn.";
      p.push_back(mat(a + "q_proj.weight", 2 * q, h, 1.0));
      p.push_back(mat(a + "k_proj.weight", kv, h, 1.0));
      p.push_back(mat(a + "v_proj.weight", kv, h, 1.0));
      p.push_back(mat(a + "o_proj.weight", h, q, residual_scale(s)));
      p.push_back(centred(a + "q_norm.weight", hd));
      p.push_back(centred(a + "k_norm.weight", hd));
    }
    p.push_back(centred(pre + "post_attention_layernorm.weight", h));
    p.push_back(mat(pre + "mlp.gate_proj.weight", inter, h, 1.0));
    p.push_back(mat(pre + "mlp.up_proj.weight", inter, h, 1.0));
    p.push_back(mat(pre + "mlp.down_proj.weight", h, inter, residual_scale(s)));
  }
  p.push_back(centred("model.norm.weight", h));
  if (!s.tie_embeddings) p.push_back({"lm_head.weight", {v, h}, TensorPlan::embedding, 0.02});
  return p;
}

// nemotron_h's blocks: layer_pattern, or "M-M-M*-" repeated over n_layers.
std::string nemotron_pattern(const SyntheticModelSpec& s) {
  if (!s.layer_pattern.empty()) return s.layer_pattern;
  static constexpr std::string_view kCycle = "M-M-M*-";
  std::string p;
  for (int l = 0; l < s.n_layers; ++l) p += kCycle[static_cast<size_t>(l) % kCycle.size()];
  return p;
}

std::vector<TensorPlan> plan_tensors(const SyntheticModelSpec& s, const ModelConfig& config, int head_dim) {
  if (s.arch == "mamba2") return plan_mamba2(s, config);
  if (s.arch == "mamba") return plan_mamba1(s, config);
  if (s.arch == "nemotron_h") return plan_nemotron_h(s, config);
  if (s.arch == "qwen3_5") return plan_qwen3_5(s, config);
  const int64_t h = s.hidden_size, v = s.vocab_size;
  std::vector<TensorPlan> p;
  p.push_back({"model.embed_tokens.weight", {v, h}, TensorPlan::embedding, 0.02});
  for (int l = 0; l < s.n_layers; ++l)
    plan_layer(s, head_dim, "model.layers." + std::to_string(l) + ".", config.is_moe_layer(l), p);
  p.push_back({"model.norm.weight", {h}, TensorPlan::norm, 0.0});
  if (!s.tie_embeddings) p.push_back({"lm_head.weight", {v, h}, TensorPlan::embedding, 0.02});
  for (int j = 0; j < s.n_mtp_layers; ++j) plan_mtp_module(s, config, head_dim, j, p);
  return p;
}

// The spec's FP8 scheme (scaling none when the checkpoint is not quantized).
QuantConfig fp8_scheme(const SyntheticModelSpec& s) {
  QuantConfig q;
  if (s.fp8_block > 0) {
    q.scaling = WeightScaling::block;
    q.method = "fp8";
    q.block_rows = q.block_cols = s.fp8_block;
  } else if (!s.fp8_compressed.empty()) {
    q.scaling = s.fp8_compressed == "channel" ? WeightScaling::channel : WeightScaling::tensor;
    q.method = "compressed-tensors";
    q.scale_is_inverse = false;
  }
  q.ignore = {"lm_head"};
  return q;
}

ojson quantization_config_json(const QuantConfig& q) {
  if (q.method == "fp8")
    return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
            {"weight_block_size", {q.block_rows, q.block_cols}}, {"modules_to_not_convert", q.ignore}};
  const ojson weights{{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"dynamic", false},
                      {"strategy", q.scaling == WeightScaling::channel ? "channel" : "tensor"},
                      {"group_size", nullptr}, {"block_structure", nullptr}};
  const ojson inputs{{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"dynamic", true}, {"strategy", "token"}};
  return {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"}, {"quantization_status", "compressed"},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs}}}}},
          {"ignore", q.ignore}};
}

// The nn.Linear weights a quantizer converts: projections, not routers (mlp.gate) or tables, nor
// the MTP's eh_proj (DeepSeek-V3's FP8 checkpoint keeps it bf16: SGLang and vLLM load it into a
// plain nn.Linear).
bool is_quantized(const TensorPlan& t, const QuantConfig& q) {
  return q.quantized() && t.kind == TensorPlan::matrix && !q.ignored(t.name) && !t.name.ends_with(".eh_proj.weight") &&
         (t.name.ends_with("_proj.weight") || t.name.ends_with("_proj_with_mqa.weight"));
}

// The scale tensor's shape beside quantized weight t (quantize_fp8's grid; [1] per tensor).
std::vector<int64_t> scale_shape(const TensorPlan& t, const QuantConfig& q) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (q.scaling == WeightScaling::block)
    return {(rows + q.block_rows - 1) / q.block_rows, (cols + q.block_cols - 1) / q.block_cols};
  if (q.scaling == WeightScaling::channel) return {rows, 1};
  return {1};
}

const char* st_dtype(DType d) { return d == DType::f32 ? "F32" : d == DType::f16 ? "F16" : "BF16"; }
const char* torch_dtype(DType d) { return d == DType::f32 ? "float32" : d == DType::f16 ? "float16" : "bfloat16"; }

// The stream of t's values: seeded by its name, or by the name of the tensor it copies.
Rng values_rng(const TensorPlan& t, const SyntheticModelSpec& s) {
  return Rng(name_seed(s.seed, t.values_of.empty() ? t.name : t.values_of));
}

// Generates one tensor's values and writes them in the spec's dtype, 64K elements at a time.
void write_values(std::ofstream& out, const TensorPlan& t, const SyntheticModelSpec& s) {
  Rng rng = values_rng(t, s);
  constexpr int64_t kChunk = 1 << 16;
  std::vector<uint8_t> buf(static_cast<size_t>(kChunk) * 4);
  const size_t elem = dtype_size(s.dtype);
  for (int64_t done = 0; done < t.numel(); done += kChunk) {
    const int64_t n = std::min(kChunk, t.numel() - done);
    for (int64_t i = 0; i < n; ++i) {
      const double z = rng.normal();
      const float f = static_cast<float>(t.kind == TensorPlan::norm ? 1.0 + 0.02 * z : t.mean + t.std * z);
      uint8_t* dst = buf.data() + static_cast<size_t>(i) * elem;
      if (s.dtype == DType::f32) { std::memcpy(dst, &f, 4); continue; }
      const uint16_t h = s.dtype == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
      std::memcpy(dst, &h, 2);
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(static_cast<size_t>(n) * elem));
  }
}

// A quantized weight: its values as write_values draws them, quantized whole, then the codes and
// the F32 scales (the next tensor of the header).
void write_fp8_values(std::ofstream& out, const TensorPlan& t, const SyntheticModelSpec& s, const QuantConfig& q) {
  Rng rng = values_rng(t, s);
  std::vector<float> w(static_cast<size_t>(t.numel()));
  for (float& f : w) f = static_cast<float>(t.std * rng.normal());
  std::vector<uint8_t> codes(w.size());
  const std::vector<float> scales =
      quantize_fp8(w.data(), t.shape[0], t.shape[1], q.scaling, q.block_rows, q.block_cols, codes.data());
  out.write(reinterpret_cast<const char*>(codes.data()), static_cast<std::streamsize>(codes.size()));
  out.write(reinterpret_cast<const char*>(scales.data()), static_cast<std::streamsize>(scales.size() * 4));
}

Status write_safetensors(const SyntheticModelSpec& s, const std::vector<TensorPlan>& plan, const fs::path& path) {
  ojson header = ojson::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  const size_t elem = dtype_size(s.dtype);
  const QuantConfig q = fp8_scheme(s);
  for (const auto& t : plan) {
    if (is_quantized(t, q)) {
      const std::vector<int64_t> ss = scale_shape(t, q);
      const uint64_t bytes = static_cast<uint64_t>(t.numel()), scale_bytes = static_cast<uint64_t>(ss[0] * (ss.size() > 1 ? ss[1] : 1)) * 4;
      header[t.name] = {{"dtype", "F8_E4M3"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
      header[q.scale_name(t.name)] = {{"dtype", "F32"}, {"shape", ss}, {"data_offsets", {offset + bytes, offset + bytes + scale_bytes}}};
      offset += bytes + scale_bytes;
      continue;
    }
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * elem;
    header[t.name] = {{"dtype", st_dtype(s.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as the reference writer pads
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create " + path.string());
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : plan) {
    if (is_quantized(t, q)) write_fp8_values(out, t, s, q);
    else write_values(out, t, s);
  }
  out.close();
  if (!out) return io_error("error while writing " + path.string() + " (disk full?)");
  return Status::ok();
}

// The shortest decimal that reads back as the same float (1e-05, not 9.99999974738e-06).
double clean(float f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(f));
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

// The routed and shared experts' fields DeepSeek's and GLM-4.5's configs share.
void grouped_experts_json(const SyntheticModelSpec& s, ojson& c) {
  c["n_routed_experts"] = s.n_experts;
  c["num_experts_per_tok"] = s.n_experts_per_tok;
  c["moe_intermediate_size"] = s.moe_intermediate_size;
  c["n_shared_experts"] = s.n_shared_experts;
  c["first_k_dense_replace"] = s.first_k_dense_replace;
  c["n_group"] = s.n_group;
  c["topk_group"] = s.topk_group;
  c["routed_scaling_factor"] = clean(s.routed_scaling_factor);
}

// DeepseekV2Config / DeepseekV3Config's fields, named as the Hub's configs name them.
void deepseek_config_json(const SyntheticModelSpec& s, ojson& c) {
  const bool v3 = s.arch == "deepseek_v3";
  c["architectures"] = {v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
  c.erase("head_dim");  // transformers sets it to qk_rope_head_dim
  c.erase("use_sliding_window");
  c["num_key_value_heads"] = s.n_heads;
  c["q_lora_rank"] = s.q_lora_rank > 0 ? ojson(s.q_lora_rank) : ojson(nullptr);
  c["kv_lora_rank"] = s.kv_lora_rank;
  c["qk_nope_head_dim"] = s.qk_nope_head_dim;
  c["qk_rope_head_dim"] = s.qk_rope_head_dim;
  c["v_head_dim"] = s.v_head_dim;
  grouped_experts_json(s, c);
  c["moe_layer_freq"] = 1;
  c["norm_topk_prob"] = v3 && s.norm_topk_prob;
  c["scoring_func"] = v3 ? "sigmoid" : "softmax";
  c["topk_method"] = v3 ? "noaux_tc" : s.n_group > 1 ? "group_limited_greedy" : "greedy";
  c["num_nextn_predict_layers"] = v3 ? s.n_mtp_layers : 0;
  if (v3) c["rope_interleave"] = true;
}

// Glm4MoeConfig's fields as GLM-4.5's config.json writes them (q/k norms and attention biases
// on, half of each head rotated, sigmoid routing; SyntheticModelSpec::n_mtp_layers MTP layers).
void glm4_moe_config_json(const SyntheticModelSpec& s, ojson& c) {
  c["architectures"] = {"Glm4MoeForCausalLM"};
  c.erase("use_sliding_window");
  c.erase("mlp_bias");
  c.erase("pretraining_tp");
  c["attention_bias"] = true;
  c["use_qk_norm"] = true;
  c["partial_rotary_factor"] = 0.5;
  grouped_experts_json(s, c);
  c["norm_topk_prob"] = s.norm_topk_prob;
  c["num_nextn_predict_layers"] = s.n_mtp_layers;
}

ojson config_json(const SyntheticModelSpec& s, int head_dim) {
  if (s.arch == "mamba") {  // MambaConfig as the state-spaces/mamba-*-hf checkpoints write it
    return ojson{{"architectures", {"MambaForCausalLM"}}, {"bos_token_id", kSyntheticBosId}, {"conv_kernel", s.conv_kernel},
                 {"eos_token_id", kSyntheticEosId}, {"expand", 2}, {"hidden_act", "silu"}, {"hidden_size", s.hidden_size},
                 {"layer_norm_epsilon", clean(s.rms_eps)}, {"model_type", "mamba"}, {"num_hidden_layers", s.n_layers},
                 {"pad_token_id", 0}, {"residual_in_fp32", true}, {"state_size", s.ssm_state},
                 {"tie_word_embeddings", s.tie_embeddings}, {"time_step_rank", "auto"},
                 {"torch_dtype", torch_dtype(s.dtype)}, {"transformers_version", "4.44.0"}, {"use_bias", false},
                 {"use_cache", true}, {"use_conv_bias", true}, {"vocab_size", s.vocab_size}};
  }
  if (s.arch == "nemotron_h") {  // NemotronHConfig as the Hub's Nemotron-H configs write it
    return ojson{{"architectures", {"NemotronHForCausalLM"}}, {"attention_bias", false},
                 {"bos_token_id", kSyntheticBosId}, {"chunk_size", 128}, {"conv_kernel", s.conv_kernel},
                 {"eos_token_id", kSyntheticEosId}, {"expand", 2}, {"head_dim", head_dim},
                 {"hidden_size", s.hidden_size}, {"hybrid_override_pattern", nemotron_pattern(s)},
                 {"intermediate_size", s.intermediate_size}, {"layer_norm_epsilon", clean(s.rms_eps)},
                 {"mamba_head_dim", s.ssm_head_dim}, {"mamba_hidden_act", "silu"},
                 {"mamba_num_heads", s.ssm_heads > 0 ? s.ssm_heads : s.n_heads},
                 {"max_position_embeddings", s.max_position}, {"mlp_bias", false}, {"mlp_hidden_act", "relu2"},
                 {"model_type", "nemotron_h"}, {"n_groups", s.ssm_groups},
                 {"num_attention_heads", s.n_heads}, {"num_hidden_layers", static_cast<int>(nemotron_pattern(s).size())},
                 {"num_key_value_heads", s.n_kv_heads}, {"pad_token_id", 0}, {"ssm_state_size", s.ssm_state},
                 {"tie_word_embeddings", s.tie_embeddings}, {"time_step_limit", {0.0, "Infinity"}},
                 {"torch_dtype", torch_dtype(s.dtype)}, {"transformers_version", "4.44.0"}, {"use_bias", false},
                 {"use_cache", true}, {"use_conv_bias", true}, {"vocab_size", s.vocab_size}};
  }
  if (s.arch == "qwen3_5") {  // Qwen3_5TextConfig as transformers 5 writes it (Qwen3.5's text_config)
    ojson types = ojson::array();
    for (int l = 0; l < s.n_layers; ++l) types.push_back((l + 1) % 4 == 0 ? "full_attention" : "linear_attention");
    return ojson{{"architectures", {"Qwen3_5ForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
                 {"bos_token_id", kSyntheticBosId}, {"eos_token_id", kSyntheticEosId}, {"head_dim", head_dim},
                 {"hidden_act", "silu"}, {"hidden_size", s.hidden_size}, {"initializer_range", 0.02},
                 {"intermediate_size", s.intermediate_size}, {"layer_types", types},
                 {"linear_conv_kernel_dim", s.conv_kernel}, {"linear_key_head_dim", s.ssm_state},
                 {"linear_num_key_heads", s.ssm_groups}, {"linear_num_value_heads", s.ssm_heads > 0 ? s.ssm_heads : s.n_heads},
                 {"linear_value_head_dim", s.ssm_head_dim}, {"max_position_embeddings", s.max_position},
                 {"model_type", "qwen3_5_text"}, {"num_attention_heads", s.n_heads}, {"num_hidden_layers", s.n_layers},
                 {"num_key_value_heads", s.n_kv_heads}, {"pad_token_id", 0}, {"rms_norm_eps", clean(s.rms_eps)},
                 {"rope_parameters", {{"partial_rotary_factor", 0.25}, {"rope_theta", clean(s.rope_theta)}, {"rope_type", "default"}}},
                 {"tie_word_embeddings", s.tie_embeddings}, {"torch_dtype", torch_dtype(s.dtype)},
                 {"transformers_version", "5.25.0"}, {"use_cache", true}, {"vocab_size", s.vocab_size}};
  }
  if (s.arch == "mamba2") {  // Mamba2Config as transformers writes it
    const int64_t inner = int64_t{s.n_heads} * head_dim;
    return ojson{{"architectures", {"Mamba2ForCausalLM"}}, {"bos_token_id", kSyntheticBosId}, {"chunk_size", 256},
                 {"conv_kernel", s.conv_kernel}, {"eos_token_id", kSyntheticEosId},
                 {"expand", s.hidden_size > 0 ? inner / s.hidden_size : 0}, {"head_dim", head_dim},
                 {"hidden_act", "silu"}, {"hidden_size", s.hidden_size}, {"layer_norm_epsilon", clean(s.rms_eps)},
                 {"model_type", "mamba2"}, {"n_groups", s.ssm_groups}, {"num_heads", s.n_heads},
                 {"num_hidden_layers", s.n_layers}, {"pad_token_id", 0}, {"residual_in_fp32", true},
                 {"state_size", s.ssm_state}, {"tie_word_embeddings", s.tie_embeddings},
                 {"time_step_limit", {0.0, "Infinity"}}, {"torch_dtype", torch_dtype(s.dtype)},
                 {"transformers_version", "4.44.0"}, {"use_bias", false}, {"use_cache", true},
                 {"use_conv_bias", true}, {"vocab_size", s.vocab_size}};
  }
  const std::string architecture = s.arch == "qwen2" ? "Qwen2ForCausalLM" : s.arch == "qwen3" ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  ojson c{{"architectures", {architecture}}, {"attention_bias", false}, {"attention_dropout", 0.0},
               {"bos_token_id", kSyntheticBosId}, {"eos_token_id", kSyntheticEosId}, {"head_dim", head_dim},
               {"hidden_act", "silu"}, {"hidden_size", s.hidden_size}, {"initializer_range", 0.02},
               {"intermediate_size", s.intermediate_size}, {"max_position_embeddings", s.max_position},
               {"mlp_bias", false}, {"model_type", s.arch}, {"num_attention_heads", s.n_heads},
               {"num_hidden_layers", s.n_layers}, {"num_key_value_heads", s.n_kv_heads}, {"pretraining_tp", 1},
               {"rms_norm_eps", clean(s.rms_eps)}, {"rope_scaling", nullptr}, {"rope_theta", clean(s.rope_theta)},
               {"tie_word_embeddings", s.tie_embeddings}, {"torch_dtype", torch_dtype(s.dtype)},
               {"transformers_version", "4.44.0"}, {"use_cache", true}, {"vocab_size", s.vocab_size}};
  if (s.arch == "phi3") {  // Phi3Config: no attention_bias; the window, when set, always applies
    c["architectures"] = {"Phi3ForCausalLM"};
    c.erase("attention_bias");
    c["sliding_window"] = nullptr;
  } else if (s.arch == "mixtral") {  // MixtralConfig (the Hub's Mixtral-8x7B names)
    c["architectures"] = {"MixtralForCausalLM"};
    c.erase("attention_bias");
    c.erase("mlp_bias");
    c.erase("pretraining_tp");
    c["sliding_window"] = nullptr;
    c["num_local_experts"] = s.n_experts;
    c["num_experts_per_tok"] = s.n_experts_per_tok;
    c["output_router_logits"] = false;
    c["router_aux_loss_coef"] = 0.02;
    c["router_jitter_noise"] = 0.0;
  } else if (s.arch == "gpt_oss") {  // GptOssConfig as the Hub's gpt-oss-20b/120b configs write it
    c["architectures"] = {"GptOssForCausalLM"};
    c["attention_bias"] = true;
    c.erase("mlp_bias");
    c.erase("pretraining_tp");
    c["num_local_experts"] = s.n_experts;
    c["num_experts_per_tok"] = s.n_experts_per_tok;
    c["experts_per_token"] = s.n_experts_per_tok;
    c["sliding_window"] = 128;
    ojson types = ojson::array();
    for (int l = 0; l < s.n_layers; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
    c["layer_types"] = types;
    c["rope_theta"] = 150000;
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                         {"original_max_position_embeddings", 4096}, {"truncate", false}};
    c["swiglu_limit"] = 7.0;
    c["output_router_logits"] = false;
    c["router_aux_loss_coef"] = 0.9;
  } else if (s.arch != "llama") {
    c["use_sliding_window"] = false;
  }
  if (s.arch == "qwen3_moe" || s.arch == "qwen2_moe") {  // the Hub's Qwen3-MoE / Qwen2-MoE config names
    c["architectures"] = {s.arch == "qwen3_moe" ? "Qwen3MoeForCausalLM" : "Qwen2MoeForCausalLM"};
    c["num_experts"] = s.n_experts;
    c["num_experts_per_tok"] = s.n_experts_per_tok;
    c["moe_intermediate_size"] = s.moe_intermediate_size;
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["decoder_sparse_step"] = s.decoder_sparse_step;
    c["mlp_only_layers"] = s.mlp_only_layers;
    c["output_router_logits"] = false;
    c["router_aux_loss_coef"] = 0.001;
    if (s.arch == "qwen2_moe") c["shared_expert_intermediate_size"] = s.n_shared_experts * s.moe_intermediate_size;
  }
  if (s.arch == "glm4_moe") glm4_moe_config_json(s, c);
  if (is_deepseek(s.arch)) deepseek_config_json(s, c);
  if (const QuantConfig q = fp8_scheme(s); q.quantized()) c["quantization_config"] = quantization_config_json(q);
  return c;
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create " + path.string());
  out << text << '\n';
  out.close();
  if (!out) return io_error("error while writing " + path.string());
  return Status::ok();
}

}  // namespace

Status write_synthetic_model(const SyntheticModelSpec& s, const std::string& out_dir) {
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "qwen3_moe" && s.arch != "qwen2_moe" &&
      s.arch != "mixtral" && s.arch != "phi3" && s.arch != "gpt_oss" && s.arch != "glm4_moe" && !is_deepseek(s.arch) &&
      s.arch != "mamba2" && s.arch != "mamba" && s.arch != "nemotron_h" && s.arch != "qwen3_5")
    return invalid_argument("make-model: arch '" + s.arch +
                            "' is not supported; supported: llama, qwen2, qwen3, qwen3_moe, qwen2_moe, mixtral, phi3, "
                            "gpt_oss, glm4_moe, deepseek_v2, deepseek_v3, mamba2, mamba, nemotron_h, qwen3_5");
  const bool state_space = s.arch == "mamba2" || s.arch == "mamba" || s.arch == "nemotron_h" || s.arch == "qwen3_5";
  if (state_space && (s.fp8_block > 0 || !s.fp8_compressed.empty()))
    return invalid_argument("make-model: " + s.arch + " is not written as an FP8 checkpoint");
  if (!s.layer_pattern.empty() && s.arch != "nemotron_h")
    return invalid_argument("make-model: --layer-pattern is for nemotron_h (its M, *, - blocks)");
  if (s.arch == "gpt_oss" && (s.fp8_block > 0 || !s.fp8_compressed.empty()))
    return invalid_argument("make-model: gpt_oss is not written as an FP8 checkpoint (its experts are MXFP4 on the Hub)");
  if (s.dtype != DType::f32 && s.dtype != DType::f16 && s.dtype != DType::bf16)
    return invalid_argument(std::string("make-model: dtype ") + dtype_name(s.dtype) + " is not supported; use f32, f16 or bf16");
  if (s.fp8_block < 0 || (s.fp8_block > 0 && !s.fp8_compressed.empty()))
    return invalid_argument("make-model: --fp8-block must be > 0 and not combined with --fp8-compressed");
  if (!s.fp8_compressed.empty() && s.fp8_compressed != "channel" && s.fp8_compressed != "tensor")
    return invalid_argument("make-model: --fp8-compressed '" + s.fp8_compressed + "' is not one of: channel, tensor");
  if (s.n_mtp_layers < 0)
    return invalid_argument("make-model: --mtp-layers must be >= 0, got " + std::to_string(s.n_mtp_layers));
  if (s.n_mtp_layers > 0 && s.arch != "deepseek_v3" && s.arch != "glm4_moe")
    return invalid_argument("make-model: --mtp-layers writes DeepSeek-V3's and GLM-4.5's MTP modules "
                            "(num_nextn_predict_layers): arch deepseek_v3 or glm4_moe, not '" + s.arch + "'");
  if (s.vocab_size < kSyntheticMinVocab)
    return invalid_argument("make-model: vocab_size must be >= 259 (3 special tokens + 256 bytes), got " +
                            std::to_string(s.vocab_size));
  const int head_dim = s.head_dim > 0 ? s.head_dim : (s.n_heads > 0 ? s.hidden_size / s.n_heads : 0);
  const ojson config = config_json(s, head_dim);
  auto parsed = parse_hf_config(config.dump());  // the same checks a loader applies
  if (!parsed) return invalid_argument("make-model: " + parsed.status().message());

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return io_error("cannot create directory " + out_dir + ": " + ec.message());
  const fs::path dir(out_dir);
  BRIGADE_RETURN_IF_ERROR(write_text(dir / "config.json", config.dump(2)));
  const ojson gen{{"_from_model_config", true}, {"bos_token_id", kSyntheticBosId},
                  {"eos_token_id", kSyntheticEosId}, {"transformers_version", "4.44.0"}};
  BRIGADE_RETURN_IF_ERROR(write_text(dir / "generation_config.json", gen.dump(2)));
  BRIGADE_ASSIGN_OR_RETURN(std::string tok, synthetic_tokenizer_json(s.vocab_size));
  BRIGADE_RETURN_IF_ERROR(write_text(dir / "tokenizer.json", tok));
  BRIGADE_RETURN_IF_ERROR(write_text(dir / "tokenizer_config.json", synthetic_tokenizer_config_json(s.max_position, s.arch)));
  return write_safetensors(s, plan_tensors(s, *parsed, head_dim), dir / "model.safetensors");
}

}  // namespace brigade
