#include "models/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "models/llama.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kSupportedScaling = "default, linear, dynamic, llama3, yarn, longrope";

Status read_number(const json& j, const char* key, float& out, bool required, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return required ? corrupt(where + ": missing required field '" + key + "'") : Status::ok();
  if (!it->is_number()) return corrupt(where + ": field '" + key + "' must be a number");
  out = it->get<float>();
  if (!std::isfinite(out) || out <= 0.0f) return corrupt(where + ": field '" + key + "' must be a positive number");
  return Status::ok();
}

// YaRN's optional fields; original_max_position_embeddings is required (factor is read by the caller).
Status read_yarn(const json& j, RopeScaling& s, const std::string& where) {
  float original = 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_number(j, "original_max_position_embeddings", original, true, where));
  s.original_max_position = static_cast<int>(original);
  BRIGADE_RETURN_IF_ERROR(read_number(j, "beta_fast", s.beta_fast, false, where));
  BRIGADE_RETURN_IF_ERROR(read_number(j, "beta_slow", s.beta_slow, false, where));
  BRIGADE_RETURN_IF_ERROR(read_number(j, "attention_factor", s.attention_factor, false, where));
  for (auto [key, out] : {std::pair{"mscale", &s.mscale}, std::pair{"mscale_all_dim", &s.mscale_all_dim}}) {
    auto it = j.find(key);  // 0 is allowed here (DeepSeek writes it to mean "none")
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number() || !std::isfinite(it->get<float>()) || it->get<float>() < 0.0f)
      return corrupt(where + ": field '" + key + "' must be a number >= 0");
    *out = it->get<float>();
  }
  if (auto it = j.find("truncate"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return corrupt(where + ": field 'truncate' must be true or false");
    s.truncate = it->get<bool>();
  }
  if (!(s.beta_fast > s.beta_slow)) return corrupt(where + ": beta_fast must be greater than beta_slow");
  return Status::ok();
}

// transformers' _compute_yarn_parameters, in the same f32/f64 split: the correction range in
// double (Python floats), the ramp and the blend in f32 (torch tensors).
void apply_yarn(std::vector<float>& inv, float theta, int rotary_dim, const RopeScaling& s) {
  const double dim = rotary_dim, base = theta, orig = s.original_max_position;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv.size(); ++i) {
    const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float interpolated = 1.0f / (s.factor * (1.0f / inv[i]));
    inv[i] = interpolated * (1.0f - extrapolation) + inv[i] * extrapolation;
  }
}

// longrope's fields: both factor lists (checked against rotary_dim in finish_longrope); factor,
// attention_factor and original_max_position_embeddings are optional here.
Status read_longrope(const json& j, RopeScaling& s, const std::string& where) {
  for (auto [key, out] : {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array())
      return corrupt(where + ": longrope needs '" + key + "', a list of numbers (one per rotary frequency)");
    for (const auto& e : *it) {
      if (!e.is_number() || !std::isfinite(e.get<float>()) || e.get<float>() <= 0.0f)
        return corrupt(where + ": '" + key + "' must hold positive numbers");
      out->push_back(e.get<float>());
    }
  }
  s.factor = 0.0f;  // absent: max_position_embeddings / original_max_position_embeddings
  BRIGADE_RETURN_IF_ERROR(read_number(j, "factor", s.factor, false, where));
  BRIGADE_RETURN_IF_ERROR(read_number(j, "attention_factor", s.attention_factor, false, where));
  float original = 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_number(j, "original_max_position_embeddings", original, false, where));
  s.original_max_position = static_cast<int>(original);
  return Status::ok();
}

}  // namespace

const char* rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::none: return "none";
    case RopeScalingType::linear: return "linear";
    case RopeScalingType::dynamic: return "dynamic";
    case RopeScalingType::llama3: return "llama3";
    case RopeScalingType::yarn: return "yarn";
    case RopeScalingType::longrope: return "longrope";
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
  else if (type == "yarn") s.type = RopeScalingType::yarn;
  else if (type == "longrope" || type == "su") s.type = RopeScalingType::longrope;  // "su": its older name
  else return unsupported(where + ": rope_type '" + type + "' is not supported; supported: " + kSupportedScaling);
  if (s.type == RopeScalingType::longrope) {
    BRIGADE_RETURN_IF_ERROR(read_longrope(j, s, where));
    return s;
  }
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
  if (s.type == RopeScalingType::yarn) BRIGADE_RETURN_IF_ERROR(read_yarn(j, s, where));
  return s;
}

float yarn_mscale(float factor, float m) {
  return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f;
}

float rope_attention_factor(const RopeScaling& s) {
  if (s.type == RopeScalingType::longrope) return s.attention_factor > 0.0f ? s.attention_factor : 1.0f;
  if (s.type != RopeScalingType::yarn) return 1.0f;
  if (s.attention_factor > 0.0f) return s.attention_factor;
  if (s.mscale > 0.0f && s.mscale_all_dim > 0.0f)
    return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  return yarn_mscale(s.factor, 1.0f);
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
    case RopeScalingType::yarn:
      apply_yarn(inv, theta, rotary_dim, scaling);
      break;
    case RopeScalingType::longrope: {
      const std::vector<float>& ext = scaling.longrope_long ? scaling.long_factor : scaling.short_factor;
      BRIGADE_CHECK(ext.size() == inv.size(), "longrope factors are [rotary_dim / 2] (finish_longrope checks)");
      // transformers' order: 1 / (ext * theta^(2i / dim)), all in f32.
      for (size_t i = 0; i < inv.size(); ++i)
        inv[i] = 1.0f / (ext[i] * powf(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim)));
      break;
    }
  }
  if (!scaling.freq_factors.empty()) {
    BRIGADE_CHECK(scaling.freq_factors.size() == inv.size(), "rope freq_factors must be [rotary_dim / 2]");
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= scaling.freq_factors[i];
  }
  return inv;
}

Status finish_longrope(RopeScaling& s, int max_position, int rotary_dim, const std::string& where) {
  if (s.type != RopeScalingType::longrope) return Status::ok();
  if (s.original_max_position <= 0)
    return corrupt(where + ": longrope needs original_max_position_embeddings (in rope_scaling or at the top level)");
  const size_t n = static_cast<size_t>(rotary_dim / 2);
  if (s.short_factor.size() != n || s.long_factor.size() != n)
    return corrupt(where + ": longrope short_factor and long_factor must each hold rotary_dim / 2 = " +
                   std::to_string(n) + " numbers (got " + std::to_string(s.short_factor.size()) + " and " +
                   std::to_string(s.long_factor.size()) + ")");
  // In double, as transformers computes it in Python (math.sqrt, math.log).
  const double original = s.original_max_position;
  const double factor = s.factor > 0.0f ? static_cast<double>(s.factor) : max_position / original;
  s.factor = static_cast<float>(factor);
  if (!(s.attention_factor > 0.0f))
    s.attention_factor = factor <= 1.0 ? 1.0f : static_cast<float>(std::sqrt(1.0 + std::log(factor) / std::log(original)));
  s.longrope_long = max_position > s.original_max_position;
  return Status::ok();
}

}  // namespace brigade
