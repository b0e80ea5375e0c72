#include "models/phimoe_config.h"

#include <cmath>
#include <string>

#include "models/config_json.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// The rope_scaling / rope_parameters object holding the scaling type, or null.
const json* rope_object(const json& j) {
  const json* found = nullptr;
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (auto it = j.find(key); it != j.end() && it->is_object() && (it->contains("rope_type") || it->contains("type")))
      found = &*it;
  return found;
}

// Whether rope_theta is given, at the top level or in either RoPE object (as read_rope reads it).
bool has_rope_theta(const json& j) {
  if (j.contains("rope_theta")) return true;
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (auto it = j.find(key); it != j.end() && it->is_object() && it->contains("rope_theta")) return true;
  return false;
}

// PhimoeRotaryEmbedding: with any scaling type, cos and sin are multiplied by long_mscale when
// the sequence is longer than original_max_position_embeddings, else by short_mscale, in place of
// longrope's attention factor. brigade chooses once at load, as it chooses the factor list
// (RopeScaling::longrope_long: long where max_position_embeddings exceeds the original).
// transformers 5 computes the inverse frequencies with the short factors at every length (its
// forward calls the longrope init without the sequence length); vLLM and llama.cpp switch to the
// long ones as brigade does, which differs from transformers only past the original length.
Status read_mscale(const json& j, ModelConfig& c) {
  if (c.rope_scaling.type == RopeScalingType::none) return Status::ok();
  if (c.rope_scaling.type != RopeScalingType::longrope)
    return unsupported(std::string("config.json: rope_type '") + rope_scaling_name(c.rope_scaling.type) +
                       "' is not supported for phimoe; supported: default, longrope");
  const json* rope = rope_object(j);
  float short_mscale = 0.0f, long_mscale = 0.0f;
  if (rope != nullptr) {
    BRIGADE_RETURN_IF_ERROR(read_float(*rope, "short_mscale", short_mscale));
    BRIGADE_RETURN_IF_ERROR(read_float(*rope, "long_mscale", long_mscale));
  }
  if (!(short_mscale > 0.0f) || !(long_mscale > 0.0f) || !std::isfinite(short_mscale) || !std::isfinite(long_mscale))
    return invalid_argument("config.json: phimoe's longrope needs short_mscale and long_mscale, positive numbers "
                            "(cos and sin are scaled by them)");
  c.rope_scaling.attention_factor = c.rope_scaling.longrope_long ? long_mscale : short_mscale;
  return Status::ok();
}

}  // namespace

Status read_phimoe(const json& j, ModelConfig& c) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported for phimoe; supported: silu");
  c.qkv_bias = c.o_bias = c.attention_bias;  // LlamaAttention's; the window (every layer) read already
  c.layer_norms = c.norm_bias = true;
  if (!j.contains("rms_norm_eps")) c.rms_eps = 1e-5f;  // PhimoeConfig's default
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "lm_head_bias", c.lm_head_bias));
  if (!has_rope_theta(j)) c.rope_theta = 1000000.0f;  // PhimoeConfig's default_theta
  return read_mscale(j, c);
}

Status read_phimoe_routing(const json& j, ModelConfig& c) {
  if (c.n_experts_per_tok != 2)
    return unsupported("config.json: num_experts_per_tok = " + std::to_string(c.n_experts_per_tok) +
                       " is not supported for phimoe; its sparsemixer routing chooses exactly 2 experts per token");
  c.moe_scoring = MoeScoring::sparsemixer;
  c.norm_topk_prob = false;
  c.router_jitter = 0.01f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "router_jitter_noise", c.router_jitter));
  if (!(c.router_jitter >= 0.0f) || !std::isfinite(c.router_jitter))
    return invalid_argument("config.json: router_jitter_noise must be a number >= 0");
  return Status::ok();
}

}  // namespace brigade
