#include "models/deepseek_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/config_json.h"
#include "models/llama_variants_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// An integer field that may be absent or null (then `fallback`).
Status read_int_or(const json& j, const char* key, int fallback, int& out) {
  out = fallback;
  return read_int(j, key, out, false);
}

// config.json's defaults for the MLA shapes (transformers' configs; q_lora_rank's where the field
// is absent: null means q_proj).
struct MlaDefaults {
  int q_lora, kv_lora, nope, rope, v;
};
constexpr MlaDefaults kDeepseekMla{1536, 512, 128, 64, 128};  // DeepseekV2Config's and V3Config's (YoutuConfig's too)
constexpr MlaDefaults kMistral4Mla{1024, 256, 64, 64, 128};
constexpr MlaDefaults kGlm4MoeLiteMla{768, 512, 192, 64, 256};
constexpr MlaDefaults kDeepseekV32Mla{1536, 512, 128, 64, 128};
constexpr MlaDefaults kGlmMoeDsaMla{2048, 512, 192, 64, 256};

// The MLA shapes, the RoPE layout and the softmax scale. `interleave_key`: whether config.json's
// rope_interleave is read (V3 and its descendants; V2 always rotates adjacent pairs).
Status read_mla(const json& j, ModelConfig& c, const MlaDefaults& d, bool interleave_key) {
  c.q_lora_rank = d.q_lora;
  if (auto it = j.find("q_lora_rank"); it != j.end() && it->is_null()) c.q_lora_rank = 0;  // null: q_proj
  else BRIGADE_RETURN_IF_ERROR(read_int(j, "q_lora_rank", c.q_lora_rank, false));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "kv_lora_rank", d.kv_lora, c.kv_lora_rank));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "qk_nope_head_dim", d.nope, c.qk_nope_head_dim));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "qk_rope_head_dim", d.rope, c.qk_rope_head_dim));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "v_head_dim", d.v, c.v_head_dim));
  // transformers sets head_dim = qk_rope_head_dim: the RoPE frequencies are over the rotary part.
  c.head_dim = c.qk_rope_head_dim;
  c.n_kv_heads = c.n_heads;  // num_key_value_heads is not used by MLA (one latent per token)
  // V2 rotates adjacent pairs (complex multiply); V3 does when rope_interleave (its default), and
  // writes the rotated pairs de-interleaved, a permutation q and k share, so scores are the same.
  bool interleave = true;
  if (interleave_key) BRIGADE_RETURN_IF_ERROR(read_bool(j, "rope_interleave", interleave));
  c.rope_style = interleave ? RopeStyle::interleaved : RopeStyle::neox;
  // Softmax scale: 1 / sqrt(qk_nope + qk_rope), times yarn's mscale(factor, mscale_all_dim)^2.
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.qk_nope_head_dim + c.qk_rope_head_dim));
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::yarn && rs.mscale_all_dim > 0.0f) {
    const float m = yarn_mscale(rs.factor, rs.mscale_all_dim);
    c.attn_scale *= m * m;
  }
  return Status::ok();
}

// invalid_argument naming `name` unless v > 0.
Status positive(const char* name, int v) {
  if (v <= 0) return invalid_argument(std::string("model config: ") + name + " must be > 0 (got " + std::to_string(v) + ")");
  return Status::ok();
}

// hidden_act, which must be silu (the experts' and MLPs' SwiGLU) when present.
Status read_silu(const json& j) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported; supported: silu");
  return Status::ok();
}

