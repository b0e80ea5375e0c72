#include "models/gguf_deepseek2.h"

#include <cmath>
#include <vector>

#include "models/gguf_keys.h"
#include "models/gguf_moe.h"
#include "models/rope_scaling.h"

namespace brigade {
namespace {

// llama.cpp's llama_expert_gating_func_type: 0 none (deepseek2's default: softmax), 1 softmax,
// 2 sigmoid.
constexpr int64_t kGatingNone = 0, kGatingSoftmax = 1, kGatingSigmoid = 2;

// The per-head widths (qk_nope, qk_rope, v) and the latent ranks; corrupt naming the key that
// does not fit.
Status read_mla_widths(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.kv_lora_rank", 0, c.kv_lora_rank));
  BRIGADE_ASSIGN_OR_RETURN(int64_t q_lora, g.get_int_or(a + "attention.q_lora_rank", 0));
  if (q_lora < 0 || q_lora > INT32_MAX) return corrupt(g.path() + ": metadata '" + a + "attention.q_lora_rank' is out of range");
  c.q_lora_rank = static_cast<int>(q_lora);  // 0 or absent: q_proj (attn_q), V2-Lite's
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "rope.dimension_count", 0, c.qk_rope_head_dim));
  // Current files: per-head widths in the _mla keys, the latent's in key_length / value_length.
  const bool split = g.find(a + "attention.key_length_mla") != nullptr;
  const std::string k = a + (split ? "attention.key_length_mla" : "attention.key_length");
  const std::string v = a + (split ? "attention.value_length_mla" : "attention.value_length");
  int dk = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, k, 0, dk));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, v, 0, c.v_head_dim));
  if (dk <= c.qk_rope_head_dim)
    return corrupt(g.path() + ": metadata '" + k + "' (" + std::to_string(dk) + ") must exceed '" + a +
                   "rope.dimension_count' (" + std::to_string(c.qk_rope_head_dim) + "): each head is nope + rope");
  c.qk_nope_head_dim = dk - c.qk_rope_head_dim;
  if (split) {  // the latent cache's widths, as llama.cpp sizes its MQA view of MLA
    BRIGADE_ASSIGN_OR_RETURN(int64_t latent_k, g.get_int_or(a + "attention.key_length", c.kv_lora_rank + c.qk_rope_head_dim));
    BRIGADE_ASSIGN_OR_RETURN(int64_t latent_v, g.get_int_or(a + "attention.value_length", c.kv_lora_rank));
    if (latent_k != c.kv_lora_rank + c.qk_rope_head_dim || latent_v != c.kv_lora_rank)
      return corrupt(g.path() + ": metadata '" + a + "attention.key_length' / 'value_length' (" + std::to_string(latent_k) +
                     ", " + std::to_string(latent_v) + ") must be kv_lora_rank + rope.dimension_count and kv_lora_rank (" +
                     std::to_string(c.kv_lora_rank + c.qk_rope_head_dim) + ", " + std::to_string(c.kv_lora_rank) + ")");
  }
  // As read_mla (models/deepseek_config.cpp): RoPE over the rope part of each head, one latent.
  c.head_dim = c.qk_rope_head_dim;
  c.rotary_dim = 0;
  c.n_kv_heads = c.n_heads;
  c.rope_style = RopeStyle::interleaved;  // llama.cpp's LLAMA_ROPE_TYPE_NORM for deepseek2
  return Status::ok();
}

