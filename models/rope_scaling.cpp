#include "models/rope_scaling.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "models/llama.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kSupportedScaling = "default, linear, dynamic, llama3";

Status read_number(const json& j, const char* key, float& out, bool required, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return required ? corrupt(where + ": missing required field '" + key + "'") : Status::ok();
  if (!it->is_number()) return corrupt(where + ": field '" + key + "' must be a number");
  out = it->get<float>();
  if (!std::isfinite(out) || out <= 0.0f) return corrupt(where + ": field '" + key + "' must be a positive number");
  return Status::ok();
}

}  // namespace

const char* rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::none: return "none";
    case RopeScalingType::linear: return "linear";
    case RopeScalingType::dynamic: return "dynamic";
    case RopeScalingType::llama3: return "llama3";
  }
  return "?";
}

Expected<RopeScaling> parse_rope_scaling(const std::string& json_text, const std::string& where) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(where + " must be a JSON object");
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  if (type.empty()) return corrupt(where + ": missing 'rope_type' (one of " + kSupportedScaling + ")");
  RopeScaling s;
  if (type == "default") return s;
  if (type == "linear") s.type = RopeScalingType::linear;
  else if (type == "dynamic") s.type = RopeScalingType::dynamic;
  else if (type == "llama3") s.type = RopeScalingType::llama3;
  else return unsupported(where + ": rope_type '" + type + "' is not supported; supported: " + kSupportedScaling);
  BRIGADE_RETURN_IF_ERROR(read_number(j, "factor", s.factor, true, where));
  if (s.type == RopeScalingType::llama3) {
    BRIGADE_RETURN_IF_ERROR(read_number(j, "low_freq_factor", s.low_freq_factor, true, where));
    BRIGADE_RETURN_IF_ERROR(read_number(j, "high_freq_factor", s.high_freq_factor, true, where));
    float original = 0.0f;
    BRIGADE_RETURN_IF_ERROR(read_number(j, "original_max_position_embeddings", original, true, where));
    s.original_max_position = static_cast<int>(original);
    if (!(s.high_freq_factor > s.low_freq_factor))
      return corrupt(where + ": high_freq_factor must be greater than low_freq_factor");
  }
  return s;
}

std::vector<float> rope_inv_freq_scaled(float theta, int rotary_dim, const RopeScaling& scaling) {
  std::vector<float> inv = rope_inv_freq(theta, rotary_dim);
  switch (scaling.type) {
    case RopeScalingType::none:
    case RopeScalingType::dynamic:
      break;
    case RopeScalingType::linear:
      for (float& f : inv) f /= scaling.factor;
      break;
    case RopeScalingType::llama3: {
      // Same f32 arithmetic order as transformers' _compute_llama3_parameters.
      const float old_len = static_cast<float>(scaling.original_max_position);
      const float low_wavelen = old_len / scaling.low_freq_factor;
      const float high_wavelen = old_len / scaling.high_freq_factor;
      const float pi = static_cast<float>(M_PI);
      for (float& f : inv) {
        const float wavelen = 2.0f * pi / f;
        if (wavelen > low_wavelen) {
          f = f / scaling.factor;
        } else if (wavelen >= high_wavelen) {
          const float smooth = (old_len / wavelen - scaling.low_freq_factor) /
                               (scaling.high_freq_factor - scaling.low_freq_factor);
          f = (1.0f - smooth) * f / scaling.factor + smooth * f;
        }
      }
      break;
    }
  }
  if (!scaling.freq_factors.empty()) {
    BRIGADE_CHECK(scaling.freq_factors.size() == inv.size(), "rope freq_factors must be [rotary_dim / 2]");
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= scaling.freq_factors[i];
  }
  return inv;
}

}  // namespace brigade
