#include "models/kimi_linear_config.h"

#include <string>
#include <vector>

#include "models/config_json.h"

namespace brigade {

using json = nlohmann::json;

bool is_kimi_linear(const json& j) {
  return config_names_class(j, {"KimiLinearForCausalLM"}, {"kimi_linear"});
}

namespace {

// The config in DeepSeek-V3's terms: Kimi's names of its MoE fields moved to DeepSeek's (where
// those are absent), no rope fields (nothing rotates).
json as_deepseek_v3(const json& j) {
  json d = j;
  d["architectures"] = json::array({"DeepseekV3ForCausalLM"});
  d["model_type"] = "deepseek_v3";
  const std::pair<const char*, const char*> renames[] = {
      {"num_experts", "n_routed_experts"},         {"num_experts_per_token", "num_experts_per_tok"},
      {"num_shared_experts", "n_shared_experts"},  {"num_expert_group", "n_group"},
      {"moe_renormalize", "norm_topk_prob"},       {"model_max_length", "max_position_embeddings"}};
  for (const auto& [kimi, deepseek] : renames)
    if (d.contains(kimi) && !d.contains(deepseek)) d[deepseek] = d[kimi];
  for (const char* k : {"rope_scaling", "rope_parameters", "rope_theta", "rope_interleave", "mlp_layer_types"}) d.erase(k);
  return d;
}

// linear_attn_config's field `key`, else the top-level `flat` (transformers' own), else `def`.
Status read_linear(const json& j, const char* key, const char* flat, int def, int& out) {
  out = def;
  BRIGADE_RETURN_IF_ERROR(read_int(j, flat, out, false));
  if (auto it = j.find("linear_attn_config"); it != j.end() && it->is_object())
    BRIGADE_RETURN_IF_ERROR(read_int(*it, key, out, false));
  if (out < 1) return invalid_argument(std::string("config.json: linear_attn_config.") + key + " must be >= 1");
  return Status::ok();
}

// Which layers are KDA (true) and which MLA (KimiLinearConfig.__post_init__'s precedence).
Expected<std::vector<bool>> read_kda_layers(const json& j, int n_layers) {
  std::vector<bool> kda(static_cast<size_t>(n_layers), true);
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != kda.size())
      return corrupt("config.json: layer_types must list one type per layer (" + std::to_string(n_layers) + ")");
    for (size_t l = 0; l < kda.size(); ++l) {
      const json& t = (*it)[l];
      if (t != "linear_attention" && t != "full_attention")
        return unsupported("config.json: layer_types[" + std::to_string(l) + "] " + t.dump() +
                           " is not supported; supported: linear_attention, full_attention");
      kda[l] = t == "linear_attention";
    }
    return kda;
  }
  const auto found = j.find("linear_attn_config");
  const json* lin = found != j.end() && found->is_object() ? &*found : nullptr;
  if (lin != nullptr && lin->contains("full_attn_layers") && lin->contains("kda_layers")) {
    std::vector<bool> seen(kda.size(), false);
    for (const char* key : {"full_attn_layers", "kda_layers"}) {
      const json& list = (*lin)[key];
      if (!list.is_array()) return corrupt(std::string("config.json: linear_attn_config.") + key + " must be a list");
      for (const json& v : list) {
        if (!v.is_number_integer() || v.get<int>() < 1 || v.get<int>() > n_layers)
          return corrupt(std::string("config.json: linear_attn_config.") + key + " holds " + v.dump() +
                         ", not a layer number in [1, " + std::to_string(n_layers) + "] (they are 1-based)");
        const size_t l = static_cast<size_t>(v.get<int>() - 1);
        kda[l] = std::string(key) == "kda_layers";
        seen[l] = true;
      }
    }
    for (size_t l = 0; l < seen.size(); ++l)
      if (!seen[l])
        return corrupt("config.json: layer " + std::to_string(l + 1) +
                       " is in neither linear_attn_config.full_attn_layers nor kda_layers");
    return kda;
  }
  for (int l = 0; l < n_layers; ++l) kda[static_cast<size_t>(l)] = !(l > 0 && l % 4 == 0);
  return kda;
}

// mlp_layer_types ("dense" / "sparse"): a dense prefix, which first_k_dense_replace states.
Status read_dense_prefix(const json& j, ModelConfig& c) {
  auto it = j.find("mlp_layer_types");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array() || static_cast<int>(it->size()) != c.n_layers)
    return corrupt("config.json: mlp_layer_types must list \"dense\" or \"sparse\" per layer (" +
                   std::to_string(c.n_layers) + ")");
  int dense = 0;
  while (dense < c.n_layers && (*it)[static_cast<size_t>(dense)] == "dense") ++dense;
  for (int l = dense; l < c.n_layers; ++l)
    if ((*it)[static_cast<size_t>(l)] != "sparse")
      return unsupported("config.json: mlp_layer_types[" + std::to_string(l) + "] " + (*it)[static_cast<size_t>(l)].dump() +
                         " after a sparse layer is not supported; Kimi Linear's dense layers come first");
  c.first_k_dense_replace = dense;
  return Status::ok();
}

}  // namespace

Expected<ModelConfig> read_kimi_linear_config(const json& j) {
  bool use_nope = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mla_use_nope", use_nope));
  if (!use_nope)
    return unsupported("config.json: mla_use_nope = false is not supported for kimi_linear (transformers' "
                       "KimiLinearAttention applies no RoPE); set it to true");
  std::string router = "sigmoid";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "moe_router_activation_func", router));
  if (router != "sigmoid")
    return unsupported("config.json: moe_router_activation_func '" + router +
                       "' is not supported for kimi_linear; supported: sigmoid");
  if (!j.contains("first_k_dense_replace") && !j.contains("mlp_layer_types")) {
    json d = j;
    d["first_k_dense_replace"] = 1;  // KimiLinearConfig's default
    return read_kimi_linear_config(d);
  }
  BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(as_deepseek_v3(j).dump()));
  c.arch = "kimi_linear";
  c.nope = true;
  BRIGADE_RETURN_IF_ERROR(read_dense_prefix(j, c));
  BRIGADE_ASSIGN_OR_RETURN(c.ssm_layers, read_kda_layers(j, c.n_layers));
  int heads = 0, head_dim = 0, kernel = 0;
  BRIGADE_RETURN_IF_ERROR(read_linear(j, "num_heads", "linear_num_heads", 32, heads));
  BRIGADE_RETURN_IF_ERROR(read_linear(j, "head_dim", "linear_head_dim", 128, head_dim));
  BRIGADE_RETURN_IF_ERROR(read_linear(j, "short_conv_kernel_size", "linear_conv_kernel_dim", 4, kernel));
  c.ssm.kda = true;
  c.ssm.conv_bias = false;
  c.ssm.layout = SsmLayout{.n_heads = heads, .head_dim = head_dim, .n_groups = heads, .state_size = head_dim,
                           .conv_kernel = kernel};
  return c;
}

}  // namespace brigade