// RoPE scaling (none or YaRN) and the softmax scale, as llama.cpp's deepseek2 computes them
// (gguf_deepseek2.h).
Status read_rope_and_scale(const GgufFile& g, const std::string& a, ModelConfig& c) {
  if (const GgufValue* t = g.find(a + "rope.scaling.type"); t && t->str != "none" && t->str != "yarn")
    return unsupported(g.path() + ": " + a + "rope.scaling.type '" + t->str + "' is not supported for deepseek2; "
                       "supported: none, yarn");
  BRIGADE_ASSIGN_OR_RETURN(double attn, g.get_number_or(a + "rope.scaling.attn_factor", 1.0));
  if (!std::isfinite(attn) || attn <= 0.0)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.attn_factor' must be a positive number");
  BRIGADE_ASSIGN_OR_RETURN(double log_mul, g.get_number_or(a + "rope.scaling.yarn_log_multiplier", 0.0));
  if (!std::isfinite(log_mul) || log_mul < 0.0)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.yarn_log_multiplier' must be a number >= 0");
  BRIGADE_RETURN_IF_ERROR(read_gguf_yarn(g, a, c));
  RopeScaling& s = c.rope_scaling;
  float rope_factor = static_cast<float>(attn), softmax_mscale = 1.0f;
  if (s.type == RopeScalingType::yarn) {
    // The converter stores 0.1 x mscale_all_dim; llama.cpp's context takes mscale equal to it for
    // deepseek2 only (llama_context's special case names LLM_ARCH_DEEPSEEK2), 1 for mistral4 and
    // the DSA archs (deepseek32, glm-dsa), whose cos/sin factor is then
    // mscale(factor, 1) / mscale(factor, mscale_all_dim), transformers' with mscale 1.
    const bool mscale_one = a != "deepseek2.";
    s.mscale = s.mscale_all_dim = static_cast<float>(log_mul / 0.1);
    if (mscale_one && log_mul != 0.0) {
      s.mscale = 1.0f;
      rope_factor *= yarn_mscale(s.factor, 1.0f) / yarn_mscale(s.factor, s.mscale_all_dim);
    }
    if (log_mul == 0.0) rope_factor *= yarn_mscale(s.factor, 1.0f);
    s.attention_factor = rope_factor;
    softmax_mscale = yarn_mscale(s.factor, s.mscale_all_dim);
  } else if (attn != 1.0) {
    return unsupported(g.path() + ": metadata '" + a + "rope.scaling.attn_factor' without YaRN is not supported");
  }
  const float m = rope_factor * softmax_mscale;
  c.attn_scale = m * m / std::sqrt(static_cast<float>(c.qk_nope_head_dim + c.qk_rope_head_dim));
  return Status::ok();
}

// The number of tokens (vocab_size, else the embedding's rows), for llama.cpp's GLM-4.7-Flash rule.
int64_t vocab_size(const GgufFile& g, const std::string& a) {
  if (const GgufValue* v = g.find(a + "vocab_size")) return v->integer;
  for (const GgufTensorInfo& t : g.tensors())
    if (t.name == "token_embd.weight" && t.dims.size() == 2) return t.dims[1];
  return 0;
}

// The experts, shared experts, dense layers (read_gguf_shared_experts) and the routing rule.
Status read_routing(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string gguf_arch = a.substr(0, a.size() - 1);
  BRIGADE_ASSIGN_OR_RETURN(const bool experts, gguf_has_experts(g, gguf_arch));
  if (!experts)
    return unsupported(g.path() + ": " + gguf_arch + " files without experts (" + a + "expert_count 0 or absent: "
                       "Youtu-LLM's) are not supported");
  BRIGADE_RETURN_IF_ERROR(read_gguf_shared_experts(g, a, c));
  BRIGADE_ASSIGN_OR_RETURN(int64_t gating, g.get_int_or(a + "expert_gating_func", kGatingNone));
  if (gating == kGatingNone)  // llama.cpp's default: softmax, but for GLM-4.7-Flash's files
    gating = (c.n_layers == 47 || c.n_layers == 48) && vocab_size(g, a) == 154880 ? kGatingSigmoid : kGatingSoftmax;
  if (gating != kGatingSoftmax && gating != kGatingSigmoid)
    return unsupported(g.path() + ": metadata '" + a + "expert_gating_func' " + std::to_string(gating) +
                       " is not supported for deepseek2; supported: 1 (softmax), 2 (sigmoid)");
  c.moe_scoring = gating == kGatingSigmoid ? MoeScoring::sigmoid : MoeScoring::softmax;
  if (gguf_arch == "mistral4") c.arch = "mistral4";  // llama.cpp's deepseek2 under another name
  else c.arch = gating == kGatingSigmoid ? "deepseek_v3" : "deepseek_v2";
  return read_gguf_deepseek_routing(g, a, c);
}