// config.json's defaults for the routed and shared experts (transformers' configs).
struct RoutingDefaults {
  int experts, k, inter, shared, first_dense, n_group, topk_group;
  bool norm_topk_prob;
  float scale;
};
constexpr RoutingDefaults kV2Defaults{64, 0, 1407, 2, 0, 1, 1, false, 1.0f};
constexpr RoutingDefaults kV3Defaults{256, 8, 2048, 1, 3, 8, 4, true, 2.5f};
constexpr RoutingDefaults kGlm4MoeDefaults{128, 8, 1408, 1, 1, 1, 1, true, 1.0f};
constexpr RoutingDefaults kMistral4Defaults{128, 4, 2048, 1, 0, 1, 1, true, 1.0f};
// Glm4MoeLiteConfig's (its dense layers come from mlp_layer_types: read_mlp_layer_types).
constexpr RoutingDefaults kGlm4MoeLiteDefaults{64, 4, 1536, 1, 0, 1, 1, true, 1.8f};
// DeepseekV32Config's and GlmMoeDsaConfig's (dense layers: mlp_layer_types, else first_k_dense_replace's 3).
constexpr RoutingDefaults kDeepseekV32Defaults{256, 8, 2048, 1, 3, 8, 4, true, 2.5f};
constexpr RoutingDefaults kGlmMoeDsaDefaults{256, 8, 2048, 1, 3, 1, 1, true, 2.5f};
// Dots1Config's: no default for the experts' and shared experts' counts or k (0 here, which
// validate_grouped_moe refuses by name; n_shared_experts must be given: read_dots1).
constexpr RoutingDefaults kDots1Defaults{0, 0, 1408, 0, 0, 1, 1, false, 1.0f};
// AXK1Config's: 192 experts of 2048, top 8 of 4 groups of 8, one shared, the first layer dense.
constexpr RoutingDefaults kAxk1Defaults{192, 8, 2048, 1, 1, 8, 4, true, 2.5f};

// The routed and shared experts' numbers and where the sparse layers start.
Status read_experts(const json& j, ModelConfig& c, const RoutingDefaults& d) {
  const char* experts_key = j.contains("n_routed_experts") ? "n_routed_experts" : "num_local_experts";
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, experts_key, d.experts, c.n_experts));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "num_experts_per_tok", d.k, c.n_experts_per_tok));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "moe_intermediate_size", d.inter, c.moe_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "n_shared_experts", d.shared, c.n_shared_experts));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "first_k_dense_replace", d.first_dense, c.first_k_dense_replace));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "n_group", d.n_group, c.n_group));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "topk_group", d.topk_group, c.topk_group));
  c.norm_topk_prob = d.norm_topk_prob;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  c.routed_scaling_factor = d.scale;
  return read_float(j, "routed_scaling_factor", c.routed_scaling_factor);
}

// num_nextn_predict_layers: the MTP modules stored after the layers (DeepSeek-V3 / V3.2, GLM-4.5,
// GLM-4.7-Flash, GLM-5).
Status read_mtp_layers(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "num_nextn_predict_layers", 0, c.n_mtp_layers));
  if (c.n_mtp_layers < 0)
    return invalid_argument("model config: num_nextn_predict_layers must be >= 0 (got " + std::to_string(c.n_mtp_layers) + ")");
  return Status::ok();
}

// DeepseekV3TopkRouter's rule (GLM-4.5's Glm4MoeTopkRouter is the same): sigmoid scores, the
// e_score_correction_bias shifting the selection only, groups scored by their two best.
Status read_sigmoid_routing(const json& j, ModelConfig& c) {
  std::string scoring, method;
  BRIGADE_RETURN_IF_ERROR(read_string(j, "scoring_func", scoring));
  BRIGADE_RETURN_IF_ERROR(read_string(j, "topk_method", method));
  if (!scoring.empty() && scoring != "sigmoid")
    return unsupported("config.json: scoring_func '" + scoring + "' is not supported for " + c.arch +
                       "; supported: sigmoid");
  if (!method.empty() && method != "noaux_tc")
    return unsupported("config.json: topk_method '" + method + "' is not supported for " + c.arch +
                       "; supported: noaux_tc");
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_score_bias = true;
  c.moe_group_score = c.n_group > 1 ? MoeGroupScore::top2_sum : MoeGroupScore::none;
  return Status::ok();
}

