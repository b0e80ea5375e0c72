#include "kvstore/page_key.h"

#include <xxhash.h>

#include <cstdio>

namespace brigade {

std::string PageKey::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

namespace {
PageKey from(XXH128_hash_t h) { return PageKey{h.high64, h.low64}; }
}  // namespace

PageKey root_key(std::string_view model_fingerprint) {
  return from(XXH3_128bits(model_fingerprint.data(), model_fingerprint.size()));
}

PageKey chain_key(const PageKey& parent, std::span<const int32_t> tokens) {
  // Seeded by the parent's low half, and the parent's full 128 bits hashed in with the tokens.
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset_withSeed(st, parent.lo);
  const uint64_t p[2] = {parent.hi, parent.lo};
  XXH3_128bits_update(st, p, sizeof p);
  XXH3_128bits_update(st, tokens.data(), tokens.size_bytes());
  const PageKey k = from(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return k;
}

}  // namespace brigade
