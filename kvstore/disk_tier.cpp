#include "kvstore/disk_tier.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <list>
#include <system_error>
#include <unordered_map>
#include <vector>

namespace brigade {

namespace {

constexpr uint32_t kMagic = 0x504B5642;  // "BKVP" read as little-endian bytes
constexpr uint16_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr size_t kIndexRecordBytes = 16;
constexpr std::string_view kFingerprintKey = "m:fingerprint";
constexpr std::string_view kIndexPrefix = "i:";
constexpr std::string_view kValuePrefix = "p:";

void put_le(std::string& out, uint64_t v, int n_bytes) {
  for (int i = 0; i < n_bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view in, size_t at, int n_bytes) {
  uint64_t v = 0;
  for (int i = 0; i < n_bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[at + static_cast<size_t>(i)])} << (8 * i);
  return v;
}

std::string key_bytes(std::string_view prefix, const PageKey& key) {
  std::string s(prefix);
  for (uint64_t half : {key.hi, key.lo})
    for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>((half >> (8 * i)) & 0xff));
  return s;
}
PageKey parse_key(std::string_view k) {  // k = prefix + 16 bytes
  PageKey key;
  for (size_t i = 0; i < 8; ++i) key.hi = (key.hi << 8) | static_cast<uint8_t>(k[2 + i]);
  for (size_t i = 0; i < 8; ++i) key.lo = (key.lo << 8) | static_cast<uint8_t>(k[10 + i]);
  return key;
}

std::string index_record(uint64_t sequence, uint64_t value_bytes) {
  std::string r;
  put_le(r, sequence, 8);
  put_le(r, value_bytes, 8);
  return r;
}

// The payload of a stored value, or nullopt when the header, length or checksum is wrong.
std::optional<std::string_view> verified_payload(std::string_view value) {
  if (value.size() < kHeaderBytes) return std::nullopt;
  if (get_le(value, 0, 4) != kMagic || get_le(value, 4, 2) != kFormatVersion) return std::nullopt;
  const uint64_t n_payload = get_le(value, 8, 8);
  if (n_payload != value.size() - kHeaderBytes) return std::nullopt;
  const std::string_view payload = value.substr(kHeaderBytes);
  if (XXH3_64bits(payload.data(), payload.size()) != get_le(value, 16, 8)) return std::nullopt;
  return payload;
}

Status io_failure(const std::string& what, const rocksdb::Status& s) {
  return io_error("disk tier: " + what + ": " + s.ToString());
}

}  // namespace

struct DiskTier::Impl {
  struct Entry {
    uint64_t sequence = 0;
    uint64_t value_bytes = 0;
    std::list<PageKey>::iterator lru_pos;
  };

  std::unique_ptr<rocksdb::DB> db;
  std::string path;
  size_t capacity = 0;
  uint64_t next_sequence = 1;
  std::list<PageKey> lru;  // front = most recently used
  std::unordered_map<PageKey, Entry, PageKeyHash> index;
  size_t used = 0;
  DiskTierStats stats;
  Status unreported;  // the error that degraded the tier, until take_error hands it out
  rocksdb::WriteOptions write_options;

  // Applies `batch`; on failure the tier degrades and false is returned.
  bool write(rocksdb::WriteBatch& batch, const char* what) {
    if (stats.degraded) return false;
    const rocksdb::Status s = db->Write(write_options, &batch);
    if (s.ok()) return true;
    stats.degraded = true;
    unreported = io_failure(std::string(what) + " in " + path + " failed; the disk tier is off until restart", s);
    return false;
  }

  void forget(const PageKey& key) {
    auto it = index.find(key);
    used -= it->second.value_bytes;
    lru.erase(it->second.lru_pos);
    index.erase(it);
  }

  void remember(const PageKey& key, uint64_t sequence, uint64_t value_bytes) {
    lru.push_front(key);
    index[key] = Entry{sequence, value_bytes, lru.begin()};
    used += value_bytes;
  }

  // Adds to `batch` the deletion of the least recently used pages until `incoming` more bytes
  // fit, and returns their keys (still in the index until the batch is written).
  std::vector<PageKey> plan_eviction(size_t incoming, rocksdb::WriteBatch& batch) const {
    std::vector<PageKey> victims;
    size_t freed = 0;
    for (auto it = lru.rbegin(); it != lru.rend() && used - freed + incoming > capacity; ++it) {
      batch.Delete(key_bytes(kValuePrefix, *it));
      batch.Delete(key_bytes(kIndexPrefix, *it));
      freed += index.at(*it).value_bytes;
      victims.push_back(*it);
    }
    return victims;
  }

  Status load_index();
};

