#include "models/gguf_llama_variants.h"

#include <cmath>
#include <map>

#include "models/gguf_keys.h"
#include "models/gguf_moe.h"
#include "models/llama_variants_config.h"

namespace brigade {
namespace {

// OLMo 3's and EXAONE 4's window: attention.sliding_window (absent or 0: none) and which layers
// it applies to (read_gguf_sliding_layers; llama.cpp's default every 4th layer full).
Status read_window(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.sliding_window = 0;
  if (!g.find(a + "attention.sliding_window")) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(int64_t w, g.get_int(a + "attention.sliding_window"));
  if (w < 0 || w > INT32_MAX) return corrupt(g.path() + ": metadata '" + a + "attention.sliding_window' is out of range");
  c.sliding_window = static_cast<int>(w);
  if (c.sliding_window == 0) return Status::ok();
  return read_gguf_sliding_layers(g, a, 4, c);
}

Status read_olmo2(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.qk_norm = c.qk_norm_whole = c.post_norms = true;
  BRIGADE_RETURN_IF_ERROR(read_window(g, a, c));
  c.arch = c.sliding_window > 0 ? "olmo3" : "olmo2";
  BRIGADE_RETURN_IF_ERROR(read_gguf_yarn(g, a, c));
  if (c.sliding_window == 0) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(double swa_theta, g.get_number_or(a + "rope.freq_base_swa", c.rope_theta));
  if (!std::isfinite(swa_theta) || swa_theta <= 0.0)
    return corrupt(g.path() + ": metadata '" + a + "rope.freq_base_swa' must be a positive number");
  c.rope_local_theta = static_cast<float>(swa_theta);  // the sliding layers: unscaled
  return Status::ok();
}

Status read_exaone4(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.qk_norm = c.post_norms = true;
  BRIGADE_RETURN_IF_ERROR(read_window(g, a, c));
  if (c.sliding_window == 0) return Status::ok();
  nope_on_full_layers(c);  // "global NoPE" (llama_variants_config.h)
  return Status::ok();
}

// ERNIE 4.5 MoE: leading_dense_block_count dense layers, then every interleave_moe_layer_step-th
// sparse (llama.cpp's rule, transformers' too); softmax routing chosen with exp_probs_b,
// renormalised (build_moe_ffn's norm_w, true for it); expert_shared_feed_forward_length wide
// shared experts (the converter writes intermediate_size / num_key_value_heads there, which
// llama.cpp sizes the shared tensors by; a file's tensors are checked against it at load).
Status read_ernie_moe(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "ernie4_5_moe";
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "interleave_moe_layer_step", 1, c.decoder_sparse_step));
  BRIGADE_ASSIGN_OR_RETURN(int64_t lead, g.get_int_or(a + "leading_dense_block_count", 0));
  if (lead < 0 || lead > c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "leading_dense_block_count' is out of range");
  c.first_k_dense_replace = static_cast<int>(lead);
  BRIGADE_ASSIGN_OR_RETURN(int64_t shared, g.get_int_or(a + "expert_shared_count", 0));
  if (shared > 0) BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_shared_feed_forward_length", 0, c.shared_expert_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_weights_scale(g, a, c));
  c.moe_scoring = MoeScoring::softmax;
  c.moe_score_bias = g.has_tensor("blk." + std::to_string(c.first_k_dense_replace) + ".exp_probs_b.bias");
  c.norm_topk_prob = true;
  return Status::ok();
}

