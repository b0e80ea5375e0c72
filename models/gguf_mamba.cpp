#include "models/gguf_mamba.h"

#include <algorithm>
#include <cmath>

#include "models/gguf_moe.h"
#include "models/gguf_qwen35.h"

namespace brigade {
namespace {

// A count per block (`key` an array) or one for all (a scalar; absent: 0).
Expected<std::vector<int>> per_block(const GgufFile& g, const std::string& key, int n_layers) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) return std::vector<int>(static_cast<size_t>(n_layers), 0);
  if (v->type != GgufType::array) {
    BRIGADE_ASSIGN_OR_RETURN(const int64_t n, g.get_int(key));
    if (n < 0 || n > INT32_MAX) return corrupt(g.path() + ": metadata '" + key + "' is out of range");
    return std::vector<int>(static_cast<size_t>(n_layers), static_cast<int>(n));
  }
  if (v->numbers.size() != static_cast<size_t>(n_layers))
    return corrupt(g.path() + ": metadata '" + key + "' must hold one count per block (" + std::to_string(n_layers) + ")");
  std::vector<int> out;
  for (double n : v->numbers) {
    if (!(n >= 0.0) || n > INT32_MAX || n != std::floor(n))
      return corrupt(g.path() + ": metadata '" + key + "' holds a count that is not a whole number >= 0");
    out.push_back(static_cast<int>(n));
  }
  return out;
}

// The one nonzero value of `counts` (0 when all are 0); corrupt naming `key` when they differ.
Expected<int> shared_count(const GgufFile& g, const std::string& key, const std::vector<int>& counts) {
  int v = 0;
  for (int n : counts) {
    if (n == 0) continue;
    if (v != 0 && n != v)
      return corrupt(g.path() + ": metadata '" + key + "' holds different nonzero counts (" + std::to_string(v) + ", " +
                     std::to_string(n) + "); brigade's blocks of one kind share one");
    v = n;
  }
  return v;
}

}  // namespace

bool is_gguf_mamba(const std::string& gguf_arch) {
  return gguf_arch == "mamba" || gguf_arch == "mamba2" || gguf_arch == "nemotron_h" || gguf_arch == "nemotron_h_moe" ||
         gguf_arch == "granitehybrid" || gguf_arch == "jamba";
}

