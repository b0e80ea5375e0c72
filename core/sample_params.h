// SampleParams: per-row parameters of the sampler, and its counter-based random stream, shared
// bit for bit by the CUDA kernel (gpu/sampling.cu), the CPU Backend::sample and the host sampler
// (core/sampling.h sample_like_device, which sample_token calls). So a request's tokens do not
// depend on which of them samples it (device or host path, logprobs asked or not), only on its
// logits; the GPU sums in another order, so a draw on a probability boundary may differ there in
// the last bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace brigade {

// One row's parameters; an array [n] of them lives in the backend's memory (core/sampling.h
// sample_params makes them from a request's SamplingConfig).
// temperature <= 0 means greedy (argmax, lowest index on ties). top_k <= 0: no top-k cut;
// top_p >= 1: no top-p cut; log_min_p = -inf: no min-p cut, else log(min_p), computed once on
// the host so every implementation compares against the same f32 threshold. The draw of a row is
// a pure function of (seed, step).
struct SampleParams {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float log_min_p = -INFINITY;
  uint64_t seed = 0;
  uint64_t step = 0;  // the executor passes the tokens generated so far
};
static_assert(sizeof(SampleParams) == 32, "SampleParams is uploaded as raw bytes");

BRIGADE_HOST_DEVICE inline uint64_t sample_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The device sampler's draw in [0, 1): 24 bits of splitmix64(seed ^ splitmix64(step)).
BRIGADE_HOST_DEVICE inline float device_uniform(uint64_t seed, uint64_t step) {
  const uint64_t h = sample_splitmix64(seed ^ sample_splitmix64(step));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// Order-preserving 32-bit key of a float: a < b  <=>  key(a) < key(b) (for non-NaN values).
BRIGADE_HOST_DEVICE inline uint32_t sample_order_key(uint32_t float_bits) {
  return (float_bits & 0x80000000u) ? ~float_bits : (float_bits | 0x80000000u);
}

}  // namespace brigade