// Hunyuan MoE's experts (gguf_llama_variants.h): the keys its converter writes and its loader
// reads, and what llama.cpp's graph fixes rather than reads.
Status read_hunyuan_moe(const GgufFile& g, const std::string& a, ModelConfig& c) {
  for (const char* key : {"expert_used_count", "expert_feed_forward_length"})
    if (const GgufValue* v = g.find(a + key); v && v->type == GgufType::array)
      return unsupported(g.path() + ": metadata '" + a + key + "' per layer is not supported for hunyuan-moe; " +
                         "brigade runs one value for every layer");
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(
      read_gguf_count(g, a + "expert_feed_forward_length", c.intermediate_size, c.moe_intermediate_size));
  BRIGADE_ASSIGN_OR_RETURN(int64_t n_shared, g.get_int_or(a + "expert_shared_count", 1));
  if (n_shared != 1)
    return unsupported(g.path() + ": metadata '" + a + "expert_shared_count' " + std::to_string(n_shared) +
                       " is not supported for hunyuan-moe; llama.cpp and brigade run one shared MLP");
  BRIGADE_ASSIGN_OR_RETURN(int64_t shared, g.get_int_or(a + "expert_shared_feed_forward_length", 0));
  if (shared < 0 || shared > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "expert_shared_feed_forward_length' is out of range");
  c.shared_expert_intermediate_size = shared > 0 ? static_cast<int>(shared) : c.intermediate_size;
  BRIGADE_ASSIGN_OR_RETURN(int64_t groups, g.get_int_or(a + "expert_group_count", 0));
  if (groups > 1)
    return unsupported(g.path() + ": metadata '" + a + "expert_group_count' " + std::to_string(groups) +
                       " (group-limited routing) is not supported for hunyuan-moe; supported: 0 or 1");
  c.shared_gate = false;
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  return Status::ok();
}

// Hunyuan dense and MoE: rope.scaling.alpha, where a dense file has one, stretches the base as
// llama.cpp's hunyuan-dense loader does; llama.cpp's hunyuan-moe loader ignores the key, so a MoE
// file with it is refused.
Status read_hunyuan(const GgufFile& g, const std::string& gguf_arch, const std::string& a, ModelConfig& c) {
  const bool moe = gguf_arch == "hunyuan-moe";
  c.arch = moe ? "hunyuan_v1_moe" : "hunyuan_v1_dense";
  c.qk_norm = c.qk_norm_after_rope = true;
  if (moe) BRIGADE_RETURN_IF_ERROR(read_hunyuan_moe(g, a, c));
  if (!g.find(a + "rope.scaling.alpha")) return Status::ok();
  if (moe)
    return unsupported(g.path() + ": metadata '" + a + "rope.scaling.alpha' is not supported for hunyuan-moe: " +
                       "llama.cpp's loader does not apply it (its converter folds the alpha into rope.freq_base)");
  BRIGADE_ASSIGN_OR_RETURN(double alpha, g.get_number(a + "rope.scaling.alpha"));
  if (!std::isfinite(alpha) || alpha <= 0.0)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.alpha' must be a positive number");
  return stretch_rope_base(alpha, c);
}

