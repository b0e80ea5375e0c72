#include "models/alias_configs.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "models/config_json.h"
#include "models/fused_rows.h"

namespace brigade {

using nlohmann::json;

namespace {

// `key` set to `value` where config.json lacks it (or holds null).
void default_to(json& j, const char* key, const json& value) {
  if (auto it = j.find(key); it == j.end() || it->is_null()) j[key] = value;
}

bool names(const json& j, const char* cls, const char* type) {
  const std::string a = config_architecture(j);
  return a.empty() ? config_model_type(j) == type : a == cls;
}

// unsupported, naming the field, when any of `keys` is set to something other than null, 0 or false
// (fields the aliased config class does not have; the target's reader would act on them).
Status refuse_set(const json& j, std::initializer_list<const char*> keys, const char* what) {
  for (const char* key : keys) {
    const auto it = j.find(key);
    if (it != j.end() && !it->is_null() && *it != json(0) && *it != json(false))
      return unsupported(std::string("config.json: ") + key + " " + it->dump() + " is not supported for " + what);
  }
  return Status::ok();
}

// Named Glm4MoeForCausalLM, whole heads rotated unless the config names a partial factor
// (Glm4MoeConfig's default 0.5 is not the aliases'), `theta` where no rope_theta is given.
void to_glm4_moe(json& j, double theta) {
  bool partial = j.contains("partial_rotary_factor");
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && it->is_object() && it->contains("partial_rotary_factor")) partial = true;
  if (!partial) j["partial_rotary_factor"] = 1.0;
  const auto rope = j.find("rope_parameters");
  if (!j.contains("rope_theta") && !(rope != j.end() && rope->is_object() && rope->contains("rope_theta"))) j["rope_theta"] = theta;
  j["architectures"] = json::array({"Glm4MoeForCausalLM"});
  j["model_type"] = "glm4_moe";
}

// The rest of Glm4MoeForCausalLM's config for a model with Llama's attention over GLM-4.5's experts:
// no q/k norms, no MTP layers (to_glm4_moe's rotation and theta).
void as_glm4_moe(json& j, double theta) {
  j["use_qk_norm"] = false;
  j["num_nextn_predict_layers"] = 0;
  to_glm4_moe(j, theta);
}

Status iquestcoder(json& j) {
  if (auto clip = j.find("clip_qkv"); clip != j.end() && !clip->is_null())
    return unsupported("config.json: clip_qkv is not supported for IQuestCoderForCausalLM (transformers refuses it too)");
  bool sliding = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_sliding_window", sliding));
  if (sliding)
    return unsupported("config.json: use_sliding_window true is not supported for IQuestCoderForCausalLM (transformers "
                       "refuses it too)");
  for (const auto& [key, value] : {std::pair<const char*, json>{"vocab_size", 76800}, {"hidden_size", 5120},
                                   {"intermediate_size", 27648}, {"num_hidden_layers", 80}, {"num_attention_heads", 40},
                                   {"num_key_value_heads", 8}, {"max_position_embeddings", 131072},
                                   {"rms_norm_eps", 1e-5}, {"head_dim", 128}, {"bos_token_id", 1}, {"eos_token_id", 2}})
    default_to(j, key, value);
  j["architectures"] = json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j.erase("sliding_window");  // LlamaConfig has none; IQuestCoder's applies only with use_sliding_window
  return Status::ok();
}

Status solar_open(json& j) {
  if (auto it = j.find("num_local_experts"); it != j.end() && !j.contains("n_routed_experts")) j["n_routed_experts"] = *it;
  for (const auto& [key, value] :
       {std::pair<const char*, json>{"vocab_size", 196608}, {"moe_intermediate_size", 1280}, {"num_hidden_layers", 48},
        {"num_attention_heads", 64}, {"head_dim", 128}, {"num_experts_per_tok", 8}, {"hidden_size", 4096},
        {"num_key_value_heads", 8}, {"n_routed_experts", 128}, {"n_shared_experts", 1}, {"n_group", 1},
        {"topk_group", 1}, {"routed_scaling_factor", 1.0}, {"norm_topk_prob", true},
        {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5}})
    default_to(j, key, value);
  // Every layer sparse, Llama's attention (no q/k norms), no MTP; the whole head rotated unless the
  // rope parameters name a partial factor (SolarOpenConfig does not set Glm4MoeConfig's 0.5).
  BRIGADE_RETURN_IF_ERROR(refuse_set(j, {"first_k_dense_replace", "use_qk_norm", "num_nextn_predict_layers"},
                                     "SolarOpenForCausalLM (SolarOpenConfig has no such field: every layer is sparse, "
                                     "without q/k norms or MTP layers)"));
  j["first_k_dense_replace"] = 0;
  default_to(j, "intermediate_size", j["moe_intermediate_size"]);  // no dense layer reads it
  as_glm4_moe(j, 1000000.0);  // SolarOpenConfig's default_theta
  return Status::ok();
}

Status minicpm5_moe(json& j) {
  bool gated = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_gated_attention", gated));
  if (!gated)
    return unsupported("config.json: use_gated_attention false is not supported for MiniCPM5MoeForCausalLM "
                       "(transformers refuses it too)");
  bool bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", bias));
  if (bias)
    return unsupported("config.json: attention_bias true is not supported for MiniCPM5MoeForCausalLM (its o_proj would "
                       "carry a bias too); no released checkpoint sets it");
  BRIGADE_RETURN_IF_ERROR(refuse_set(j, {"use_qk_norm", "num_nextn_predict_layers"},
                                     "MiniCPM5MoeForCausalLM (MiniCPM5MoeConfig has no such field)"));
  if (auto it = j.find("num_local_experts"); it != j.end() && !j.contains("n_routed_experts")) j["n_routed_experts"] = *it;
  for (const auto& [key, value] :
       {std::pair<const char*, json>{"vocab_size", 130560}, {"hidden_size", 2048}, {"intermediate_size", 8192},
        {"num_hidden_layers", 28}, {"num_attention_heads", 32}, {"num_key_value_heads", 2}, {"head_dim", 128},
        {"max_position_embeddings", 524288}, {"rms_norm_eps", 1e-6}, {"n_routed_experts", 160},
        {"routed_scaling_factor", 3.66}, {"num_experts_per_tok", 16}, {"moe_intermediate_size", 512},
        {"n_shared_experts", 1}, {"n_group", 1}, {"topk_group", 1}, {"norm_topk_prob", true}, {"bos_token_id", 0},
        {"eos_token_id", json::array({1, 130073})}, {"pad_token_id", 1}})
    default_to(j, key, value);
  j["use_gated_attention"] = true;
  as_glm4_moe(j, 5000000.0);  // MiniCPM5MoeConfig's default_theta
  return Status::ok();
}

// The original configs' names for fields the config classes read under others (the attribute_map
// of Param2MoeConfig, SarvamMoEConfig and SarvamMLAConfig), where the other is absent.
void original_names(json& j) {
  for (const auto& [theirs, ours] : {std::pair<const char*, const char*>{"num_experts", "n_routed_experts"},
                                     {"num_local_experts", "n_routed_experts"}, {"num_shared_experts", "n_shared_experts"},
                                     {"use_qkv_bias", "attention_bias"}, {"num_mtp_layers", "num_nextn_predict_layers"}})
    if (auto it = j.find(theirs); it != j.end() && !j.contains(ours)) j[ours] = *it;
}

// BharatGen Param2 MoE and Sarvam MoE: config classes over Glm4MoeConfig, which transformers runs as
// Glm4MoeForCausalLM: q/k norms on and whole heads rotated, each class's shape and RoPE base
// where absent, Glm4MoeConfig's defaults for the rest (its reader's), the checkpoints' own names.
Status glm4_moe_original(json& j, std::initializer_list<std::pair<const char*, json>> defaults, double theta) {
  original_names(j);
  for (const auto& [key, value] : defaults) default_to(j, key, value);
  to_glm4_moe(j, theta);
  return Status::ok();
}

Status param2moe(json& j) {
  return glm4_moe_original(
      j,
      {{"vocab_size", 128000}, {"hidden_size", 2048}, {"intermediate_size", 9216}, {"num_hidden_layers", 21},
       {"num_attention_heads", 32}, {"head_dim", 64}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6},
       {"tie_word_embeddings", true}, {"moe_intermediate_size", 2048}, {"num_experts_per_tok", 6},
       {"n_shared_experts", 2}, {"n_routed_experts", 64}, {"routed_scaling_factor", 2.5}, {"use_qk_norm", true},
       {"num_nextn_predict_layers", 0}, {"pad_token_id", 0}, {"eos_token_id", 3}},
      500000.0);  // Param2MoeConfig's default_theta
}