Status read_gguf_mamba(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  if (gguf_arch == "mamba" || gguf_arch == "jamba") {  // Mamba1 mixers: a state [N] per channel, dt from x_proj
    int inner = 0, state = 0, kernel = 0;
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.inner_size", 0, inner));
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.state_size", 0, state));
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.conv_kernel", 0, kernel));
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.time_step_rank", 0, c.ssm.dt_rank));
    c.ssm.layout = SsmLayout{.n_heads = inner, .head_dim = 1, .n_groups = 1, .state_size = state, .conv_kernel = kernel};
    c.ssm.gated_norm = false;
    c.ssm.proj_bias = false;
  }
  if (gguf_arch == "jamba") {  // Mamba1 mixers with weighted dt/B/C norms, attention, SwiGLUs and experts
    c.arch = "jamba";
    c.nope = true;
    c.ssm.bcdt_norm_eps = c.rms_eps;
    BRIGADE_ASSIGN_OR_RETURN(const std::vector<int> kv, per_block(g, a + "attention.head_count_kv", c.n_layers));
    BRIGADE_ASSIGN_OR_RETURN(c.n_kv_heads, shared_count(g, a + "attention.head_count_kv", kv));
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.head_count", 0, c.n_heads));
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "feed_forward_length", 0, c.intermediate_size));
    if (c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads != 0)
      return corrupt(g.path() + ": metadata '" + a + "attention.head_count_kv' must divide attention.head_count");
    c.head_dim = c.hidden_size / c.n_heads;
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    c.ssm_layers.resize(static_cast<size_t>(c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) c.ssm_layers[static_cast<size_t>(l)] = kv[static_cast<size_t>(l)] == 0;
    BRIGADE_ASSIGN_OR_RETURN(const int64_t experts, g.get_int_or(a + "expert_count", 0));
    if (experts > 1) {  // which layers have them: those with a router (finish_gguf_mamba)
      BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
      c.moe_intermediate_size = c.intermediate_size;
      c.norm_topk_prob = false;  // JambaTopKRouter's top k of the softmax, as llama.cpp runs it
    }
    return Status::ok();
  }
  if (gguf_arch == "mamba") {  // Mamba1 and Falcon-Mamba
    c.arch = "mamba";
    // Falcon-Mamba's weightless RMSNorm of dt, B and C (its mixer_rms_eps is the model's eps).
    if (const GgufValue* r = g.find(a + "ssm.dt_b_c_rms"); r != nullptr && r->integer != 0) {
      c.arch = "falcon_mamba";
      c.ssm.bcdt_norm_eps = c.rms_eps;
    }
    c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
    c.n_heads = c.n_kv_heads = c.head_dim = 0;
    c.intermediate_size = static_cast<int>(c.ssm.layout.d_inner());
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(read_gguf_ssm_layout(g, a, c.ssm.layout));
  c.ssm.proj_bias = false;
  c.ssm.gated_norm = true;  // ssm_norm, which llama.cpp's loaders require
  c.ssm.dt_min = c.ssm.dt_max = 0.0f;  // llama.cpp's scan clamps no dt
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<int> heads, per_block(g, a + "attention.head_count", c.n_layers));
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<int> kv, per_block(g, a + "attention.head_count_kv", c.n_layers));
  BRIGADE_ASSIGN_OR_RETURN(const std::vector<int> ff, per_block(g, a + "feed_forward_length", c.n_layers));
  BRIGADE_ASSIGN_OR_RETURN(c.n_heads, shared_count(g, a + "attention.head_count", heads));
  BRIGADE_ASSIGN_OR_RETURN(c.n_kv_heads, shared_count(g, a + "attention.head_count_kv", kv));
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
  if (gguf_arch == "mamba2") {
    c.arch = "mamba2";
    c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
    c.n_heads = c.n_kv_heads = c.head_dim = 0;
    c.intermediate_size = static_cast<int>(c.ssm.layout.d_inner());
    return Status::ok();
  }
  if (c.n_heads > 0 && (c.n_kv_heads == 0 || c.n_heads % c.n_kv_heads != 0))
    return corrupt(g.path() + ": metadata '" + a + "attention.head_count_kv' must divide attention.head_count");
  BRIGADE_ASSIGN_OR_RETURN(const int64_t key_length, g.get_int_or(a + "attention.key_length", 0));
  c.head_dim = key_length > 0 ? static_cast<int>(key_length) : c.n_heads > 0 ? c.hidden_size / c.n_heads : 0;
  c.attn_scale = c.head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(c.head_dim)) : 0.0f;
  c.nope = true;  // neither family's attention has positions
  if (gguf_arch == "nemotron_h" || gguf_arch == "nemotron_h_moe") {
    c.arch = "nemotron_h";
    // Its converter writes layer_norm_epsilon as attention.layer_norm_epsilon, which llama.cpp's
    // loader takes where the rms key is absent.
    if (g.find(a + "attention.layer_norm_rms_epsilon") == nullptr && g.find(a + "attention.layer_norm_epsilon") != nullptr) {
      BRIGADE_ASSIGN_OR_RETURN(const double eps, g.get_number(a + "attention.layer_norm_epsilon"));
      if (!(eps > 0.0) || !std::isfinite(eps))
        return corrupt(g.path() + ": metadata '" + a + "attention.layer_norm_epsilon' must be a positive number");
      c.rms_eps = static_cast<float>(eps);
    }
    c.mlp_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int l = 0; l < c.n_layers; ++l) {
      const size_t i = static_cast<size_t>(l);
      c.ssm_layers[i] = kv[i] == 0 && ff[i] == 0;
      c.mlp_layers[i] = ff[i] > 0;
    }
    BRIGADE_ASSIGN_OR_RETURN(c.intermediate_size, shared_count(g, a + "feed_forward_length", ff));
    if (gguf_arch == "nemotron_h") return Status::ok();
    // Nemotron 3's blocks of relu2 experts (every MLP block), routed as llama.cpp's graph does:
    // sigmoid scores, exp_probs_b for the choice, expert groups, expert_weights_norm,
    // expert_weights_scale.
    BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
    BRIGADE_ASSIGN_OR_RETURN(const std::vector<int> widths, per_block(g, a + "expert_feed_forward_length", c.n_layers));
    BRIGADE_ASSIGN_OR_RETURN(c.moe_intermediate_size, shared_count(g, a + "expert_feed_forward_length", widths));
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_shared_feed_forward_length", 0, c.shared_expert_intermediate_size));
    BRIGADE_RETURN_IF_ERROR(read_gguf_expert_weights_scale(g, a, c));
    if (const GgufValue* n = g.find(a + "expert_weights_norm")) c.norm_topk_prob = n->integer != 0;
    BRIGADE_ASSIGN_OR_RETURN(const int64_t latent, g.get_int_or(a + "moe_latent_size", 0));
    if (latent > 0)
      return unsupported(g.path() + ": " + a + "moe_latent_size: Nemotron 3 Super's latent projections around the "
                         "experts are not supported");
    if (c.moe_intermediate_size <= 0)
      return corrupt(g.path() + ": metadata '" + a + "expert_feed_forward_length' is missing");
    c.moe_scoring = MoeScoring::sigmoid;
    c.moe_score_bias = true;
    c.relu2_experts = true;
    // Group-limited choice (DeepSeek-V3's, groups scored by their top two), as llama.cpp's graph.
    BRIGADE_RETURN_IF_ERROR(read_gguf_expert_groups(g, a, c));
    c.decoder_sparse_step = 1;
    c.mlp_only_layers.clear();
    for (int l = 0; l < c.n_layers; ++l)
      if (!c.mlp_layers[static_cast<size_t>(l)]) c.mlp_only_layers.push_back(l);
    return Status::ok();
  }
  // granitehybrid.
  c.arch = "granitemoehybrid";
  for (int l = 0; l < c.n_layers; ++l) c.ssm_layers[static_cast<size_t>(l)] = kv[static_cast<size_t>(l)] == 0;
  bool rope = true;  // llama.cpp's switch for Granite's RoPE: rope.scaling.finetuned, true when absent
  if (const GgufValue* r = g.find(a + "rope.scaling.finetuned")) rope = r->integer != 0;
  if (rope && c.n_attention_layers() > 0)
    return unsupported(g.path() + ": " + a + "rope.scaling.finetuned: granitehybrid attention with RoPE is not "
                       "supported (Granite 4.0-H's has no positions)");
  BRIGADE_RETURN_IF_ERROR(read_gguf_granite_scales(g, a, c));
  BRIGADE_ASSIGN_OR_RETURN(const int width, shared_count(g, a + "feed_forward_length", ff));
  c.norm_topk_prob = true;
  BRIGADE_ASSIGN_OR_RETURN(const int64_t experts, g.get_int_or(a + "expert_count", 0));
  if (experts > 0) {
    BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
    c.moe_intermediate_size = width;
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_shared_feed_forward_length", 0, c.shared_expert_intermediate_size));
    c.intermediate_size = c.moe_intermediate_size;
  } else {
    c.shared_expert_intermediate_size = width;
    c.intermediate_size = width;
  }
  return Status::ok();
}

