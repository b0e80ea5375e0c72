// Host-side token sampling from logits: greedy, temperature, top-k, top-p, min-p, with a
// per-request seed. The random stream of a sequence depends only on (seed, n_generated), so the
// same seed gives the same tokens whether the sequence runs alone or batched with others, and
// the rule is the device sampler's (core/sample_params.h), so also whichever sampler runs it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/sample_params.h"

namespace brigade {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 = greedy (argmax; ties go to the lowest id)
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = off
  float min_p = 0.0f;        // [0, 1): drop tokens below min_p * p(max)
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;

  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// What penalties need to know of one sequence: every token seen (prompt and output) and how
// often each token occurs in the output.
struct PenaltyHistory {
  std::unordered_set<int32_t> seen;
  std::unordered_map<int32_t, int> output_counts;
};

// Applies the penalties of cfg to logits in place (vLLM/Hugging Face semantics):
// repetition: a seen token's logit is divided by the penalty when positive, multiplied when not;
// presence: subtracted once from each token that occurs in the output;
// frequency: subtracted once per occurrence in the output.
void apply_penalties(std::span<float> logits, const SamplingConfig& cfg, const PenaltyHistory& history);

// The k most likely tokens with their log-softmax values, best first (ties: lower id first).
std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int k);

struct SampleOutput {
  int32_t token = 0;
  float logprob = 0.0f;  // log-softmax of the raw logits (temperature 1) at `token`, when asked
};

// Picks one token from logits [vocab] (not modified): sample_like_device with
// sample_params(cfg, n_generated). with_logprob computes SampleOutput::logprob (one more pass
// over the vocabulary).
SampleOutput sample_token(std::span<const float> logits, const SamplingConfig& cfg,
                          uint64_t n_generated, bool with_logprob = false);

// The sampler parameters of a request at its n_generated-th token: greedy (temperature 0) when
// cfg.temperature <= 0 or top_k == 1. Penalties are not in them (applied to the logits first).
SampleParams sample_params(const SamplingConfig& cfg, uint64_t n_generated);

// Index of the largest logit; ties go to the lowest index.
int32_t argmax(std::span<const float> logits);

// log-softmax at one index, computed stably.
float log_softmax_at(std::span<const float> logits, int32_t index);

// The sampling rule (gpu/sampling.cu runs it on the device; the CPU backend's Backend::sample
// and the host sampler run this): greedy when temperature <= 0; else x = logit / temperature in
// f32 and m = max x; keep the top_k largest keys (sample_order_key; ties at the cut all stay) and
// those with x >= m + log_min_p; then the largest kept keys whose mass exp(x - m) reaches top_p
// of the kept mass; walk the kept tokens in vocabulary order until the running mass exceeds
// device_uniform(seed, step) times the total (the last kept token when rounding leaves none).
int32_t sample_like_device(std::span<const float> logits, const SampleParams& p);

}  // namespace brigade