Status sarvam_moe(json& j) {
  return glm4_moe_original(
      j,
      {{"vocab_size", 262144}, {"intermediate_size", 8192}, {"num_hidden_layers", 19}, {"num_attention_heads", 64},
       {"num_key_value_heads", 4}, {"head_dim", 64}, {"rms_norm_eps", 1e-6}, {"moe_intermediate_size", 1024},
       {"num_experts_per_tok", 6}, {"routed_scaling_factor", 2.5}, {"use_qk_norm", true},
       {"num_nextn_predict_layers", 0}, {"pad_token_id", 0}, {"eos_token_id", 1}},
      8000000.0);  // SarvamMoEConfig's default_theta
}

// Tencent Hy3 (hy_v3: HYV3ForCausalLM, tencent/Hy3-preview): DeepSeek-V3's MoE (sigmoid scores,
// chosen with the selection bias, renormalised, times router_scaling_factor) beside shared
// experts of moe_intermediate_size each, behind Apertus's attention (per-head q/k norms), after a
// dense first layer (mlp_layer_types): GLM-4.5's layout with q/k norms, whole heads rotated, no
// groups, HYV3Config's defaults. Apertus's attention_bias would bias o_proj too, and mlp_bias
// every MLP, which GLM-4.5's layer does not: refused by name (no released checkpoint sets them).
Status hy_v3(json& j) {
  BRIGADE_RETURN_IF_ERROR(refuse_set(j, {"attention_bias", "mlp_bias"},
                                     "HYV3ForCausalLM (its attention and MLPs are run without biases)"));
  original_names(j);
  if (auto it = j.find("router_scaling_factor"); it != j.end() && !j.contains("routed_scaling_factor"))
    j["routed_scaling_factor"] = *it;
  for (const auto& [key, value] :
       {std::pair<const char*, json>{"vocab_size", 120832}, {"hidden_size", 4096}, {"intermediate_size", 13312},
        {"num_hidden_layers", 80}, {"num_attention_heads", 64}, {"num_key_value_heads", 8}, {"head_dim", 128},
        {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5}, {"n_routed_experts", 192},
        {"num_experts_per_tok", 8}, {"n_shared_experts", 1}, {"moe_intermediate_size", 1536},
        {"routed_scaling_factor", 2.826}, {"n_group", 1}, {"topk_group", 1}, {"norm_topk_prob", true}})
    default_to(j, key, value);
  j["use_qk_norm"] = true;  // ApertusAttention's q_norm / k_norm, always
  if (!j.contains("mlp_layer_types") && !j.contains("first_k_dense_replace")) j["first_k_dense_replace"] = 1;
  to_glm4_moe(j, 11158840.0);  // HYV3Config's default_theta
  return Status::ok();
}