// moe_layer_freq, which must be 1: transformers' DeepSeek (and dots.llm1) makes every layer from
// first_k_dense_replace on sparse.
Status check_moe_layer_freq(const json& j) {
  int freq = 1;
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "moe_layer_freq", 1, freq));
  if (freq != 1)
    return unsupported("config.json: moe_layer_freq = " + std::to_string(freq) +
                       " is not supported (transformers makes every layer from first_k_dense_replace on sparse); "
                       "use 1");
  return Status::ok();
}

// The routed experts, the shared ones and the routing rule.
Status read_routing(const json& j, ModelConfig& c, bool v3) {
  BRIGADE_RETURN_IF_ERROR(read_experts(j, c, v3 ? kV3Defaults : kV2Defaults));
  BRIGADE_RETURN_IF_ERROR(read_mtp_layers(j, c));
  BRIGADE_RETURN_IF_ERROR(check_moe_layer_freq(j));
  if (v3) return read_sigmoid_routing(j, c);
  std::string scoring, method;
  BRIGADE_RETURN_IF_ERROR(read_string(j, "scoring_func", scoring));
  BRIGADE_RETURN_IF_ERROR(read_string(j, "topk_method", method));
  if (!scoring.empty() && scoring != "softmax")
    return unsupported("config.json: scoring_func '" + scoring + "' is not supported for deepseek_v2; supported: softmax");
  if (method.empty()) method = "greedy";
  if (method != "greedy" && method != "group_limited_greedy")
    return unsupported("config.json: topk_method '" + method +
                       "' is not supported for deepseek_v2; supported: greedy, group_limited_greedy");
  if (c.norm_topk_prob)
    return unsupported("config.json: norm_topk_prob = true is not supported for deepseek_v2 (transformers' "
                       "DeepseekV2 ignores it, the original code renormalises: the reference is ambiguous)");
  c.moe_scoring = MoeScoring::softmax;
  c.moe_group_score = method == "group_limited_greedy" && c.n_group > 1 ? MoeGroupScore::max : MoeGroupScore::none;
  return Status::ok();
}

// Mistral4TopkRouter's rule: softmax scores (no selection bias), groups by their two best, the
// top-k of the kept groups' scores, renormalised with norm_topk_prob, times routed_scaling_factor.
// The config has no scoring_func / topk_method, and transformers reads none.
Status read_mistral4_routing(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_experts(j, c, kMistral4Defaults));
  c.moe_scoring = MoeScoring::softmax;
  c.moe_score_bias = false;
  c.moe_group_score = c.n_group > 1 ? MoeGroupScore::top2_sum : MoeGroupScore::none;
  return Status::ok();
}

