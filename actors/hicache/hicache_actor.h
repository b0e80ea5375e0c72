// The HiCache tier station (DESIGN.md §3, §5): the host memory tier and the RocksDB disk tier
// below the device KV pool, as one TierStack. Spawned detached, since RocksDB I/O blocks.
//
// Contract:
//   TierPut  (fire and forget): stores each page under its key (write policy: tier_stack.h).
//   TierGet  -> TierPages: the longest leading run of the keys found, host first, then disk,
//               each with the tier it came from; disk hits are promoted into host.
//   TierStatsRequest -> TierStats: hits, misses, bytes moved, evictions per tier; corrupt
//               entries dropped; whether the disk tier is on.
//   TierClear -> TierCleared: drops every host page, and every disk page when asked (a prefix
//               cache reset); a disk tier that fails to clear is reported in the answer.
// No error ever reaches a requester: a disk tier that cannot be opened, or that an I/O error
// turns off, is logged once as a warning and then behaves as a tier that misses.
#pragma once

#include <caf/all.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kvstore/page_key.h"
#include "kvstore/tier_stack.h"
#include "messages/types.h"

namespace brigade {

using hicache_actor = caf::typed_actor<caf::reacts_to<tier_put_msg>,
                                       caf::replies_to<tier_get_msg>::with<tier_pages_msg>,
                                       caf::replies_to<tier_stats_request_msg>::with<tier_stats_msg>,
                                       caf::replies_to<tier_clear_msg>::with<tier_cleared_msg>>;

struct HiCacheSetup {
  size_t host_bytes = 0;  // 0 = no host tier
  std::string disk_path;  // empty = no disk tier
  size_t disk_bytes = 0;
  WritePolicy policy = WritePolicy::write_through;
  std::string model_fingerprint;  // kv_fingerprint(): guards the disk tier against other models
};

hicache_actor spawn_hicache(caf::actor_system& system, HiCacheSetup setup);

// PageKey lists in messages (hicache.capnp).
std::vector<PageKey> to_page_keys(capnp::List<schema::PageKey>::Reader list);
void fill_page_keys(capnp::List<schema::PageKey>::Builder list, std::span<const PageKey> keys);

}  // namespace brigade