// Sarvam MLA (sarvam-105b): SarvamMLAConfig over DeepseekV3Config, run as DeepseekV3ForCausalLM.
// Its original format: head_dim (kv_lora_rank + qk_rope_head_dim, for vLLM's MLA) and q_head_dim
// dropped (transformers derives both), rope_scaling of type deepseek_yarn read as yarn; its names
// for the expert counts; SarvamMLAConfig's defaults (one group, layer 0 dense, no q_lora_rank,
// the 105B's shape) where absent, DeepseekV3Config's for the rest.
Status sarvam_mla(json& j) {
  original_names(j);
  j.erase("head_dim");
  j.erase("q_head_dim");
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (auto it = j.find(key); it != j.end() && it->is_object())
      for (const char* type : {"type", "rope_type"})
        if (auto t = it->find(type); t != it->end() && *t == "deepseek_yarn") {
          it->erase("type");
          (*it)["rope_type"] = "yarn";
          break;
        }
  for (const auto& [key, value] :
       {std::pair<const char*, json>{"vocab_size", 262144}, {"hidden_size", 4096}, {"intermediate_size", 16384},
        {"num_hidden_layers", 32}, {"num_attention_heads", 64}, {"n_routed_experts", 128}, {"q_lora_rank", nullptr},
        {"n_group", 1}, {"topk_group", 1}, {"first_k_dense_replace", 1}, {"num_nextn_predict_layers", 0}})
    default_to(j, key, value);
  j["architectures"] = json::array({"DeepseekV3ForCausalLM"});
  j["model_type"] = "deepseek_v3";
  return Status::ok();
}

}  // namespace

