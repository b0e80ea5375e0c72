#include "models/arcee_config.h"

#include <cmath>
#include <string>

#include "models/config_json.h"
#include "models/gemma_config.h"
#include "models/llama_variants_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// AfmoeAttention and AfmoeDecoderLayer (arcee_config.h).
Status read_afmoe(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "silu"));
  if (c.attention_bias) return unsupported("config.json: attention_bias = true is not supported for afmoe");
  c.qk_norm = true;
  c.attn_gate = true;
  c.sandwich_norms = true;
  bool mup = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mup_enabled", mup));
  if (mup) c.embedding_multiplier = std::sqrt(static_cast<float>(c.hidden_size));
  c.sliding_window = 1024;
  const bool null_window = j.contains("sliding_window") && j["sliding_window"].is_null();
  if (!null_window) BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 1));
  } else {  // AfmoeConfig's: every global_attn_every_n_layers-th layer full
    int every = 4;
    BRIGADE_RETURN_IF_ERROR(read_int(j, "global_attn_every_n_layers", every, false));
    if (every < 1) return invalid_argument("config.json: global_attn_every_n_layers must be >= 1");
    c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = (l + 1) % every != 0;
  }
  bool any_sliding = false;
  for (bool s : c.sliding_layers) any_sliding = any_sliding || s;
  if (any_sliding && (null_window || c.sliding_window <= 0))
    return unsupported("config.json: afmoe's sliding_attention layers need sliding_window > 0 (got " +
                       (null_window ? std::string("null") : std::to_string(c.sliding_window)) + ")");
  // AfmoeAttention rotates q and k on the sliding layers only; the full layers have no positions.
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = !c.sliding_layers[static_cast<size_t>(l)];
  return Status::ok();
}

}  // namespace

Status read_arcee_family(const json& j, ModelConfig& c) {
  if (c.arch == "afmoe") return read_afmoe(j, c);
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "relu2"));  // ArceeMLP (NemotronMLP): up, relu², down
  c.mlp_activation = MlpActivation::relu2;
  c.qkv_bias = c.o_bias = c.attention_bias;  // LlamaAttention's
  c.sliding_window = 0;
  return Status::ok();
}

Status read_afmoe_moe(const json& j, ModelConfig& c) {
  c.n_experts = 64;
  c.n_experts_per_tok = 6;
  c.moe_intermediate_size = 1408;
  c.n_shared_experts = 2;
  c.first_k_dense_replace = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_shared_experts", c.n_shared_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_dense_layers", c.first_k_dense_replace, false));
  if (c.n_shared_experts < 0 || c.first_k_dense_replace < 0)
    return invalid_argument("config.json: num_shared_experts and num_dense_layers must be >= 0");
  BRIGADE_RETURN_IF_ERROR(read_float(j, "route_scale", c.routed_scaling_factor));
  if (!std::isfinite(c.routed_scaling_factor) || c.routed_scaling_factor <= 0.0f)
    return invalid_argument("config.json: route_scale must be a positive number");
  c.decoder_sparse_step = 1;
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_score_bias = true;  // mlp.expert_bias: selection only
  c.norm_topk_prob = true;
  return Status::ok();
}

}  // namespace brigade