// Llama 4: what its converter writes (expert_count, expert_used_count, expert_feed_forward_length
// for the routed and the shared expert alike, interleave_moe_layer_step; feed_forward_length is
// the dense layers'), and what llama.cpp's loader fixes rather than reads: no RoPE on every 4th
// layer (n_no_rope_layer_step), chunks of 8192 on the layers attention.sliding_window_pattern
// marks (absent: all but every 4th), the NoPE layers' query temperature (floor 8192, scale 0.1),
// weightless q/k norms after RoPE unless the file has 128 experts (Maverick, whose config has
// none), sigmoid routing weights applied to the expert's input.
Status read_llama4(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "llama4_text";
  // The converter writes sliding_window 0 where every layer is full attention (MobileLLM's
  // configs); llama.cpp then drops the chunks but leaves the last layer without RoPE, and its
  // temperature input asserts a scale the loader never set.
  if (g.find(a + "attention.sliding_window")) {
    BRIGADE_ASSIGN_OR_RETURN(int64_t w, g.get_int(a + "attention.sliding_window"));
    if (w == 0)
      return unsupported(g.path() + ": metadata '" + a + "attention.sliding_window' 0 (every layer full attention) " +
                         "is not supported for llama4; brigade runs llama.cpp's chunked layout (the key absent)");
  }
  c.sliding_window = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, 4, c));
  c.chunked_layers = std::move(c.sliding_layers);
  c.sliding_layers.clear();
  c.attention_chunk = 8192;  // whatever a nonzero attention.sliding_window says, as llama.cpp
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = (l + 1) % 4 == 0;
  c.attn_temperature_floor = 8192.0f;
  c.attn_temperature_scale = 0.1f;
  // llama.cpp rotates the chunked layers with rope.freq_base_swa where the file has one.
  BRIGADE_ASSIGN_OR_RETURN(double swa_theta, g.get_number_or(a + "rope.freq_base_swa", c.rope_theta));
  if (static_cast<float>(swa_theta) != c.rope_theta)
    return unsupported(g.path() + ": metadata '" + a + "rope.freq_base_swa' differs from rope.freq_base; brigade " +
                       "rotates every llama4 layer with rope.freq_base");
  for (const char* key : {"expert_used_count", "expert_feed_forward_length"})
    if (const GgufValue* v = g.find(a + key); v && v->type == GgufType::array)
      return unsupported(g.path() + ": metadata '" + a + key + "' per layer is not supported for llama4; brigade " +
                         "runs one value for every sparse layer");
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  c.shared_expert_intermediate_size = c.moe_intermediate_size;
  int step = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "interleave_moe_layer_step", 0, step));
  c.decoder_sparse_step = 1;  // every step-th layer sparse, listed as read_llama4 lists them
  c.mlp_only_layers.clear();
  for (int l = 0; l < c.n_layers; ++l)
    if ((l + 1) % step != 0) c.mlp_only_layers.push_back(l);
  c.qk_norm = c.qk_norm_weightless = c.qk_norm_after_rope = c.n_experts != 128;
  c.moe_scoring = MoeScoring::sigmoid;
  c.norm_topk_prob = false;
  c.moe_weight_on_input = true;
  return Status::ok();
}

// MiniMax-M2: what its converter writes (expert_count, expert_used_count, expert_gating_func from
// the config's scoring_func, feed_forward_length, by which llama.cpp sizes the experts, and
// rope.dimension_count from rotary_dim) and what llama.cpp's graph fixes rather than reads: q/k
// norms over the whole projections before RoPE, every layer sparse, the top k chosen on sigmoid +
// exp_probs_b and renormalised (build_moe_ffn's norm_w, hard-coded; no expert_weights_norm or
// expert_weights_scale read). A file without expert_gating_func (from a config without
// scoring_func) aborts in llama.cpp; MiniMax-M2 routes by sigmoid, which brigade runs.
Status read_minimax_m2(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "minimax_m2";
  c.qk_norm = c.qk_norm_whole = true;
  c.sliding_window = 0;
  if (const GgufValue* v = g.find(a + "expert_used_count"); v && v->type == GgufType::array)
    return unsupported(g.path() + ": metadata '" + a + "expert_used_count' per layer is not supported for " +
                       "minimax-m2; brigade runs one value for every layer");
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  c.moe_intermediate_size = c.intermediate_size;
  BRIGADE_RETURN_IF_ERROR(read_gguf_sigmoid_gating(g, a, c));
  // llama.cpp's loader reads expert groups for every architecture; MiniMax-M2 has none.
  BRIGADE_ASSIGN_OR_RETURN(int64_t groups, g.get_int_or(a + "expert_group_count", 0));
  if (groups > 1)
    return unsupported(g.path() + ": metadata '" + a + "expert_group_count' " + std::to_string(groups) +
                       " (group-limited routing) is not supported for minimax-m2; supported: 0 or 1");
  c.moe_score_bias = true;  // exp_probs_b, which llama.cpp requires
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  return Status::ok();
}

// dots.llm1 (gguf_llama_variants.h): qwen3's attention, DeepSeek-V3's experts and routing.
Status read_dots1(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.arch = "dots1";
  c.qk_norm = true;
  c.sliding_window = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_shared_experts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_sigmoid_gating(g, a, c));
  return read_gguf_deepseek_routing(g, a, c);
}

