// RoPE frequencies with Hugging Face's rope_scaling variants (config.json "rope_scaling", or
// "rope_parameters" in newer transformers). The Backend's rope op takes inv_freq as given, so
// every variant is folded into inv_freq [rotary_dim / 2] here, once at load.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

enum class RopeScalingType { none, linear, dynamic, llama3, yarn, longrope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;       // llama3
  float high_freq_factor = 4.0f;      // llama3
  int original_max_position = 0;      // llama3, yarn, longrope (required); dynamic (0 = max_position_embeddings)
  float beta_fast = 32.0f;            // yarn: the extrapolation / interpolation ramp bounds
  float beta_slow = 1.0f;
  float mscale = 0.0f;                // yarn: 0 = absent
  float mscale_all_dim = 0.0f;        // yarn (DeepSeek also scales the softmax by its mscale^2)
  float attention_factor = 0.0f;      // yarn, longrope: multiplies cos/sin; 0 = inferred as transformers does
  // longrope (Phi-3/Phi-4 128k, "su" in older configs): per-frequency divisors [rotary_dim / 2]
  // for sequences within original_max_position (short) and beyond it (long). Which list a model
  // runs is fixed at load (longrope_long, set from the served context by parse_hf_config: see
  // rope_inv_freq_scaled).
  std::vector<float> short_factor;
  std::vector<float> long_factor;
  bool longrope_long = false;
  bool truncate = true;               // yarn: floor/ceil the correction range
  // Per-frequency divisors [rotary_dim / 2] from a GGUF's rope_freqs.weight, the form in which
  // llama.cpp's converter stores llama3 scaling (type stays none); empty = none. Each is finite
  // and positive (checked at load).
  std::vector<float> freq_factors;
};

// Parses a rope_scaling JSON object's text ({"rope_type" or "type": ..., "factor": ...}).
// "default" gives none. unsupported for other types, listing the supported ones; corrupt for
// missing or non-numeric fields. Errors start with `where` (e.g. "config.json: rope_scaling").
Expected<RopeScaling> parse_rope_scaling(const std::string& json_text, const std::string& where);

const char* rope_scaling_name(RopeScalingType type);

// YaRN's magnitude correction 0.1 * m * ln(factor) + 1 (1 when factor <= 1), transformers'
// get_mscale.
float yarn_mscale(float factor, float m);
// The factor rotary cos/sin are multiplied by: yarn's attention_factor (given, else
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set, else
// mscale(factor, 1)); longrope's attention_factor (set by finish_longrope);
// 1 for the other types.
float rope_attention_factor(const RopeScaling& scaling);

// inv_freq[i] = 1 / theta^(2i / rotary_dim) in f32 (as llama2.c and transformers compute it),
// then scaled:
//   linear:  inv_freq / factor (positions interpolated);
//   llama3:  transformers' _compute_llama3_parameters: wavelengths above
//            original_max / low_freq_factor divided by factor, below original_max /
//            high_freq_factor kept, smoothly blended between;
//   yarn:    transformers' _compute_yarn_parameters (interpolated below the beta_slow rotation
//            count, extrapolated above beta_fast, a linear ramp between); only DeepSeek reads it;
//   longrope: transformers' _compute_longrope_parameters, 1 / (ext[i] * theta^(2i / rotary_dim))
//            with ext = long_factor when longrope_long, else short_factor. transformers picks the
//            list per forward call (long once the sequence is longer than original_max_position,
//            recomputing the cache at the crossing); a paged cache cannot re-rotate, so brigade
//            picks once per model: long when max_position_embeddings > original_max_position
//            (the 128k models: exact for sequences longer than original_max_position, long
//            factors also below it), short otherwise (exact everywhere). llama.cpp decides the
//            same way from its context size.
//   dynamic: unchanged. transformers rescales theta only once a sequence is longer than
//            max_position_embeddings, and brigade refuses positions past max_position, so the
//            default frequencies are exact for every position it accepts.
// then, when freq_factors is set, inv_freq[i] / freq_factors[i] (llama.cpp's ggml_rope_ext with
// freq_factors). Needs freq_factors empty or of size rotary_dim / 2.
std::vector<float> rope_inv_freq_scaled(float theta, int rotary_dim, const RopeScaling& scaling);

// Completes a parsed longrope scaling once the model's context is known: original_max_position
// (from the top-level config field when rope_scaling lacks it), the attention factor (given,
// else sqrt(1 + ln(factor) / ln(original_max)) with factor given or max_position /
// original_max, 1 when factor <= 1) and which factor list applies. Checks both lists hold
// rotary_dim / 2 positive numbers. Errors start with `where`.
Status finish_longrope(RopeScaling& scaling, int max_position, int rotary_dim, const std::string& where);

}  // namespace brigade
