#include "kvstore/host_tier.h"

#include "core/status.h"

namespace brigade {

std::vector<TierEntry> HostTier::put(const PageKey& key, PageBytes bytes) {
  std::vector<TierEntry> evicted;
  erase(key);
  if (bytes.size() > capacity_) {
    evicted.push_back({key, std::move(bytes)});
    return evicted;
  }
  evict_until_fits(bytes.size(), evicted);
  used_ += bytes.size();
  stats_.bytes_in += bytes.size();
  lru_.push_front({key, std::move(bytes)});
  index_[key] = lru_.begin();
  return evicted;
}

void HostTier::evict_until_fits(size_t incoming, std::vector<TierEntry>& evicted) {
  while (used_ + incoming > capacity_) {
    BRIGADE_CHECK(!lru_.empty(), "host tier accounting: bytes used without entries");
    TierEntry& victim = lru_.back();
    used_ -= victim.bytes.size();
    index_.erase(victim.key);
    evicted.push_back(std::move(victim));
    lru_.pop_back();
    ++stats_.n_evictions;
  }
}

std::optional<std::span<const std::byte>> HostTier::get(const PageKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.n_misses;
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.n_hits;
  stats_.bytes_out += it->second->bytes.size();
  return std::span<const std::byte>(it->second->bytes);
}

bool HostTier::erase(const PageKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  used_ -= it->second->bytes.size();
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

uint64_t HostTier::clear() {
  const uint64_t n = index_.size();
  index_.clear();
  lru_.clear();
  used_ = 0;
  return n;
}

HostTierStats HostTier::stats() const {
  HostTierStats s = stats_;
  s.n_entries = index_.size();
  s.bytes_used = used_;
  return s;
}

}  // namespace brigade