Status read_gguf_granite_scales(const GgufFile& g, const std::string& a, ModelConfig& c) {
  for (auto [key, out] : {std::pair{"embedding_scale", &c.embedding_multiplier}, {"residual_scale", &c.residual_multiplier},
                          {"logit_scale", &c.logits_scaling}, {"attention.scale", &c.attn_scale}}) {
    if (g.find(a + key) == nullptr) continue;
    BRIGADE_ASSIGN_OR_RETURN(const double v, g.get_number(a + key));
    if (!(v > 0.0) || !std::isfinite(v)) return corrupt(g.path() + ": metadata '" + a + key + "' must be a positive number");
    *out = static_cast<float>(v);
  }
  return Status::ok();
}

std::string gguf_mamba2_mixer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kMixer = {
      {"ssm_in.weight", "in_proj.weight"},   {"ssm_conv1d.weight", "conv1d.weight"}, {"ssm_conv1d.bias", "conv1d.bias"},
      {"ssm_dt.bias", "dt_bias"},            {"ssm_a", "A_log"},                     {"ssm_d", "D"},
      {"ssm_norm.weight", "norm.weight"},    {"ssm_out.weight", "out_proj.weight"}};
  auto it = kMixer.find(suffix);
  return it == kMixer.end() ? "" : it->second;
}