// Glm4MoeLiteConfig's mlp_layer_types ("dense" / "sparse" per layer; absent: the first
// `n_dense` layers dense, the others sparse): a dense prefix as first_k_dense_replace, other dense
// layers as mlp_only_layers.
Status read_mlp_layer_types(const json& j, ModelConfig& c, int n_dense = 1) {
  std::vector<bool> dense(static_cast<size_t>(std::max(c.n_layers, 0)), false);
  for (int l = 0; l < std::min(n_dense, c.n_layers); ++l) dense[static_cast<size_t>(l)] = true;
  if (auto it = j.find("mlp_layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != dense.size())
      return corrupt("config.json: mlp_layer_types must list one of \"dense\" / \"sparse\" per layer (" +
                     std::to_string(c.n_layers) + ")");
    for (size_t l = 0; l < dense.size(); ++l) {
      const json& t = (*it)[l];
      if (!t.is_string() || (t != "dense" && t != "sparse"))
        return corrupt("config.json: mlp_layer_types[" + std::to_string(l) + "] must be \"dense\" or \"sparse\" (got " +
                       t.dump() + ")");
      dense[l] = t == "dense";
    }
  }
  c.first_k_dense_replace = 0;
  while (c.first_k_dense_replace < c.n_layers && dense[static_cast<size_t>(c.first_k_dense_replace)])
    ++c.first_k_dense_replace;
  c.mlp_only_layers.clear();
  for (int l = c.first_k_dense_replace; l < c.n_layers; ++l)
    if (dense[static_cast<size_t>(l)]) c.mlp_only_layers.push_back(l);
  return Status::ok();
}

// GLM-4.7-Flash's RoPE: transformers aliases head_dim to qk_rope_head_dim and rotates
// partial_rotary_factor of it, which must be 1 for the rotary part to be the whole q_pe / k_pe.
Status check_glm4_moe_lite_rope(const json& j, const std::string& arch) {
  for (const json* o : {&j, j.contains("rope_parameters") ? &j["rope_parameters"] : nullptr}) {
    if (o == nullptr || !o->is_object()) continue;
    float partial = 1.0f;
    BRIGADE_RETURN_IF_ERROR(read_float(*o, "partial_rotary_factor", partial));
    if (partial != 1.0f)
      return unsupported("config.json: partial_rotary_factor " + std::to_string(partial) +
                         " is not supported for " + arch + " (the rotary part is all of qk_rope_head_dim); use 1");
  }
  return Status::ok();
}

// GLM-5's indexer_types ("full" / "shared" per layer), else GlmMoeDsaConfig's rule from
// index_topk_pattern ("F" / "S" per layer) or index_topk_freq (1) and index_skip_topk_offset (2):
// layer l is full when max(l - offset + 1, 0) % freq == 0.
Status read_indexer_types(const json& j, ModelConfig& c) {
  const size_t n = static_cast<size_t>(std::max(c.n_layers, 0));
  auto& shared = c.dsa.shared;
  shared.assign(n, false);
  const json* list = nullptr;
  if (auto it = j.find("indexer_types"); it != j.end() && !it->is_null()) list = &*it;
  else if (auto p = j.find("index_topk_pattern"); p != j.end() && !p->is_null()) list = &*p;
  if (list != nullptr && list->is_string()) {
    const std::string pattern = list->get<std::string>();
    if (pattern.size() != n || pattern.find_first_not_of("FS") != std::string::npos)
      return corrupt("config.json: index_topk_pattern must hold one F (full) or S (shared) per layer (" +
                     std::to_string(n) + "), got '" + pattern + "'");
    for (size_t l = 0; l < n; ++l) shared[l] = pattern[l] == 'S';
  } else if (list != nullptr) {
    if (!list->is_array() || list->size() != n)
      return corrupt("config.json: indexer_types must list \"full\" or \"shared\" per layer (" + std::to_string(n) + ")");
    for (size_t l = 0; l < n; ++l) {
      const json& t = (*list)[l];
      if (!t.is_string() || (t != "full" && t != "shared"))
        return corrupt("config.json: indexer_types[" + std::to_string(l) + "] must be \"full\" or \"shared\" (got " +
                       t.dump() + ")");
      shared[l] = t == "shared";
    }
  } else {
    int freq = 1, offset = 2;
    BRIGADE_RETURN_IF_ERROR(read_int_or(j, "index_topk_freq", 1, freq));
    BRIGADE_RETURN_IF_ERROR(read_int_or(j, "index_skip_topk_offset", 2, offset));
    freq = std::max(freq, 1);
    for (size_t l = 0; l < n; ++l) shared[l] = std::max(static_cast<int>(l) - offset + 1, 0) % freq != 0;
  }
  if (!shared.empty() && shared[0])
    return invalid_argument("config.json: indexer_types[0] is \"shared\", but a shared layer reuses an earlier full "
                            "layer's choice; layer 0 must be \"full\"");
  return Status::ok();
}

// DeepSeek-V3.2's and GLM-5's layer: DeepSeek-V3's MLA (always q_lora_rank, always interleaved
// RoPE: transformers' DeepseekV32Attention reads no rope_interleave), the DSA indexer's shapes
// (index_n_heads, index_head_dim, index_topk) and DeepseekV3TopkRouter's routing.
Status read_dsa_model(const json& j, ModelConfig& c) {
  const bool glm = c.arch == "glm_moe_dsa";
  if (glm) {
    BRIGADE_RETURN_IF_ERROR(check_glm4_moe_lite_rope(j, c.arch));
    if (!j.contains("rms_norm_eps")) c.rms_eps = 1e-5f;  // GlmMoeDsaConfig's
  }
  BRIGADE_RETURN_IF_ERROR(read_mla(j, c, glm ? kGlmMoeDsaMla : kDeepseekV32Mla, /*interleave_key=*/false));
  if (c.q_lora_rank <= 0)
    return unsupported("config.json: q_lora_rank null is not supported for " + c.arch +
                       " (the DSA indexer's query is made from q_a_layernorm's output); give q_lora_rank");
  BRIGADE_RETURN_IF_ERROR(read_experts(j, c, glm ? kGlmMoeDsaDefaults : kDeepseekV32Defaults));
  BRIGADE_RETURN_IF_ERROR(read_mlp_layer_types(j, c, c.first_k_dense_replace));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "index_n_heads", glm ? 32 : 64, c.dsa.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "index_head_dim", 128, c.dsa.head_dim));
  BRIGADE_RETURN_IF_ERROR(read_int_or(j, "index_topk", 2048, c.dsa.topk));
  BRIGADE_RETURN_IF_ERROR(positive("index_n_heads", c.dsa.n_heads));
  BRIGADE_RETURN_IF_ERROR(positive("index_topk", c.dsa.topk));
  if (c.dsa.head_dim < c.qk_rope_head_dim || c.dsa.head_dim > c.kv_lora_rank + c.qk_rope_head_dim)
    return invalid_argument("config.json: index_head_dim (" + std::to_string(c.dsa.head_dim) + ") must be in [qk_rope_head_dim, "
                            "kv_lora_rank + qk_rope_head_dim] = [" + std::to_string(c.qk_rope_head_dim) + ", " +
                            std::to_string(c.kv_lora_rank + c.qk_rope_head_dim) +
                            "] (the rotated part leads it; its cache rows share the latent's width)");
  c.dsa.rope_style = glm ? RopeStyle::interleaved : RopeStyle::neox;
  if (glm) BRIGADE_RETURN_IF_ERROR(read_indexer_types(j, c));
  else c.dsa.shared.assign(static_cast<size_t>(std::max(c.n_layers, 0)), false);
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "index_share_for_mtp_iteration", c.dsa.share_for_mtp));
  BRIGADE_RETURN_IF_ERROR(read_mtp_layers(j, c));
  return read_sigmoid_routing(j, c);
}

}  // namespace