Status DiskTier::Impl::load_index() {
  struct Record {
    PageKey key;
    uint64_t sequence;
    uint64_t value_bytes;
  };
  std::vector<Record> records;
  rocksdb::WriteBatch bad;  // malformed index records (never written by this format)
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(rocksdb::Slice(kIndexPrefix.data(), kIndexPrefix.size())); it->Valid(); it->Next()) {
    const std::string_view k(it->key().data(), it->key().size());
    if (!k.starts_with(kIndexPrefix)) break;
    const std::string_view v(it->value().data(), it->value().size());
    if (k.size() != kIndexPrefix.size() + 16 || v.size() != kIndexRecordBytes) {
      bad.Delete(it->key());
      // Its value, if any, would sit outside the capacity accounting forever.
      if (k.size() == kIndexPrefix.size() + 16) bad.Delete(key_bytes(kValuePrefix, parse_key(k)));
      continue;
    }
    records.push_back({parse_key(k), get_le(v, 0, 8), get_le(v, 8, 8)});
  }
  if (!it->status().ok()) return io_failure("reading the index of " + path, it->status());
  it.reset();
  if (bad.Count() > 0) {
    const rocksdb::Status s = db->Write(write_options, &bad);
    if (!s.ok()) return io_failure("dropping malformed index records in " + path, s);
  }
  std::sort(records.begin(), records.end(), [](const Record& a, const Record& b) { return a.sequence < b.sequence; });
  for (const Record& r : records) {
    remember(r.key, r.sequence, r.value_bytes);
    next_sequence = std::max(next_sequence, r.sequence + 1);
  }
  // A capacity lowered since the last run: trim now rather than on the first put.
  rocksdb::WriteBatch trim;
  const std::vector<PageKey> victims = plan_eviction(0, trim);
  if (!victims.empty()) {
    const rocksdb::Status s = db->Write(write_options, &trim);
    if (!s.ok()) return io_failure("trimming " + path + " to its capacity", s);
    for (const PageKey& v : victims) forget(v);
    stats.n_evictions += victims.size();
  }
  return Status::ok();
}

DiskTier::DiskTier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DiskTier::~DiskTier() = default;

Expected<std::unique_ptr<DiskTier>> DiskTier::open(const std::string& path, size_t capacity_bytes,
                                                   std::string_view model_fingerprint) {
  if (capacity_bytes == 0) return invalid_argument("disk tier " + path + ": capacity must be > 0 bytes");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return io_error("disk tier: cannot create directory " + path + ": " + ec.message());
  rocksdb::Options options;
  options.create_if_missing = true;
  // Page bytes are floats: compression costs CPU on every put and get and saves little.
  options.compression = rocksdb::kNoCompression;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok()) return io_failure("cannot open " + path, s);
  auto impl = std::make_unique<Impl>();
  impl->db.reset(raw);
  impl->path = path;
  impl->capacity = capacity_bytes;

  std::string stored;
  const rocksdb::Slice fp_key(kFingerprintKey.data(), kFingerprintKey.size());
  const rocksdb::Status g = impl->db->Get(rocksdb::ReadOptions(), fp_key, &stored);
  if (g.ok() && stored != model_fingerprint) {
    return invalid_argument("disk tier " + path + " holds KV pages of another model or KV layout (fingerprint '" +
                            stored + "', this model's is '" + std::string(model_fingerprint) +
                            "'); point cache.disk_path elsewhere or delete the directory");
  }
  if (!g.ok() && !g.IsNotFound()) return io_failure("reading " + path, g);
  if (g.IsNotFound()) {
    const rocksdb::Status p = impl->db->Put(impl->write_options, fp_key,
                                            rocksdb::Slice(model_fingerprint.data(), model_fingerprint.size()));
    if (!p.ok()) return io_failure("cannot write to " + path, p);
  }
  BRIGADE_RETURN_IF_ERROR(impl->load_index());
  return std::unique_ptr<DiskTier>(new DiskTier(std::move(impl)));
}

Status DiskTier::put(const PageKey& key, std::span<const std::byte> bytes) {
  Impl& d = *impl_;
  if (d.stats.degraded) return take_error();
  const std::string value = encode_value(bytes);
  if (value.size() > d.capacity) return Status::ok();
  if (d.index.count(key) && !erase(key)) return take_error();
  rocksdb::WriteBatch batch;
  const std::vector<PageKey> victims = d.plan_eviction(value.size(), batch);
  const uint64_t sequence = d.next_sequence++;
  batch.Put(key_bytes(kValuePrefix, key), value);
  batch.Put(key_bytes(kIndexPrefix, key), index_record(sequence, value.size()));
  if (!d.write(batch, "writing a page")) return take_error();
  for (const PageKey& v : victims) d.forget(v);
  d.stats.n_evictions += victims.size();
  d.remember(key, sequence, value.size());
  d.stats.bytes_in += bytes.size();
  return Status::ok();
}