void reshape_gguf_mixer_tensors(std::map<std::string, RawTensor>& tensors, bool a_matrix) {
  for (auto& [name, t] : tensors) {
    if (name.find(".mixer.") == std::string::npos && name.find(".mamba.") == std::string::npos) continue;
    if ((name.ends_with(".A_log") && !a_matrix) || name.ends_with(".D") || name.ends_with(".norm.weight")) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      t.shape = {n};
    } else if (name.ends_with(".conv1d.weight") && t.shape.size() == 2) {
      t.shape.insert(t.shape.begin() + 1, 1);
    }
  }
}

std::string gguf_mamba_name(const std::string& gguf_arch, const std::string& name) {
  const bool granite = gguf_arch == "granitehybrid";
  if (!name.starts_with("blk.")) {
    if (gguf_arch == "jamba") return name == "output_norm.weight" ? "model.final_layernorm.weight" : "";
    if (granite) return "";  // the generic model.* names
    if (name == "token_embd.weight") return "backbone.embeddings.weight";
    if (name == "output_norm.weight") return "backbone.norm_f.weight";
    return "";  // output.weight: lm_head.weight, as generic
  }
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || name.find_first_not_of("0123456789", 4) != dot) return "";
  const std::string block = name.substr(4, dot - 4), suffix = name.substr(dot + 1);
  const bool jamba = gguf_arch == "jamba";
  if (gguf_arch == "mamba" || jamba) {  // Mamba1's own tensors (the others below are shared)
    static const std::map<std::string, std::string> kMamba1 = {
        {"ssm_x.weight", "x_proj.weight"},           {"ssm_dt.weight", "dt_proj.weight"},
        {"ssm_dt.bias", "dt_proj.bias"},             {"ssm_dt_norm.weight", "dt_layernorm.weight"},
        {"ssm_b_norm.weight", "b_layernorm.weight"}, {"ssm_c_norm.weight", "c_layernorm.weight"}};
    if (auto it = kMamba1.find(suffix); it != kMamba1.end())
      return (jamba ? "model.layers." + block + ".mamba." : "backbone.layers." + block + ".mixer.") + it->second;
  }
  if (const std::string mixer = gguf_mamba2_mixer_name(suffix); !mixer.empty())
    return (granite || jamba ? "model.layers." + block + ".mamba." : "backbone.layers." + block + ".mixer.") + mixer;
  if (jamba) {  // its attention (self_attn.*) and input norm take the generic names
    static const std::map<std::string, std::string> kJamba = {
        {"ffn_norm.weight", "pre_ff_layernorm.weight"},      {"ffn_gate.weight", "feed_forward.gate_proj.weight"},
        {"ffn_up.weight", "feed_forward.up_proj.weight"},    {"ffn_down.weight", "feed_forward.down_proj.weight"},
        {"ffn_gate_inp.weight", "feed_forward.router.weight"}, {"ffn_gate_exps.weight", "feed_forward.experts.gate_proj"},
        {"ffn_up_exps.weight", "feed_forward.experts.up_proj"}, {"ffn_down_exps.weight", "feed_forward.experts.down_proj"}};
    auto it = kJamba.find(suffix);
    return it == kJamba.end() ? "" : "model.layers." + block + "." + it->second;
  }
  if (granite) {
    static const std::map<std::string, std::string> kGranite = {
        {"ffn_gate_shexp.weight", "shared_mlp.gate_proj.weight"}, {"ffn_up_shexp.weight", "shared_mlp.up_proj.weight"},
        {"ffn_down_shexp.weight", "shared_mlp.output_linear.weight"},
        {"ffn_gate.weight", "shared_mlp.gate_proj.weight"},       {"ffn_up.weight", "shared_mlp.up_proj.weight"},
        {"ffn_down.weight", "shared_mlp.output_linear.weight"},
        {"ffn_gate_inp.weight", "block_sparse_moe.router.layer.weight"},
        {"ffn_gate_exps.weight", "block_sparse_moe.experts.gate_proj"},
        {"ffn_up_exps.weight", "block_sparse_moe.experts.up_proj"},
        {"ffn_down_exps.weight", "block_sparse_moe.output_linear.weight"}};
    auto it = kGranite.find(suffix);
    return it == kGranite.end() ? "" : "model.layers." + block + "." + it->second;
  }
  static const std::map<std::string, std::string> kBackbone = {
      {"attn_norm.weight", "norm.weight"},          {"attn_q.weight", "mixer.q_proj.weight"},
      {"attn_k.weight", "mixer.k_proj.weight"},     {"attn_v.weight", "mixer.v_proj.weight"},
      {"attn_output.weight", "mixer.o_proj.weight"}, {"ffn_up.weight", "mixer.up_proj.weight"},
      {"ffn_down.weight", "mixer.down_proj.weight"}, {"ffn_up.bias", "mixer.up_proj.bias"},
      {"ffn_down.bias", "mixer.down_proj.bias"},
      // Nemotron 3's MoE blocks.
      {"ffn_gate_inp.weight", "mixer.gate.weight"},  {"exp_probs_b.bias", "mixer.gate.e_score_correction_bias"},
      {"ffn_up_exps.weight", "mixer.experts.up_proj"}, {"ffn_down_exps.weight", "mixer.experts.down_proj"},
      {"ffn_up_shexp.weight", "mixer.shared_experts.up_proj.weight"},
      {"ffn_down_shexp.weight", "mixer.shared_experts.down_proj.weight"}};
  auto it = kBackbone.find(suffix);
  return it == kBackbone.end() ? "" : "backbone.layers." + block + "." + it->second;
}

Status finish_gguf_mamba(const GgufFile& g, std::map<std::string, RawTensor>& tensors, ModelConfig& c) {
  reshape_gguf_mixer_tensors(tensors, /*a_matrix=*/c.ssm.mamba1());  // Mamba1's A is [channels, state] as stored
  // The conv bias as the first mixer has it (every mixer alike, or the load names the missing one).
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.ssm_layers[static_cast<size_t>(l)]) continue;
    const std::string p = c.arch == "granitemoehybrid" || c.arch == "jamba" ? "model.layers." + std::to_string(l) + ".mamba."
                                                                             : "backbone.layers." + std::to_string(l) + ".mixer.";
    c.ssm.conv_bias = tensors.count(p + "conv1d.bias") > 0;
    break;
  }
  c.mlp_bias = c.arch == "nemotron_h" && std::any_of(tensors.begin(), tensors.end(), [](const auto& e) {
                 return e.first.ends_with(".mixer.up_proj.bias");
               });
  if (c.arch == "jamba" && c.n_experts > 0) {  // the layers with a router have experts
    c.decoder_sparse_step = 1;
    c.mlp_only_layers.clear();
    for (int l = 0; l < c.n_layers; ++l)
      if (tensors.count("model.layers." + std::to_string(l) + ".feed_forward.router.weight") == 0) c.mlp_only_layers.push_back(l);
  }
  // (Nemotron 3's relu2 experts have no gate tensors, which check_gguf_moe_tensors expects.)
  return c.n_experts > 0 && !c.relu2_experts ? check_gguf_moe_tensors(g, c) : Status::ok();
}

}  // namespace brigade
