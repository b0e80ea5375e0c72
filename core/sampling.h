// Host-side token sampling from logits: greedy, temperature, top-k, top-p, min-p, with a
// per-request seed. The random stream of a sequence depends only on (seed, n_generated), so the
// same seed gives the same tokens whether the sequence runs alone or batched with others.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace brigade {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 = greedy (argmax; ties go to the lowest id)
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = off
  float min_p = 0.0f;        // [0, 1): drop tokens below min_p * p(max)
  uint64_t seed = 0;
};

struct SampleOutput {
  int32_t token = 0;
  float logprob = 0.0f;  // log-softmax of the raw logits (temperature 1) at `token`, when asked
};

// Picks one token from logits [vocab] (not modified). n_generated selects the random draw.
// with_logprob computes SampleOutput::logprob (one more pass over the vocabulary).
SampleOutput sample_token(std::span<const float> logits, const SamplingConfig& cfg,
                          uint64_t n_generated, bool with_logprob = false);

// Index of the largest logit; ties go to the lowest index.
int32_t argmax(std::span<const float> logits);

// log-softmax at one index, computed stably.
float log_softmax_at(std::span<const float> logits, int32_t index);

// Deterministic uniform draw in [0, 1) from (seed, counter): splitmix64 of a mixed key.
double uniform_from(uint64_t seed, uint64_t counter);

}  // namespace brigade