// Cohere's Command R family, as llama.cpp's loaders and graphs run it (src/models/command-r.cpp,
// cohere2.cpp): every norm a LayerNorm without bias whose eps is attention.layer_norm_epsilon
// (required by both loaders), the attention and the MLP both reading attn_norm's output, the
// logits times logit_scale (command-r: absent or 0 = none, as llama.cpp's graph skips a zero
// scale; cohere2: required). command-r's per-head attn_q_norm / attn_k_norm ([n_head, head_dim],
// [n_head_kv, head_dim] as stored) where the file holds them: llama.cpp creates them exactly when
// block_count >= 64 (Command R+'s depth, whose config has use_qk_norm) and refuses a file whose
// tensors differ from that; brigade, as transformers, goes by what the file holds. cohere2's
// attention.sliding_window (required) on the layers attention.sliding_window_pattern marks
// (absent: every 4th layer full, llama.cpp's default), and RoPE on the sliding layers only
// (llama.cpp's graph reads no rope.freq_base_swa: every rotated layer uses rope.freq_base).
// The LayerNorms' epsilon (attention.layer_norm_epsilon, required) into rms_eps.
Status read_layer_norm_eps(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string eps_key = a + "attention.layer_norm_epsilon";
  if (!g.find(eps_key)) return corrupt(g.path() + ": metadata '" + eps_key + "' (the LayerNorms' epsilon) is missing");
  BRIGADE_ASSIGN_OR_RETURN(double eps, g.get_number(eps_key));
  if (!std::isfinite(eps) || eps <= 0.0)
    return corrupt(g.path() + ": metadata '" + eps_key + "' must be a positive number");
  c.rms_eps = static_cast<float>(eps);
  return Status::ok();
}

// OLMo 1 (llama.cpp's olmo): LayerNorms without weights (none stored), q, k and v clamped to
// attention.clamp_kqv (absent: none; llama.cpp's f_clamp_kqv).
Status read_olmo(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.layer_norms = c.norms_weightless = true;
  c.sliding_window = 0;
  BRIGADE_RETURN_IF_ERROR(read_layer_norm_eps(g, a, c));
  BRIGADE_ASSIGN_OR_RETURN(double clamp, g.get_number_or(a + "attention.clamp_kqv", 0.0));
  if (!std::isfinite(clamp) || clamp < 0.0)
    return corrupt(g.path() + ": metadata '" + a + "attention.clamp_kqv' must be a number >= 0");
  c.clip_qkv = static_cast<float>(clamp);
  return Status::ok();
}

// DBRX (llama.cpp's dbrx): LayerNorms without bias, the fused attn_qkv clamped to
// attention.clamp_kqv (required, as llama.cpp's loader has it), every layer experts
// feed_forward_length wide, softmax top k renormalised (build_moe_ffn's norm_w: true), NEOX RoPE.
Status read_dbrx(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.layer_norms = c.fused_weights = true;
  c.sliding_window = 0;
  BRIGADE_RETURN_IF_ERROR(read_layer_norm_eps(g, a, c));
  const std::string clamp_key = a + "attention.clamp_kqv";
  if (!g.find(clamp_key)) return corrupt(g.path() + ": metadata '" + clamp_key + "' is missing (llama.cpp's dbrx requires it)");
  BRIGADE_ASSIGN_OR_RETURN(double clamp, g.get_number(clamp_key));
  if (!std::isfinite(clamp) || clamp < 0.0) return corrupt(g.path() + ": metadata '" + clamp_key + "' must be a number >= 0");
  c.clip_qkv = static_cast<float>(clamp);
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  c.moe_intermediate_size = c.intermediate_size;
  c.moe_scoring = MoeScoring::softmax;
  c.norm_topk_prob = true;
  c.first_k_dense_replace = 0;
  c.decoder_sparse_step = 1;
  return Status::ok();
}

