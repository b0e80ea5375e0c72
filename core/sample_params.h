// SampleParams: per-row parameters of the device sampler (Backend::sample), and the sampler's
// counter-based random stream, shared bit for bit by the CUDA kernel (gpu/sampling.cu) and the
// CPU implementation (core/sampling.h sample_like_device), so the device path is tested on CPUs.
//
// The device sampler is not the host sampler (core/sampling.h sample_token): the host walks the
// candidates sorted by logit in double precision with uniform_from(seed, n); the device walks
// the kept tokens in vocabulary order in f32 with device_uniform(seed, step). The same seed gives
// the same tokens on one path, whatever the batch, but not across the two paths.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace brigade {

// One row's parameters; an array [n] of them lives in the backend's memory.
// temperature <= 0 means greedy (argmax, lowest index on ties). top_k <= 0: no top-k cut;
// top_p >= 1: no top-p cut. The draw of a row is a pure function of (seed, step).
struct SampleParams {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint32_t reserved = 0;
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
