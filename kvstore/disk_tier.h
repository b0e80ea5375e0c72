// DiskTier: KV pages in RocksDB, the HiCache tier that outlives a restart (DESIGN.md §5).
//
// Maps a PageKey to the page's bytes on disk within a byte capacity, evicting the least
// recently used pages when a put would exceed it. Every value carries a header with a checksum
// of its payload; a value that fails it (corrupt or truncated) is deleted, counted and reported
// as a miss, so a bad page is never served. Reopening the same directory serves the pages
// written before (also after the writer was killed: RocksDB's write-ahead log replays every
// complete write; the checksum catches anything else).
//
// Failure degrades, never escalates: an I/O error on a write (disk full, read-only directory)
// is returned once by put() and turns the tier off; from then on it behaves as an empty tier
// (get misses, put drops). A tier that cannot be opened is not created (open returns the error)
// and its owner runs without one. Either way the caller logs a warning and recomputes.
//
// On-disk format (format version 1), in one RocksDB database:
//   "m:fingerprint"      -> the model fingerprint (kv_fingerprint) the pages belong to
//   "i:" + key (16 B)    -> index record: write sequence (u64) and value size (u64), little endian
//   "p:" + key (16 B)    -> value: header (24 B) + payload (the page bytes)
// key = PageKey hi then lo, big endian. Header (24 B): magic "BKVP" (u32), format version (u16),
// reserved (u16), payload length (u64), XXH3-64 of the payload (u64). The sequence orders the
// LRU: a put or a hit gives the page the next sequence number (a hit rewrites only the 16-byte
// index record), so recency survives a restart. The index record and the value are written in
// one atomic batch; open() rebuilds the in-memory LRU from the index records alone, without
// reading page payloads.
//
// Plain class; owned by one thread (the HiCache tier actor, spawned detached because RocksDB
// blocks). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "kvstore/host_tier.h"
#include "kvstore/page_key.h"

namespace brigade {

struct DiskTierStats {
  uint64_t n_hits = 0;
  uint64_t n_misses = 0;  // corrupt entries included
  uint64_t bytes_in = 0;  // payload bytes written
  uint64_t bytes_out = 0;  // payload bytes served
  uint64_t n_evictions = 0;
  uint64_t n_corrupt = 0;  // values that failed the header or checksum check, deleted
  uint64_t n_entries = 0;
  uint64_t bytes_used = 0;  // value bytes (header + payload) counted against the capacity
  bool degraded = false;    // an I/O error turned the tier off
};

class DiskTier {
 public:
  // Opens (or creates) the database in directory `path`. Errors (io_error) when the directory
  // cannot be created or opened (unwritable, held by another process); invalid_argument when
  // it holds pages of another model fingerprint (the pages could never match: point disk_path
  // elsewhere or delete the directory) or capacity_bytes is 0. A database holding more than
  // capacity_bytes (capacity lowered since) is trimmed to it at open.
  static Expected<std::unique_ptr<DiskTier>> open(const std::string& path, size_t capacity_bytes,
                                                  std::string_view model_fingerprint);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Stores the page as the most recently used (replacing one with the same key), evicting
  // least recently used pages to make room; a page larger than the capacity is not stored.
  // Returns the error that degraded the tier when this or an earlier call (a get's bookkeeping
  // write) hit one and it was not reported yet (see take_error); otherwise OK, a no-op once
  // degraded.
  Status put(const PageKey& key, std::span<const std::byte> bytes);
  // The page's bytes, checksum verified, and marks it most recently used; nullopt on a miss,
  // on a corrupt or truncated value (deleted) and once degraded.
  std::optional<PageBytes> get(const PageKey& key);
  // The I/O error that degraded the tier, once: the first call after it happened returns it,
  // every other call OK. put() returns it too.
  Status take_error();
  bool contains(const PageKey& key) const;
  // Removes the page; false when it was not there.
  bool erase(const PageKey& key);
  // Removes every page (the model fingerprint stays) and compacts the freed range so the space
  // goes back to the file system; returns how many pages there were. An I/O error degrades the
  // tier as a failed put does and is returned; a tier already degraded is left as it is
  // (io_error: its pages stay on disk until it is reopened and cleared).
  Expected<uint64_t> clear();

  size_t capacity_bytes() const;
  bool degraded() const;
  DiskTierStats stats() const;

  // The RocksDB keys of a page (format above); for tools and tests that inspect the database.
  static std::string value_key(const PageKey& key);
  static std::string index_key(const PageKey& key);
  // A value for `payload` in the on-disk format, as put writes it.
  static std::string encode_value(std::span<const std::byte> payload);

 private:
  struct Impl;
  explicit DiskTier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade
