// TierStack: the HiCache tiers below the device as one store (DESIGN.md §5): a host memory tier
// above an optional disk tier, with a write policy between them.
//
//   write_through: every put goes to host and disk; pages evicted from host are dropped (disk
//                  has them). Survives a crash with everything written; costs a disk write per page.
//   write_back:    a put goes to host only; a page reaches disk when host evicts it. Fewer disk
//                  writes; pages still only in host are lost on a crash.
// A lookup returns the longest leading run of keys found, host first, then disk; a disk hit is
// promoted into host (which may demote other pages per the policy). With host capacity 0 the
// host tier stores nothing and both policies write straight to disk.
//
// Plain class; owned by the HiCache tier actor's thread. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kvstore/disk_tier.h"
#include "kvstore/host_tier.h"

namespace brigade {

enum class WritePolicy : uint8_t { write_through, write_back };
enum class Tier : uint8_t { host, disk };

const char* write_policy_name(WritePolicy p);
// "write_through" | "write_back"; invalid_argument listing the valid values otherwise.
Expected<WritePolicy> parse_write_policy(const std::string& name);

// The leading run of a lookup: pages[i] and from[i] belong to keys[i], for i < pages.size().
struct TierRun {
  std::vector<PageBytes> pages;
  std::vector<Tier> from;
};

// What TierStack::clear removed.
struct TierClearResult {
  uint64_t host_entries = 0;
  uint64_t disk_entries = 0;
  Status disk_status;  // the disk tier's error, if clearing it failed (host is cleared anyway)
};

struct TierStackStats {
  HostTierStats host;
  DiskTierStats disk;
  bool has_disk = false;
};

class TierStack {
 public:
  // disk may be null (no disk tier, or it failed to open).
  TierStack(size_t host_bytes, std::unique_ptr<DiskTier> disk, WritePolicy policy);

  // Stores one page under its key. Returns the disk tier's I/O error the first time one turns
  // it off (the caller logs it as a warning); the page then lives in host only, if at all.
  Status put(const PageKey& key, PageBytes bytes);
  // The longest leading run of `keys` present in some tier (see the file comment).
  TierRun get_run(std::span<const PageKey> keys);
  // An I/O error that turned the disk tier off during a lookup, once (see DiskTier::take_error).
  Status take_error();
  // Drops every page of the host tier, and of the disk tier when `disk` (DiskTier::clear).
  TierClearResult clear(bool disk);

  WritePolicy policy() const { return policy_; }
  bool has_disk() const { return disk_ != nullptr; }
  TierStackStats stats() const;

 private:
  // Hands pages evicted from host to disk (write_back) or drops them (write_through).
  Status demote(std::vector<TierEntry> evicted);
  Status to_disk(const PageKey& key, std::span<const std::byte> bytes);

  HostTier host_;
  std::unique_ptr<DiskTier> disk_;
  WritePolicy policy_;
  Status unreported_;  // a disk error raised by a lookup's promotion, until take_error
};

}  // namespace brigade
