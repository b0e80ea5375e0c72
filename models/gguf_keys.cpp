#include "models/gguf_keys.h"

#include <cmath>
#include <cstdint>

#include "models/rope_scaling.h"

namespace brigade {
namespace {

// A positive finite float key, `fallback` when absent.
Status read_positive(const GgufFile& g, const std::string& key, double fallback, float& out) {
  BRIGADE_ASSIGN_OR_RETURN(double v, g.get_number_or(key, fallback));
  if (!std::isfinite(v) || v <= 0.0) return corrupt(g.path() + ": metadata '" + key + "' must be a positive number");
  out = static_cast<float>(v);
  return Status::ok();
}

}  // namespace

// rope.scaling: none, or YaRN as the converter writes the Hub's rope_scaling (and llama.cpp's
// defaults for the keys it leaves out: the original context is context_length, beta 32 / 1).
Status read_gguf_yarn(const GgufFile& g, const std::string& a, ModelConfig& c) {
  const GgufValue* type = g.find(a + "rope.scaling.type");
  if (!type || type->str == "none") return Status::ok();
  if (type->str != "yarn")
    return unsupported(g.path() + ": " + a + "rope.scaling.type '" + type->str + "' is not supported for this architecture; "
                       "supported: none, yarn");
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::yarn;
  if (!g.find(a + "rope.scaling.factor")) return corrupt(g.path() + ": metadata '" + a + "rope.scaling.factor' is missing");
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.factor", 1.0, s.factor));
  BRIGADE_ASSIGN_OR_RETURN(int64_t original, g.get_int_or(a + "rope.scaling.original_context_length", c.max_position));
  if (original <= 0 || original > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.original_context_length' is out of range");
  s.original_max_position = static_cast<int>(original);
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.yarn_beta_fast", 32.0, s.beta_fast));
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.yarn_beta_slow", 1.0, s.beta_slow));
  if (!(s.beta_fast > s.beta_slow))
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.yarn_beta_fast' must be greater than yarn_beta_slow");
  float ext = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.yarn_ext_factor", 1.0, ext));
  if (ext != 1.0f)
    return unsupported(g.path() + ": metadata '" + a + "rope.scaling.yarn_ext_factor' " + std::to_string(ext) +
                       ": only YaRN's full ramp (1) is supported");
  // llama.cpp multiplies YaRN's magnitude correction by rope.scaling.attn_factor; transformers'
  // attention_factor replaces the correction, so it is the product.
  if (g.find(a + "rope.scaling.attn_factor")) {
    float attn = 1.0f;
    BRIGADE_RETURN_IF_ERROR(read_positive(g, a + "rope.scaling.attn_factor", 1.0, attn));
    s.attention_factor = yarn_mscale(s.factor, 1.0f) * attn;
  }
  return Status::ok();
}

Status read_gguf_sliding_layers(const GgufFile& g, const std::string& a, int default_pattern, ModelConfig& c) {
  const std::string key = a + "attention.sliding_window_pattern";
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  const GgufValue* v = g.find(key);
  if (v && v->type == GgufType::array) {
    if (v->numbers.size() != static_cast<size_t>(c.n_layers))
      return corrupt(g.path() + ": metadata '" + key + "' must hold one value per layer (" + std::to_string(c.n_layers) +
                     "), not " + std::to_string(v->numbers.size()));
    for (size_t l = 0; l < v->numbers.size(); ++l) c.sliding_layers[l] = v->numbers[l] != 0.0;
    return Status::ok();
  }
  BRIGADE_ASSIGN_OR_RETURN(int64_t n, g.get_int_or(key, default_pattern));
  if (n < 0 || n > INT32_MAX) return corrupt(g.path() + ": metadata '" + key + "' is out of range");
  for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = n == 0 || l % n < n - 1;
  return Status::ok();
}

}  // namespace brigade