// dims (outermost first) as RawTensor::shape_string writes them.
std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Tensor blk.{l}.{suffix} (HF name hf) has shape `want` (outermost first); corrupt naming it and
// `keys` otherwise. Absent: corrupt when `required`, else false.
Expected<bool> check_shape(const GgufFile& g, const std::map<std::string, RawTensor>& tensors, int l,
                           const std::string& suffix, const std::vector<int64_t>& want, const std::string& keys,
                           bool required = true) {
  const std::string name = "blk." + std::to_string(l) + "." + suffix;
  auto it = tensors.find("model.layers." + std::to_string(l) + "." + gguf_deepseek2_layer_name(suffix));
  if (it == tensors.end()) {
    if (!required) return false;
    return corrupt(g.path() + ": tensor '" + name + "' is missing");
  }
  if (it->second.shape != want)
    return corrupt(g.path() + ": tensor '" + name + "' has shape " + it->second.shape_string() + "; expected " +
                   shape_string(want) + " from " + keys);
  return true;
}

// The routed experts: gate and up stacked apart (ffn_gate_exps, ffn_up_exps: check_gguf_moe_tensors),
// or fused as ffn_gate_up_exps [E, 2 I, hidden], gate rows first (conversion/mistral3.py's
// Mistral4Model keeps transformers 5's gate_up_proj; llama.cpp's build_moe_ffn splits its output
// in those halves), beside ffn_down_exps and the router.
Status check_fused_or_split_experts(const GgufFile& g, const std::map<std::string, RawTensor>& tensors,
                                    const ModelConfig& c) {
  int first = 0;
  while (first < c.n_layers && !c.is_moe_layer(first)) ++first;
  if (first == c.n_layers ||
      !tensors.contains("model.layers." + std::to_string(first) + "." + gguf_deepseek2_layer_name("ffn_gate_up_exps.weight")))
    return check_gguf_moe_tensors(g, c);
  const int64_t e = c.n_experts, hidden = c.hidden_size, inter = c.moe_intermediate_size;
  const std::string keys = "expert_count, embedding_length and expert_feed_forward_length";
  for (int l = first; l < c.n_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    BRIGADE_RETURN_IF_ERROR(check_shape(g, tensors, l, "ffn_gate_inp.weight", {e, hidden}, keys).status());
    BRIGADE_RETURN_IF_ERROR(check_shape(g, tensors, l, "ffn_gate_up_exps.weight", {e, 2 * inter, hidden}, keys).status());
    BRIGADE_RETURN_IF_ERROR(check_shape(g, tensors, l, "ffn_down_exps.weight", {e, hidden, inter}, keys).status());
  }
  return Status::ok();
}

// The query temperature (Mistral Large 3's; llama.cpp's llm_graph_input_attn_temp): temperature_scale
// s and temperature_length L give every query row at position p the factor
// log(floor(p / L) + 1) * s + 1 (offset 0), on all of the absorbed query and its rope part.
// s absent or 0: none; s without L: corrupt (llama.cpp asserts L != 0 there).
Status read_temperature(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(double scale, g.get_number_or(a + "attention.temperature_scale", 0.0));
  if (!std::isfinite(scale)) return corrupt(g.path() + ": metadata '" + a + "attention.temperature_scale' must be a number");
  if (scale == 0.0) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(int64_t length, g.get_int_or(a + "attention.temperature_length", 0));
  if (length <= 0 || length > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "attention.temperature_scale' needs '" + a +
                   "attention.temperature_length' > 0 (its positions' unit; got " + std::to_string(length) + ")");
  c.attn_temperature_floor = static_cast<float>(length);
  c.attn_temperature_scale = static_cast<float>(scale);
  c.attn_temperature_offset = 0.0f;
  c.attn_temperature_all_layers = true;
  return Status::ok();
}