Status read_command_r(const GgufFile& g, const std::string& gguf_arch, const std::string& a, ModelConfig& c) {
  const bool cohere2 = gguf_arch == "cohere2";
  c.arch = cohere2 ? "cohere2" : "cohere";
  c.layer_norms = c.parallel_blocks = true;
  BRIGADE_RETURN_IF_ERROR(read_layer_norm_eps(g, a, c));
  if (cohere2 && !g.find(a + "logit_scale"))
    return corrupt(g.path() + ": metadata '" + a + "logit_scale' is missing (llama.cpp's cohere2 requires it)");
  BRIGADE_ASSIGN_OR_RETURN(double scale, g.get_number_or(a + "logit_scale", 0.0));
  if (!std::isfinite(scale) || scale < 0.0)
    return corrupt(g.path() + ": metadata '" + a + "logit_scale' must be a number >= 0");
  c.logit_scale = static_cast<float>(scale);
  c.qk_norm = !cohere2 && g.has_tensor("blk.0.attn_q_norm.weight");
  c.sliding_window = 0;
  if (!cohere2) return Status::ok();
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.sliding_window", 0, c.sliding_window));
  BRIGADE_RETURN_IF_ERROR(read_gguf_sliding_layers(g, a, 4, c));
  nope_on_full_layers(c);  // the full layers: no RoPE
  return Status::ok();
}

}  // namespace

Status read_gguf_mistral3(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(double attn, g.get_number_or(a + "rope.scaling.attn_factor", 1.0));
  BRIGADE_ASSIGN_OR_RETURN(double log_mul, g.get_number_or(a + "rope.scaling.yarn_log_multiplier", 0.0));
  if (!std::isfinite(attn) || attn <= 0.0)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.attn_factor' must be a positive number");
  if (!std::isfinite(log_mul) || log_mul < 0.0)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.yarn_log_multiplier' must be a number >= 0");
  BRIGADE_RETURN_IF_ERROR(read_gguf_yarn(g, a, c));
  RopeScaling& s = c.rope_scaling;
  if (log_mul != 0.0) {
    if (s.type != RopeScalingType::yarn)
      return unsupported(g.path() + ": metadata '" + a + "rope.scaling.yarn_log_multiplier' without YaRN is not "
                         "supported for mistral3");
    s.mscale = 1.0f;
    s.mscale_all_dim = static_cast<float>(log_mul);
    s.attention_factor = yarn_mscale(s.factor, 1.0f) / yarn_mscale(s.factor, s.mscale_all_dim) * static_cast<float>(attn);
  }
  c.arch = "llama";
  const GgufValue* temperature = g.find(a + "attention.temperature_scale");
  if (temperature == nullptr) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(double beta, g.get_number(a + "attention.temperature_scale"));
  if (!std::isfinite(beta))
    return corrupt(g.path() + ": metadata '" + a + "attention.temperature_scale' must be a number");
  if (beta == 0.0) return Status::ok();  // llama.cpp's "none"
  c.arch = "ministral3";
  c.attn_temperature_floor = static_cast<float>(
      s.type == RopeScalingType::yarn && s.original_max_position > 0 ? s.original_max_position : c.max_position);
  c.attn_temperature_scale = static_cast<float>(beta);
  c.attn_temperature_offset = 0.0f;
  c.attn_temperature_all_layers = true;
  return Status::ok();
}

bool is_gguf_llama_variant(const std::string& gguf_arch) {
  return gguf_arch == "olmo" || gguf_arch == "dbrx" || gguf_arch == "olmo2" || gguf_arch == "exaone4" || gguf_arch == "glm4" || gguf_arch == "seed_oss" ||
         gguf_arch == "ernie4_5" || gguf_arch == "hunyuan-dense" || gguf_arch == "apertus" || gguf_arch == "ernie4_5-moe" ||
         gguf_arch == "llama4" || gguf_arch == "minimax-m2" || gguf_arch == "command-r" ||
         gguf_arch == "cohere2" || gguf_arch == "hunyuan-moe" || gguf_arch == "dots1" || gguf_arch == "chatglm";
}