// MiniCPM 3's muP scalings as Granite's multipliers: scale_emb (12), scale_depth / sqrt(layers) (1.4;
// null: 1), hidden / dim_model_base (256; null: 1).
static Status read_minicpm3_scalings(const json& j, ModelConfig& c) {
  float scale_emb = 12.0f, scale_depth = 1.4f, dim_model_base = 256.0f;
  const bool depth_null = j.contains("scale_depth") && j["scale_depth"].is_null();
  const bool base_null = j.contains("dim_model_base") && j["dim_model_base"].is_null();
  BRIGADE_RETURN_IF_ERROR(read_float(j, "scale_emb", scale_emb));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "scale_depth", scale_depth));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "dim_model_base", dim_model_base));
  for (auto [key, v] : {std::pair{"scale_emb", scale_emb}, {"scale_depth", scale_depth}, {"dim_model_base", dim_model_base}})
    if (!(v > 0.0f) || !std::isfinite(v)) return invalid_argument(std::string("config.json: ") + key + " must be a positive number");
  c.embedding_multiplier = scale_emb;
  c.residual_multiplier = depth_null ? 1.0f : scale_depth / std::sqrt(static_cast<float>(c.n_layers));
  c.logits_scaling = base_null ? 1.0f : static_cast<float>(c.hidden_size) / dim_model_base;
  return Status::ok();
}

