#include "models/minimax_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "models/config_json.h"

namespace brigade {

using json = nlohmann::json;

bool is_minimax(const json& j) {
  return config_names_class(j, {"MiniMaxForCausalLM"}, {"minimax"});
}

namespace {

// Which layers are lightning attention (true): layer_types, else MiniMaxConfig's default.
Expected<std::vector<bool>> read_lightning_layers(const json& j, int n_layers) {
  std::vector<bool> linear(static_cast<size_t>(n_layers));
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) {
    for (size_t l = 0; l < linear.size(); ++l) linear[l] = (l + 1) % 2 == 0;
    return linear;
  }
  if (!it->is_array() || it->size() != linear.size())
    return corrupt("config.json: layer_types must list one type per layer (" + std::to_string(n_layers) + ")");
  for (size_t l = 0; l < linear.size(); ++l) {
    const json& t = (*it)[l];
    if (t != "linear_attention" && t != "full_attention")
      return unsupported("config.json: layer_types[" + std::to_string(l) + "] " + t.dump() +
                         " is not supported for minimax; supported: linear_attention, full_attention");
    linear[l] = t == "linear_attention";
  }
  return linear;
}

}  // namespace

Expected<ModelConfig> read_minimax_config(const json& j) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu")
    return unsupported("config.json: hidden_act '" + act + "' is not supported for minimax; supported: silu");
  if (auto it = j.find("sliding_window"); it != j.end() && !it->is_null())
    return unsupported("config.json: sliding_window " + it->dump() +
                       " is not supported for minimax (its full-attention layers attend to the whole context here)");
  float jitter = 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "router_jitter_noise", jitter));
  if (jitter != 0.0f) return unsupported("config.json: router_jitter_noise must be 0 for minimax (inference)");
  json m = j;
  m["architectures"] = json::array({"MixtralForCausalLM"});
  m["model_type"] = "mixtral";
  m.erase("layer_types");
  BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(m.dump()));
  bool partial = c.rotary_dim != 0 && c.rotary_dim != c.head_dim;
  for (const json* o : {&j, j.contains("rope_parameters") ? &j["rope_parameters"] : nullptr})
    if (o != nullptr && o->is_object())
      if (auto it = o->find("partial_rotary_factor"); it != o->end() && !(it->is_number() && it->get<double>() == 1.0))
        partial = true;
  if (partial)
    return unsupported("config.json: partial_rotary_factor is not supported for minimax (transformers' "
                       "MiniMaxRotaryEmbedding rotates whole heads of " + std::to_string(c.head_dim) + ")");
  if (auto it = j.find("rotary_dim"); it != j.end() && !(it->is_number_integer() && it->get<int>() == c.head_dim))
    return unsupported("config.json: rotary_dim " + it->dump() + " is not supported for minimax (transformers' "
                       "MiniMaxRotaryEmbedding rotates whole heads of " + std::to_string(c.head_dim) + ")");
  c.arch = "minimax";
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // MixtralAttention's head_dim^-1/2
  BRIGADE_ASSIGN_OR_RETURN(c.ssm_layers, read_lightning_layers(j, c.n_layers));
  const char* alpha[3] = {"linear_attn_alpha_factor", "full_attn_alpha_factor", "mlp_alpha_factor"};
  const char* beta[3] = {"linear_attn_beta_factor", "full_attn_beta_factor", "mlp_beta_factor"};
  for (size_t i = 0; i < 3; ++i) {
    BRIGADE_RETURN_IF_ERROR(read_float(j, alpha[i], c.block_alpha[i]));
    BRIGADE_RETURN_IF_ERROR(read_float(j, beta[i], c.block_beta[i]));
  }
  int block_size = 256;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "block_size", block_size, false));
  if (block_size < 1) return invalid_argument("config.json: block_size must be >= 1 (got " + std::to_string(block_size) + ")");
  c.ssm.lightning = true;
  c.ssm.conv_bias = false;
  c.ssm.layout = SsmLayout{.n_heads = c.n_heads, .head_dim = c.head_dim, .n_groups = c.n_heads,
                           .state_size = c.head_dim, .conv_kernel = 1};
  return c;
}

}  // namespace brigade