// llama.cpp's DSA archs (deepseek32: DeepSeek-V3.2, glm-dsa: GLM-5): the indexer's shapes from
// attention.indexer.head_count / key_length / top_k, glm-dsa's attention.indexer.types (true =
// full, false = shared; absent: every layer full, as llama.cpp), the indexer's RoPE as llama.cpp's
// graphs rotate it (deepseek32 NEOX: halves; glm-dsa NORM: adjacent pairs). Sigmoid gating only
// (llama.cpp's loaders require expert_gating_func; both models route so).
Status read_dsa(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const std::string gguf_arch = a.substr(0, a.size() - 1);
  if (c.moe_scoring != MoeScoring::sigmoid)
    return unsupported(g.path() + ": metadata '" + a + "expert_gating_func' must be 2 (sigmoid) for " + gguf_arch);
  const bool glm = gguf_arch == "glm-dsa";
  c.arch = glm ? "glm_moe_dsa" : "deepseek_v32";
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.indexer.head_count", 0, c.dsa.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.indexer.key_length", 0, c.dsa.head_dim));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.indexer.top_k", 0, c.dsa.topk));
  if (c.dsa.head_dim < c.qk_rope_head_dim || c.dsa.head_dim > c.kv_lora_rank + c.qk_rope_head_dim)
    return corrupt(g.path() + ": metadata '" + a + "attention.indexer.key_length' (" + std::to_string(c.dsa.head_dim) +
                   ") must be in [rope.dimension_count, kv_lora_rank + rope.dimension_count]");
  if (c.q_lora_rank <= 0) return corrupt(g.path() + ": " + gguf_arch + " needs attention.q_lora_rank (the indexer's query)");
  c.dsa.rope_style = glm ? RopeStyle::interleaved : RopeStyle::neox;
  c.dsa.shared.assign(static_cast<size_t>(c.n_layers), false);
  const std::string key = a + "attention.indexer.types";
  if (const GgufValue* v = g.find(key); glm && v != nullptr) {
    if (v->type != GgufType::array || v->numbers.size() < static_cast<size_t>(c.n_layers))
      return corrupt(g.path() + ": metadata '" + key + "' must hold one value per layer (" + std::to_string(c.n_layers) + ")");
    for (int l = 0; l < c.n_layers; ++l) c.dsa.shared[static_cast<size_t>(l)] = v->numbers[static_cast<size_t>(l)] == 0.0;
    if (c.dsa.shared[0])
      return corrupt(g.path() + ": metadata '" + key + "' makes layer 0 shared; a shared layer reuses an earlier full one's choice");
  }
  return Status::ok();
}

}  // namespace

bool is_gguf_deepseek2(const std::string& gguf_arch) {
  return gguf_arch == "deepseek2" || gguf_arch == "mistral4" || gguf_arch == "deepseek32" || gguf_arch == "glm-dsa";
}