Status read_deepseek(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_silu(j));
  if (c.arch == "deepseek_v32" || c.arch == "glm_moe_dsa") return read_dsa_model(j, c);
  if (c.arch == "mistral4") {
    BRIGADE_RETURN_IF_ERROR(read_mla(j, c, kMistral4Mla, /*interleave_key=*/true));
    BRIGADE_RETURN_IF_ERROR(read_llama4_scaling_beta(j, c));  // models/llama_variants_config.h
    return read_mistral4_routing(j, c);
  }
  if (c.arch == "glm4_moe_lite") {
    BRIGADE_RETURN_IF_ERROR(check_glm4_moe_lite_rope(j, c.arch));
    if (!j.contains("rms_norm_eps")) c.rms_eps = 1e-5f;  // Glm4MoeLiteConfig's
    BRIGADE_RETURN_IF_ERROR(read_mla(j, c, kGlm4MoeLiteMla, /*interleave_key=*/true));
    BRIGADE_RETURN_IF_ERROR(read_experts(j, c, kGlm4MoeLiteDefaults));
    BRIGADE_RETURN_IF_ERROR(read_mlp_layer_types(j, c));
    BRIGADE_RETURN_IF_ERROR(read_mtp_layers(j, c));
    return read_sigmoid_routing(j, c);
  }
  if (c.arch == "minicpm3") {  // MiniCPM3Config: DeepseekV2Attention's MLA rotating halves, dense layers, muP
    const MlaDefaults d{768, 256, 64, 32, c.n_heads > 0 ? c.hidden_size / c.n_heads : 0};
    BRIGADE_RETURN_IF_ERROR(read_mla(j, c, d, /*interleave_key=*/false));
    c.rope_style = RopeStyle::neox;  // the original cos / sin RoPE (rotate_half), not V2's complex one
    c.n_experts = 0;
    c.first_k_dense_replace = c.n_layers;
    c.n_mtp_layers = 0;
    return read_minicpm3_scalings(j, c);
  }
  if (c.arch == "youtu") {  // YoutuConfig: DeepseekV3Attention's MLA (its defaults) over dense SwiGLU layers
    BRIGADE_RETURN_IF_ERROR(read_mla(j, c, kDeepseekMla, /*interleave_key=*/true));
    c.n_experts = 0;
    c.first_k_dense_replace = c.n_layers;
    c.n_mtp_layers = 0;
    return Status::ok();
  }
  if (c.arch == "axk1") {  // AXK1Config: V3's layer, an RMSNorm on each sparse layer's MoE output
    BRIGADE_RETURN_IF_ERROR(read_mla(j, c, kDeepseekMla, /*interleave_key=*/true));
    if (c.q_lora_rank <= 0)
      return unsupported("config.json: q_lora_rank null is not supported for axk1 (AXK1Attention always has q_a_proj)");
    BRIGADE_RETURN_IF_ERROR(read_experts(j, c, kAxk1Defaults));
    BRIGADE_RETURN_IF_ERROR(check_moe_layer_freq(j));
    BRIGADE_RETURN_IF_ERROR(read_mlp_layer_types(j, c, c.first_k_dense_replace));
    c.n_mtp_layers = 0;
    c.moe_post_norm = true;
    return read_sigmoid_routing(j, c);
  }
  const bool v3 = c.arch == "deepseek_v3";
  BRIGADE_RETURN_IF_ERROR(read_mla(j, c, kDeepseekMla, /*interleave_key=*/v3));
  return read_routing(j, c, v3);
}