Status add_gguf_xielu_tensors(const GgufFile& g, int n_layers, std::map<std::string, RawTensor>& tensors) {
  for (const char* param : {"alpha_p", "alpha_n", "beta", "eps"}) {
    const std::string key = std::string("xielu.") + param;
    const GgufValue* v = g.find(key);
    if (v == nullptr) return corrupt(g.path() + ": metadata '" + key + "' (Apertus's xIELU parameters) is missing");
    const bool array = v->type == GgufType::array;
    const GgufType t = array ? v->elem_type : v->type;
    const size_t count = array ? v->numbers.size() : 1;
    if (t != GgufType::f32 || (count != 1 && count != static_cast<size_t>(n_layers)) || v->raw.size() != 4 * count)
      return corrupt(g.path() + ": metadata '" + key + "' must be one f32, or one per layer (" + std::to_string(n_layers) +
                     ")");
    for (int l = 0; l < n_layers; ++l) {  // one value for every layer, or each layer's
      RawTensor r;
      r.name = "model.layers." + std::to_string(l) + ".mlp.act_fn." + param;
      r.file = g.path();
      r.dtype = DType::f32;
      r.shape = {1};
      r.bytes = v->raw.subspan(count == 1 ? 0 : 4 * static_cast<size_t>(l), 4);
      tensors[r.name] = std::move(r);
    }
  }
  return Status::ok();
}

Status read_gguf_llama_variant(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  const bool pairs = gguf_arch == "glm4" || gguf_arch == "ernie4_5" || gguf_arch == "ernie4_5-moe" ||
                     gguf_arch == "llama4" || gguf_arch == "command-r" || gguf_arch == "cohere2" ||
                     gguf_arch == "olmo" ||  // OLMo 1: q/k rows permuted by the converter, as llama's
                     gguf_arch == "chatglm";
  c.rope_style = pairs ? RopeStyle::interleaved : RopeStyle::neox;
  c.qkv_bias = c.attention_bias = g.has_tensor("blk.0.attn_q.bias") || g.has_tensor("blk.0.attn_qkv.bias");
  c.o_bias = g.has_tensor("blk.0.attn_output.bias");
  c.mlp_bias = false;
  if (gguf_arch == "olmo") return read_olmo(g, a, c);
  if (gguf_arch == "dbrx") return read_dbrx(g, a, c);
  if (gguf_arch == "olmo2") return read_olmo2(g, a, c);
  if (gguf_arch == "exaone4") return read_exaone4(g, a, c);
  if (gguf_arch == "hunyuan-dense" || gguf_arch == "hunyuan-moe") return read_hunyuan(g, gguf_arch, a, c);
  if (gguf_arch == "ernie4_5-moe") return read_ernie_moe(g, a, c);
  if (gguf_arch == "llama4") return read_llama4(g, a, c);
  if (gguf_arch == "minimax-m2") return read_minimax_m2(g, a, c);
  if (gguf_arch == "dots1") return read_dots1(g, a, c);
  if (gguf_arch == "command-r" || gguf_arch == "cohere2") return read_command_r(g, gguf_arch, a, c);
  if (gguf_arch == "apertus") {  // per-head q/k norms, the xIELU MLP (its parameters: add_gguf_xielu_tensors)
    c.qk_norm = true;
    c.mlp_activation = MlpActivation::xielu;
    c.sliding_window = 0;
    return Status::ok();
  }
  c.sliding_window = 0;
  c.sandwich_norms = gguf_arch == "glm4";
  // ChatGLM (GLM-4-9B from ChatGLMModel, with attn_qkv; GLM-Edge from GlmForCausalLM, q/k/v apart):
  // GlmForCausalLM's layer, gate|up in ffn_up.
  if (gguf_arch == "chatglm") c.arch = "glm";
  return Status::ok();
}

