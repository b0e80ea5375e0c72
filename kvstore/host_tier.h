// HostTier: KV pages in host memory, the HiCache tier below the device (DESIGN.md §5).
//
// Maps a PageKey to the page's bytes (KvCache::read_page layout) within a byte capacity; when a
// put would exceed it, the least recently used pages leave and are handed back to the caller,
// which demotes them to the disk tier or drops them. Plain class: owned by one actor thread,
// not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvstore/page_key.h"

namespace brigade {

using PageBytes = std::vector<std::byte>;

// A page leaving a tier: its key and its bytes (ownership passes to the receiver).
struct TierEntry {
  PageKey key;
  PageBytes bytes;
};

struct HostTierStats {
  uint64_t n_hits = 0;
  uint64_t n_misses = 0;
  uint64_t bytes_in = 0;   // bytes stored by put
  uint64_t bytes_out = 0;  // bytes served by get
  uint64_t n_evictions = 0;
  uint64_t n_entries = 0;
  uint64_t bytes_used = 0;
};

class HostTier {
 public:
  // capacity_bytes = 0 stores nothing: every put hands its page straight back as evicted.
  explicit HostTier(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Stores the page as the most recently used, replacing an entry with the same key, and
  // returns the entries evicted to make room, least recently used first. A page larger than
  // the whole capacity is not stored and comes back as the only evicted entry.
  std::vector<TierEntry> put(const PageKey& key, PageBytes bytes);
  // The page's bytes and marks it most recently used; nullopt on a miss. The span is valid
  // until the next non-const call.
  std::optional<std::span<const std::byte>> get(const PageKey& key);
  bool contains(const PageKey& key) const { return index_.count(key) != 0; }
  // Removes the page; false when it was not there.
  bool erase(const PageKey& key);
  // Removes every page; returns how many there were.
  uint64_t clear();

  size_t capacity_bytes() const { return capacity_; }
  size_t bytes_used() const { return used_; }
  size_t n_entries() const { return index_.size(); }
  HostTierStats stats() const;

 private:
  using Lru = std::list<TierEntry>;  // front = most recently used

  void evict_until_fits(size_t incoming, std::vector<TierEntry>& evicted);

  size_t capacity_;
  size_t used_ = 0;
  Lru lru_;
  std::unordered_map<PageKey, Lru::iterator, PageKeyHash> index_;
  HostTierStats stats_;
};

}  // namespace brigade
