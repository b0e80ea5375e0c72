// PageKey: the name of one KV page's content outside the device (DESIGN.md §5). A page's key is
// a hash chain: it hashes the key of the page before it and the page's own token ids, and the
// chain starts from the model's fingerprint. Two pages have equal keys only when the same model
// computed them over the same tokens from position 0, so a key can name a page in any tier
// (host memory, RocksDB) and across restarts. (An engine without tiers roots the chain in a
// constant: its keys never leave the process, whose one radix tree serves one model.)
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace brigade {

struct PageKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  auto operator<=>(const PageKey&) const = default;
  std::string hex() const;  // 32 hex digits, for logs
};

struct PageKeyHash {
  size_t operator()(const PageKey& k) const noexcept { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ULL)); }
};

// The chain's root for a model: its fingerprint names the weights and the KV layout, so pages
// of another model or KV dtype never match.
PageKey root_key(std::string_view model_fingerprint);
// The key of a page holding `tokens` (page_size ids) after the page whose key is `parent`.
PageKey chain_key(const PageKey& parent, std::span<const int32_t> tokens);

}  // namespace brigade
