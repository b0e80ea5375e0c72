#include "messages/blob.h"

#include <mutex>
#include <random>
#include <string>
#include <unordered_map>

namespace brigade {

namespace {

// Handles -> weak references. Expired entries are swept when the map has doubled since the last
// sweep, so it stays proportional to the live buffers.
class BlobRegistry {
 public:
  uint64_t publish(const std::shared_ptr<const HostBlob>& blob) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= 2 * swept_size_ + 64) sweep();
    const uint64_t id = next_id_++;
    entries_.emplace(id, blob);
    return id;
  }
  std::shared_ptr<const HostBlob> find(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    auto blob = it->second.lock();
    if (!blob) entries_.erase(it);
    return blob;
  }
  size_t n_live() {
    std::lock_guard<std::mutex> lock(mu_);
    sweep();
    return entries_.size();
  }

 private:
  void sweep() {
    for (auto it = entries_.begin(); it != entries_.end();) it = it->second.expired() ? entries_.erase(it) : std::next(it);
    swept_size_ = entries_.size();
  }

  std::mutex mu_;
  std::unordered_map<uint64_t, std::weak_ptr<const HostBlob>> entries_;
  size_t swept_size_ = 0;
  uint64_t next_id_ = 1;
};

BlobRegistry& registry() {
  static BlobRegistry r;
  return r;
}

}  // namespace

uint64_t blob_process_id() {
  static const uint64_t id = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;  // never 0: an unset LocalBlob reads 0
  }();
  return id;
}

std::shared_ptr<const void> fill_blob_ref(schema::BlobRef::Builder ref, std::shared_ptr<const HostBlob> blob,
                                          bool inline_bytes) {
  BRIGADE_CHECK(blob != nullptr, "a BlobRef names a buffer");
  ref.setNBytes(blob->size());
  if (inline_bytes) {
    ref.setInline(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(blob->data()), blob->size()));
    return nullptr;
  }
  auto local = ref.initLocal();
  local.setProcess(blob_process_id());
  local.setId(registry().publish(blob));
  return blob;
}

Expected<BlobView> resolve_blob(schema::BlobRef::Reader ref) {
  if (ref.isInline()) {
    auto data = ref.getInline();
    if (data.size() != ref.getNBytes())
      return corrupt("inline blob holds " + std::to_string(data.size()) + " bytes, its BlobRef says " +
                     std::to_string(ref.getNBytes()));
    return BlobView{{reinterpret_cast<const std::byte*>(data.begin()), data.size()}, nullptr};
  }
  auto local = ref.getLocal();
  if (local.getProcess() != blob_process_id())
    return corrupt("a local BlobRef of another process arrived here; a sender that talks to other processes "
                   "must send its bytes inline");
  auto blob = registry().find(local.getId());
  if (!blob) return corrupt("local blob " + std::to_string(local.getId()) + " is gone (no message keeps it alive)");
  if (blob->size() != ref.getNBytes())
    return corrupt("local blob holds " + std::to_string(blob->size()) + " bytes, its BlobRef says " +
                   std::to_string(ref.getNBytes()));
  return BlobView{{blob->data(), blob->size()}, blob};
}

size_t n_live_blobs() { return registry().n_live(); }

}  // namespace brigade