Status read_gguf_deepseek2(const GgufFile& g, ModelConfig& c) {
  const std::string a = c.arch + ".";  // deepseek2. or mistral4. (the same keys)
  BRIGADE_ASSIGN_OR_RETURN(int64_t nextn, g.get_int_or(a + "nextn_predict_layers", 0));
  if (nextn < 0 || nextn >= c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "nextn_predict_layers' (" + std::to_string(nextn) +
                   ") must be in [0, block_count = " + std::to_string(c.n_layers) + ")");
  c.n_layers -= static_cast<int>(nextn);  // the MTP blocks follow, not loaded
  c.mla_norm_eps = c.rms_eps;  // llama.cpp's latent norms take layer_norm_rms_epsilon
  BRIGADE_RETURN_IF_ERROR(read_temperature(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_mla_widths(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_rope_and_scale(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_routing(g, a, c));
  if (a == "deepseek32." || a == "glm-dsa.") return read_dsa(g, a, c);
  return Status::ok();
}

std::string gguf_deepseek2_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
      {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
      {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
      {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
      {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
      {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
      {"attn_k_b.weight", "self_attn.k_b_proj.weight"},
      {"attn_v_b.weight", "self_attn.v_b_proj.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
      {"ffn_gate_up_exps.weight", "mlp.experts.gate_up_proj"},  // mistral4's (transformers 5's layout)
      {"indexer.attn_q_b.weight", "self_attn.indexer.wq_b.weight"},  // deepseek32 / glm-dsa (DSA's indexer)
      {"indexer.attn_k.weight", "self_attn.indexer.wk.weight"},
      {"indexer.k_norm.weight", "self_attn.indexer.k_norm.weight"},
      {"indexer.k_norm.bias", "self_attn.indexer.k_norm.bias"},
      {"indexer.proj.weight", "self_attn.indexer.weights_proj.weight"}};
  if (auto it = kNames.find(suffix); it != kNames.end()) return it->second;
  return gguf_moe_layer_name(suffix, /*gated_shared_expert=*/false);  // router, experts, shared_experts.*
}

Status finish_gguf_deepseek2(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, h = c.n_heads, r = c.kv_lora_rank, dr = c.qk_rope_head_dim;
  const int64_t dq = c.qk_nope_head_dim + dr, dn = c.qk_nope_head_dim, dv = c.v_head_dim, q = c.q_lora_rank;
  const std::string heads = "attention.head_count " + std::to_string(h), mla = "the key_length_mla / value_length_mla";
  for (int l = 0; l < c.n_layers; ++l) {
    auto check = [&](const std::string& suffix, const std::vector<int64_t>& want, const std::string& keys,
                     bool required = true) { return check_shape(g, tensors, l, suffix, want, keys, required); };
    if (q > 0) {
      BRIGADE_RETURN_IF_ERROR(check("attn_q_a.weight", {q, hidden}, "q_lora_rank").status());
      BRIGADE_RETURN_IF_ERROR(check("attn_q_b.weight", {h * dq, q}, heads + ", " + mla + " and q_lora_rank").status());
    } else {
      BRIGADE_RETURN_IF_ERROR(check("attn_q.weight", {h * dq, hidden}, heads + " and " + mla + " (no q_lora_rank)").status());
    }
    BRIGADE_RETURN_IF_ERROR(check("attn_kv_a_mqa.weight", {r + dr, hidden}, "kv_lora_rank and rope.dimension_count").status());
    BRIGADE_ASSIGN_OR_RETURN(const bool split, check("attn_k_b.weight", {h, r, dn}, heads + ", kv_lora_rank and " + mla, false));
    if (split) {
      BRIGADE_RETURN_IF_ERROR(check("attn_v_b.weight", {h, dv, r}, heads + ", kv_lora_rank and " + mla).status());
    } else {  // a file from before the split: kv_b_proj whole
      BRIGADE_RETURN_IF_ERROR(check("attn_kv_b.weight", {h * (dn + dv), r}, heads + ", kv_lora_rank and key_length / "
                                    "value_length (attn_k_b / attn_v_b absent)").status());
    }
    BRIGADE_RETURN_IF_ERROR(check("attn_output.weight", {hidden, h * dv}, heads + " and " + mla).status());
    for (const char* part : {"k_b_proj", "v_b_proj"}) {  // per head blocks of rows (gguf_deepseek2.h)
      auto it = tensors.find("model.layers." + std::to_string(l) + ".self_attn." + part + ".weight");
      if (it != tensors.end()) it->second.shape = {it->second.shape[0] * it->second.shape[1], it->second.shape[2]};
    }
  }
  return check_fused_or_split_experts(g, tensors, c);
}

}  // namespace brigade