Status apply_alias_config(json& j) {
  if (names(j, "IQuestCoderForCausalLM", "iquestcoder")) return iquestcoder(j);
  if (names(j, "SolarOpenForCausalLM", "solar_open")) return solar_open(j);
  // (the checkpoints' class, transformers' spelling, or Glm4MoeForCausalLM over a param2moe config,
  // which transformers reads with Param2MoeConfig's defaults)
  if (config_model_type(j) == "param2moe" ||
      config_names_class(j, {"Param2MoEForCausalLM", "Param2MoeForCausalLM"}, {"param2moe"}))
    return param2moe(j);
  if (config_model_type(j) == "sarvam_moe" ||
      config_names_class(j, {"SarvamMoEForCausalLM", "SarvamMoeForCausalLM"}, {"sarvam_moe"}))
    return sarvam_moe(j);
  if (config_model_type(j) == "hy_v3" || config_names_class(j, {"HYV3ForCausalLM"}, {"hy_v3"})) return hy_v3(j);
  if (config_model_type(j) == "sarvam_mla" ||
      config_names_class(j, {"SarvamMLAForCausalLM", "SarvamMlaForCausalLM"}, {"sarvam_mla"}))
    return sarvam_mla(j);
  // (its first configs' spelling, which MiniCPM5MoeConfig renames)
  if (names(j, "MiniCPM5MoeForCausalLM", "minicpm5_moe") || config_architecture(j) == "MiniCPM5MoEForCausalLM")
    return minicpm5_moe(j);
  return Status::ok();
}

std::map<std::string, RawTensor> hy_v3_tensors(std::map<std::string, RawTensor> tensors) {
  static constexpr std::pair<const char*, const char*> kRenames[] = {
      {".mlp.router.gate.", ".mlp.gate."}, {".mlp.expert_bias", ".mlp.gate.e_score_correction_bias"},
      {".mlp.shared_mlp.", ".mlp.shared_experts."}};
  const auto hy3_name = [](const std::string& name) {
    return std::any_of(std::begin(kRenames), std::end(kRenames),
                       [&](const auto& r) { return name.find(r.first) != std::string::npos; });
  };
  if (std::none_of(tensors.begin(), tensors.end(), [&](const auto& kv) { return hy3_name(kv.first); })) return tensors;
  return renamed_tensors(std::move(tensors), kRenames);
}

bool has_sarvam_layout(const std::map<std::string, RawTensor>& tensors) {
  return tensors.contains("model.word_embeddings.weight");
}