std::optional<PageBytes> DiskTier::get(const PageKey& key) {
  Impl& d = *impl_;
  auto it = d.index.find(key);
  if (d.stats.degraded || it == d.index.end()) {
    ++d.stats.n_misses;
    return std::nullopt;
  }
  std::string value;
  const rocksdb::Status s = d.db->Get(rocksdb::ReadOptions(), key_bytes(kValuePrefix, key), &value);
  const std::optional<std::string_view> payload =
      s.ok() ? verified_payload(value) : std::nullopt;
  if (!payload) {
    // Missing (index without value), unreadable, corrupt or truncated: never serve it, and drop
    // it so the space is reused and the page recomputed and written again.
    if (s.ok() || s.IsNotFound() || s.IsCorruption()) ++d.stats.n_corrupt;
    erase(key);
    ++d.stats.n_misses;
    return std::nullopt;
  }
  PageBytes out(payload->size());
  std::memcpy(out.data(), payload->data(), payload->size());
  // Recency: the page gets the next sequence number, persisted in its index record.
  const uint64_t sequence = d.next_sequence++;
  rocksdb::WriteBatch touch;
  touch.Put(key_bytes(kIndexPrefix, key), index_record(sequence, it->second.value_bytes));
  if (d.write(touch, "recording a page's use")) {
    d.lru.splice(d.lru.begin(), d.lru, it->second.lru_pos);
    it->second.sequence = sequence;
  }
  ++d.stats.n_hits;
  d.stats.bytes_out += out.size();
  return out;
}

bool DiskTier::contains(const PageKey& key) const { return !impl_->stats.degraded && impl_->index.count(key) != 0; }

bool DiskTier::erase(const PageKey& key) {
  Impl& d = *impl_;
  if (!d.index.count(key)) return false;
  rocksdb::WriteBatch batch;
  batch.Delete(key_bytes(kValuePrefix, key));
  batch.Delete(key_bytes(kIndexPrefix, key));
  if (!d.write(batch, "deleting a page")) return false;
  d.forget(key);
  return true;
}

Expected<uint64_t> DiskTier::clear() {
  Impl& d = *impl_;
  if (d.stats.degraded)
    return io_error("the disk tier in " + d.path + " is off after an I/O error; its pages stay until it is reopened");
  const uint64_t n = d.index.size();
  // Each prefix's range ends at the prefix with its ':' raised to ';', the next byte.
  auto range_end = [](std::string_view prefix) {
    std::string e(prefix);
    e.back() = static_cast<char>(e.back() + 1);
    return e;
  };
  const std::string p_end = range_end(kValuePrefix), i_end = range_end(kIndexPrefix);
  rocksdb::WriteBatch batch;
  auto* cf = d.db->DefaultColumnFamily();
  if (!batch.DeleteRange(cf, rocksdb::Slice(kValuePrefix.data(), kValuePrefix.size()), p_end).ok() ||
      !batch.DeleteRange(cf, rocksdb::Slice(kIndexPrefix.data(), kIndexPrefix.size()), i_end).ok())
    return internal_error("building the deletion of every page in " + d.path);
  if (!d.write(batch, "deleting every page")) return take_error();
  d.lru.clear();
  d.index.clear();
  d.used = 0;
  // The range deletions are tombstones until compaction; compacting now returns the space.
  const rocksdb::Slice p_begin(kValuePrefix.data(), kValuePrefix.size()), p_last(p_end);
  const rocksdb::Slice i_begin(kIndexPrefix.data(), kIndexPrefix.size()), i_last(i_end);
  for (const auto& [b, e] : {std::pair{&p_begin, &p_last}, std::pair{&i_begin, &i_last}}) {
    const rocksdb::Status s = d.db->CompactRange(rocksdb::CompactRangeOptions(), b, e);
    if (!s.ok()) spdlog::warn("disk tier {}: compacting after clearing it: {}", d.path, s.ToString());
  }
  return n;
}

Status DiskTier::take_error() { return std::exchange(impl_->unreported, Status::ok()); }

size_t DiskTier::capacity_bytes() const { return impl_->capacity; }
bool DiskTier::degraded() const { return impl_->stats.degraded; }

DiskTierStats DiskTier::stats() const {
  DiskTierStats s = impl_->stats;
  s.n_entries = impl_->index.size();
  s.bytes_used = impl_->used;
  return s;
}

std::string DiskTier::value_key(const PageKey& key) { return key_bytes(kValuePrefix, key); }
std::string DiskTier::index_key(const PageKey& key) { return key_bytes(kIndexPrefix, key); }

std::string DiskTier::encode_value(std::span<const std::byte> payload) {
  std::string v;
  v.reserve(kHeaderBytes + payload.size());
  put_le(v, kMagic, 4);
  put_le(v, kFormatVersion, 2);
  put_le(v, 0, 2);
  put_le(v, payload.size(), 8);
  put_le(v, XXH3_64bits(payload.data(), payload.size()), 8);
  v.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return v;
}

}  // namespace brigade