std::string gguf_llama_variant_layer_name(const std::string& gguf_arch, const std::string& suffix) {
  using Names = std::map<std::string, std::string>;
  static const Names kPostNorms = {{"post_attention_norm.weight", "post_attention_layernorm.weight"},
                                   {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
  static const Names kGlm4 = {{"post_attention_norm.weight", "post_self_attn_layernorm.weight"},
                              {"post_ffw_norm.weight", "post_mlp_layernorm.weight"},
                              {"ffn_up.weight", "mlp.gate_up_proj.weight"}};
  static const Names kSeedOss = {{"post_attention_norm.weight", "post_attention_layernorm.weight"}};
  static const Names kChatGlm = {{"ffn_up.weight", "mlp.gate_up_proj.weight"},
                                 {"attn_qkv.bias", "self_attn.qkv_proj.bias"}};
  static const Names kHunyuan = {{"attn_q_norm.weight", "self_attn.query_layernorm.weight"},
                                 {"attn_k_norm.weight", "self_attn.key_layernorm.weight"}};
  static const Names kApertus = {{"attn_norm.weight", "attention_layernorm.weight"},
                                 {"ffn_norm.weight", "feedforward_layernorm.weight"}};
  static const Names kErnieMoe = {{"exp_probs_b.bias", "mlp.moe_statics.e_score_correction_bias"},
                                  {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
                                  {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
                                  {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"}};
  static const Names kLlama4 = {{"ffn_gate.weight", "feed_forward.gate_proj.weight"},
                                {"ffn_up.weight", "feed_forward.up_proj.weight"},
                                {"ffn_down.weight", "feed_forward.down_proj.weight"},
                                {"ffn_gate_inp.weight", "feed_forward.router.weight"},
                                {"ffn_gate_exps.weight", "feed_forward.experts.gate_proj"},
                                {"ffn_up_exps.weight", "feed_forward.experts.up_proj"},
                                {"ffn_down_exps.weight", "feed_forward.experts.down_proj"},
                                {"ffn_gate_shexp.weight", "feed_forward.shared_expert.gate_proj.weight"},
                                {"ffn_up_shexp.weight", "feed_forward.shared_expert.up_proj.weight"},
                                {"ffn_down_shexp.weight", "feed_forward.shared_expert.down_proj.weight"}};
  static const Names kSelectionBias = {{"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"}};
  static const Names kDbrx = {{"attn_output_norm.weight", "post_attention_layernorm.weight"},
                              {"ffn_gate_inp.weight", "mlp.gate.weight"},
                              {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
                              {"ffn_up_exps.weight", "mlp.experts.up_proj"},
                              {"ffn_down_exps.weight", "mlp.experts.down_proj"}};
  static const Names kMiniMaxM2 = {{"ffn_gate_inp.weight", "mlp.gate.weight"},
                                   {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
                                   {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
                                   {"ffn_up_exps.weight", "mlp.experts.up_proj"},
                                   {"ffn_down_exps.weight", "mlp.experts.down_proj"}};
  const bool hunyuan = gguf_arch == "hunyuan-dense" || gguf_arch == "hunyuan-moe";
  const Names* names = gguf_arch == "olmo2" || gguf_arch == "exaone4" ? &kPostNorms
                       : gguf_arch == "glm4"                         ? &kGlm4
                       : gguf_arch == "seed_oss"                     ? &kSeedOss
                       : gguf_arch == "chatglm"                      ? &kChatGlm
                       : hunyuan                                     ? &kHunyuan
                       : gguf_arch == "apertus"                      ? &kApertus
                       : gguf_arch == "ernie4_5-moe"                 ? &kErnieMoe
                       : gguf_arch == "llama4"                       ? &kLlama4
                       : gguf_arch == "minimax-m2"                   ? &kMiniMaxM2
                       : gguf_arch == "dots1"                        ? &kSelectionBias
                       : gguf_arch == "dbrx"                         ? &kDbrx
                                                                     : nullptr;
  if (names == nullptr) return "";
  auto it = names->find(suffix);
  if (it != names->end()) return it->second;
  // Hunyuan MoE's and dots.llm1's router and experts as the other GGUF MoE families', their shared
  // MLPs ungated.
  return gguf_arch == "hunyuan-moe" || gguf_arch == "dots1" ? gguf_moe_layer_name(suffix, /*gated_shared_expert=*/false)
                                                            : "";
}

}  // namespace brigade