Expected<std::map<std::string, RawTensor>> sarvam_layout_tensors(const ModelConfig& c,
                                                                 std::map<std::string, RawTensor> tensors) {
  static constexpr std::pair<const char*, const char*> kRenames[] = {
      {"model.word_embeddings.", "model.embed_tokens."}, {".attention.dense.", ".self_attn.o_proj."},
      {".attention.query_layernorm.", ".self_attn.q_norm."}, {".attention.key_layernorm.", ".self_attn.k_norm."},
      {".mlp.gate.expert_bias", ".mlp.gate.e_score_correction_bias"}};
  const int64_t q_rows = int64_t{c.n_heads} * c.head_dim, kv_rows = int64_t{c.n_kv_heads} * c.head_dim;
  std::map<std::string, RawTensor> out;
  std::vector<std::vector<uint8_t>> unused;  // single row ranges: views, never copies
  static constexpr std::string_view kFused = ".attention.query_key_value.";
  for (auto& [stored, t] : tensors) {
    std::string name = renamed(stored, kRenames);
    const size_t fused = name.find(kFused);
    if (fused == std::string::npos) {
      t.name = name;
      out.insert_or_assign(name, std::move(t));
      continue;
    }
    const bool weight = name.ends_with(".weight");
    if (t.block_quantized() || t.shape.empty() || t.shape[0] != q_rows + 2 * kv_rows ||
        t.shape.size() != (weight ? 2u : 1u) || (weight && t.shape[1] != c.hidden_size))
      return corrupt(t.file + ": tensor '" + stored + "' is " + t.type_name() + " " + t.shape_string() +
                     "; query_key_value needs " + std::to_string(q_rows + 2 * kv_rows) + " rows (q " +
                     std::to_string(q_rows) + ", then k and v " + std::to_string(kv_rows) + " each)" +
                     (weight ? " by hidden " + std::to_string(c.hidden_size) : "") + " of one element type");
    const std::string head = name.substr(0, fused) + ".self_attn.", tail = name.substr(fused + kFused.size());
    const std::pair<const char*, RowRange> parts[] = {
        {"q_proj.", {0, q_rows}}, {"k_proj.", {q_rows, kv_rows}}, {"v_proj.", {q_rows + kv_rows, kv_rows}}};
    for (const auto& [part, range] : parts)
      out.insert_or_assign(head + part + tail, take_rows(t, {range}, head + part + tail, unused));
  }
  return out;
}

Expected<std::map<std::string, RawTensor>> split_q_gate_proj(const ModelConfig& c, std::map<std::string, RawTensor> tensors,
                                                             std::vector<std::vector<uint8_t>>& arena) {
  const int64_t hd = c.head_dim, heads = c.n_heads;
  std::vector<RowRange> q_rows, gate_rows;
  for (int64_t h = 0; h < heads; ++h) {
    q_rows.push_back({2 * h * hd, hd});
    gate_rows.push_back({(2 * h + 1) * hd, hd});
  }
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : tensors) {
    // The Hub's checkpoints store it as q_proj (transformers renames it q_gate_proj on load and back).
    const std::string_view part = name.find(".self_attn.q_gate_proj.") != std::string::npos ? ".self_attn.q_gate_proj."
                                  : name.find(".self_attn.q_proj.") != std::string::npos    ? ".self_attn.q_proj."
                                                                                            : "";
    if (part.empty()) {
      out.insert_or_assign(name, std::move(t));
      continue;
    }
    const size_t at = name.find(part);
    const bool weight = name.ends_with(".weight");
    const bool float_type = is_float_tensor(t);
    if (t.shape.empty() || t.shape[0] != 2 * heads * hd || t.shape.size() != (weight ? 2u : 1u) ||
        (weight && t.shape[1] != c.hidden_size) || !float_type)
      return corrupt(t.file + ": tensor '" + name + "' is " + t.type_name() + " " + t.shape_string() +
                     "; MiniCPM 5's q_proj (q_gate_proj) needs a float tensor of " + std::to_string(2 * heads * hd) +
                     " rows (each head's q then its gate)" + (weight ? " by hidden " + std::to_string(c.hidden_size) : ""));
    const std::string head = name.substr(0, at) + ".self_attn.", tail = name.substr(at + part.size());
    out.insert_or_assign(head + "q_proj." + tail, take_rows(t, q_rows, head + "q_proj." + tail, arena));
    out.insert_or_assign(head + "gate_proj." + tail, take_rows(t, gate_rows, head + "gate_proj." + tail, arena));
  }
  return out;
}

}  // namespace brigade