Status read_glm4_moe(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_silu(j));
  BRIGADE_RETURN_IF_ERROR(read_experts(j, c, kGlm4MoeDefaults));
  // MiniCPM 5's (models/alias_configs.h): dense layers by mlp_layer_types, the output gate.
  if (j.contains("mlp_layer_types")) BRIGADE_RETURN_IF_ERROR(read_mlp_layer_types(j, c, c.first_k_dense_replace));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_gated_attention", c.attn_gate));
  BRIGADE_RETURN_IF_ERROR(read_mtp_layers(j, c));
  return read_sigmoid_routing(j, c);
}

Status read_dots1(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_silu(j));
  if (auto it = j.find("n_shared_experts"); it == j.end() || it->is_null())
    return invalid_argument("config.json: n_shared_experts is missing (Dots1Config has no default; dots.llm1's is 2)");
  BRIGADE_RETURN_IF_ERROR(read_experts(j, c, kDots1Defaults));
  BRIGADE_RETURN_IF_ERROR(check_moe_layer_freq(j));
  return read_sigmoid_routing(j, c);
}

Status read_dense_mlp_layers(const json& j, ModelConfig& c, int n_dense) { return read_mlp_layer_types(j, c, n_dense); }

Status validate_grouped_moe(const ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(positive("n_routed_experts", c.n_experts));
  BRIGADE_RETURN_IF_ERROR(positive("moe_intermediate_size", c.moe_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(positive("n_group", c.n_group));
  if (c.n_shared_experts < 0) return invalid_argument("model config: n_shared_experts must be >= 0");
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.n_layers)
    return invalid_argument("model config: first_k_dense_replace must be in [0, num_hidden_layers = " +
                            std::to_string(c.n_layers) + "] (got " + std::to_string(c.first_k_dense_replace) + ")");
  if (!(c.routed_scaling_factor > 0.0f) || !std::isfinite(c.routed_scaling_factor))
    return invalid_argument("model config: routed_scaling_factor must be a positive number");
  const int e = c.n_experts, g = c.n_group;
  if (e % g != 0)
    return invalid_argument("model config: n_routed_experts (" + std::to_string(e) + ") must be a multiple of n_group (" +
                            std::to_string(g) + ")");
  if (c.topk_group < 1 || c.topk_group > g)
    return invalid_argument("model config: topk_group must be in [1, n_group = " + std::to_string(g) + "] (got " +
                            std::to_string(c.topk_group) + ")");
  if (c.moe_group_score == MoeGroupScore::top2_sum && e / g < 2)
    return invalid_argument("model config: " + c.arch + " scores a group by its two best experts; n_routed_experts / "
                            "n_group must be >= 2 (got " + std::to_string(e / g) + ")");
  const int allowed = c.moe_group_score == MoeGroupScore::none ? e : c.topk_group * (e / g);
  if (c.n_experts_per_tok < 1 || c.n_experts_per_tok > allowed)
    return invalid_argument("model config: num_experts_per_tok must be in [1, " + std::to_string(allowed) +
                            "] (the experts of topk_group groups; got " + std::to_string(c.n_experts_per_tok) + ")");
  return Status::ok();
}

Status validate_deepseek(const ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(positive("kv_lora_rank", c.kv_lora_rank));
  BRIGADE_RETURN_IF_ERROR(positive("qk_nope_head_dim", c.qk_nope_head_dim));
  BRIGADE_RETURN_IF_ERROR(positive("qk_rope_head_dim", c.qk_rope_head_dim));
  BRIGADE_RETURN_IF_ERROR(positive("v_head_dim", c.v_head_dim));
  if (c.q_lora_rank < 0) return invalid_argument("model config: q_lora_rank must be > 0 or null");
  if (c.arch == "youtu" || c.arch == "minicpm3") return Status::ok();  // no experts
  return validate_grouped_moe(c);
}

}  // namespace brigade
