#include "messages/blob.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>

namespace brigade {

namespace {

constexpr const char* kSegmentPrefix = "brigade-kv.";

// The live buffer `key` names in `map` (a dead entry is erased on the way), or null.
template <class Map>
std::shared_ptr<const HostBlob> find_live(Map& map, const typename Map::key_type& key) {
  auto it = map.find(key);
  if (it == map.end()) return nullptr;
  auto blob = it->second.lock();
  if (!blob) map.erase(it);
  return blob;
}

template <class Map>
void erase_expired(Map& map) {
  for (auto it = map.begin(); it != map.end();) it = it->second.expired() ? map.erase(it) : std::next(it);
}

// Handles and segment names -> weak references. Expired entries are swept when a map has doubled
// since the last sweep, so it stays proportional to the live buffers.
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
    return find_live(entries_, id);
  }
  void name(const std::shared_ptr<const HostBlob>& blob) {
    std::lock_guard<std::mutex> lock(mu_);
    if (named_.size() >= 2 * swept_named_ + 64) sweep();
    named_[blob->segment()] = blob;
  }
  std::shared_ptr<const HostBlob> find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    return find_live(named_, name);
  }
  size_t n_live() {
    std::lock_guard<std::mutex> lock(mu_);
    sweep();
    return entries_.size() + named_.size();
  }

 private:
  void sweep() {
    erase_expired(entries_);
    erase_expired(named_);
    swept_size_ = entries_.size();
    swept_named_ = named_.size();
  }

  std::mutex mu_;
  std::unordered_map<uint64_t, std::weak_ptr<const HostBlob>> entries_;
  std::unordered_map<std::string, std::weak_ptr<const HostBlob>> named_;
  size_t swept_size_ = 0, swept_named_ = 0;
  uint64_t next_id_ = 1;
};

BlobRegistry& registry() {
  static BlobRegistry r;
  return r;
}

// The segments this process made that no receiver is known to have taken, with when they were
// made: what the TTL sweep and the exit handler unlink. Never destroyed (HostBlob destructors may
// run during static destruction); the atexit handler empties it.
class MadeSegments {
 public:
  void add(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    made_[name] = std::chrono::steady_clock::now();
  }
  void forget(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    made_.erase(name);
  }
  // Unlinks and forgets the names older than `age`; how many existed.
  size_t unlink_older_than(std::chrono::steady_clock::duration age) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    size_t n = 0;
    for (auto it = made_.begin(); it != made_.end();) {
      if (now - it->second < age) {
        ++it;
        continue;
      }
      n += ::shm_unlink(it->first.c_str()) == 0;
      it = made_.erase(it);
    }
    return n;
  }
  // The names still in /dev/shm (the others were taken: forgotten here).
  size_t n_existing() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = made_.begin(); it != made_.end();) {
      struct stat sb;
      it = ::stat(("/dev/shm" + it->first).c_str(), &sb) == 0 ? std::next(it) : made_.erase(it);
    }
    return made_.size();
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> made_;
};

MadeSegments& made_segments() {
  static MadeSegments* m = [] {
    auto* made = new MadeSegments;
    std::atexit([] { made_segments().unlink_older_than(std::chrono::steady_clock::duration::min()); });
    return made;
  }();
  return *m;
}

// A name this code makes: /brigade-kv.<pid>.<hex nonce>.<n>. Anything else is refused before it
// is opened or unlinked (a message cannot make a process touch other segments).
bool valid_segment_name(const std::string& name) {
  const std::string head = std::string("/") + kSegmentPrefix;
  if (name.size() <= head.size() || name.size() > 128 || name.compare(0, head.size(), head) != 0) return false;
  for (size_t i = head.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.')) return false;
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

// Unlinks segments of makers that no longer run (killed before they could clean up).
size_t sweep_dead_makers() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  size_t n = 0;
  const size_t prefix = std::strlen(kSegmentPrefix);
  while (const dirent* e = ::readdir(dir)) {
    const std::string file = e->d_name;
    if (file.compare(0, prefix, kSegmentPrefix) != 0) continue;
    const long pid = std::strtol(file.c_str() + prefix, nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    if (valid_segment_name("/" + file)) n += ::shm_unlink(("/" + file).c_str()) == 0;
  }
  ::closedir(dir);
  return n;
}

}  // namespace

struct SharedBlobAccess {
  static std::shared_ptr<HostBlob> mapped(void* map, size_t size, std::string name, bool made_here) {
    std::shared_ptr<HostBlob> b(new HostBlob());
    b->map_ = map;
    b->map_size_ = size;
    b->name_ = std::move(name);
    b->made_here_ = made_here;
    return b;
  }
  static void mark_sent(const HostBlob& b) { b.sent_ = true; }
};

HostBlob::~HostBlob() {
  if (!map_) return;
  ::munmap(map_, map_size_);
  if (made_here_ && !sent_) {  // never named by a message: nobody else will take it
    ::shm_unlink(name_.c_str());
    made_segments().forget(name_);
  }
}

uint64_t blob_process_id() {
  static const uint64_t id = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;  // never 0: an unset LocalBlob reads 0
  }();
  return id;
}

const std::string& blob_host_id() {
  static const std::string id = [] {
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    if (boot.empty()) {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      boot = std::string("host:") + host;
    }
    // Containers on one host share the boot id but may each mount a /dev/shm of their own.
    struct stat sb;
    const std::string shm = ::stat("/dev/shm", &sb) == 0 ? std::to_string(static_cast<unsigned long long>(sb.st_dev)) : "none";
    return boot + " shm-dev " + shm;
  }();
  return id;
}

size_t sweep_shared_blobs(std::chrono::seconds age) { return made_segments().unlink_older_than(age) + sweep_dead_makers(); }

size_t n_unreceived_shared_blobs() { return made_segments().n_existing(); }

Expected<std::shared_ptr<HostBlob>> make_shared_blob(size_t n) {
  if (n == 0) return invalid_argument("a shared-memory blob holds at least one byte");
  static std::once_flag swept;
  std::call_once(swept, [] { sweep_dead_makers(); });
  made_segments().unlink_older_than(kSharedBlobTtl);
  static std::atomic<uint64_t> counter{0};
  char name[96];
  std::snprintf(name, sizeof name, "/%s%ld.%08x.%llu", kSegmentPrefix, static_cast<long>(::getpid()),
                static_cast<unsigned>(blob_process_id()), static_cast<unsigned long long>(counter++));
  const int fd = ::shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return io_error(std::string("shared memory: cannot make ") + name + ": " + errno_text());
  auto fail = [&](const std::string& what, int err) -> Status {
    ::close(fd);
    ::shm_unlink(name);
    return io_error(std::string("shared memory: ") + what + " " + name + " (" + std::to_string(n) +
                    " bytes): " + std::strerror(err));
  };
  // Reserve the pages now: a full /dev/shm is this error, not a SIGBUS on a later write.
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(n)); err != 0) return fail("cannot size", err);
  void* map = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("cannot map", errno);
  ::close(fd);
  made_segments().add(name);
  auto blob = SharedBlobAccess::mapped(map, n, name, /*made_here=*/true);
  registry().name(blob);
  return blob;
}

Expected<std::shared_ptr<const HostBlob>> as_shared_blob(std::shared_ptr<const HostBlob> blob) {
  BRIGADE_CHECK(blob != nullptr, "a BlobRef names a buffer");
  if (!blob->segment().empty() || blob->size() == 0) return blob;
  BRIGADE_ASSIGN_OR_RETURN(std::shared_ptr<HostBlob> copy, make_shared_blob(blob->size()));
  std::memcpy(copy->data(), blob->data(), blob->size());
  return std::shared_ptr<const HostBlob>(std::move(copy));
}

std::shared_ptr<const void> fill_blob_ref(schema::BlobRef::Builder ref, std::shared_ptr<const HostBlob> blob,
                                          BlobTransport transport) {
  BRIGADE_CHECK(blob != nullptr, "a BlobRef names a buffer");
  ref.setNBytes(blob->size());
  if (transport == BlobTransport::inline_bytes || (transport == BlobTransport::shared && blob->size() == 0)) {
    ref.setInline(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(blob->data()), blob->size()));
    return nullptr;
  }
  if (transport == BlobTransport::shared) {
    BRIGADE_CHECK(!blob->segment().empty(), "a shared BlobRef names a shared blob (as_shared_blob)");
    ref.initShared().setName(blob->segment());
    SharedBlobAccess::mark_sent(*blob);
    return blob;
  }
  auto local = ref.initLocal();
  local.setProcess(blob_process_id());
  local.setId(registry().publish(blob));
  return blob;
}

namespace {

Expected<BlobView> checked_view(std::shared_ptr<const HostBlob> blob, schema::BlobRef::Reader ref, const char* kind) {
  if (blob->size() != ref.getNBytes())
    return corrupt(std::string(kind) + " blob holds " + std::to_string(blob->size()) + " bytes, its BlobRef says " +
                   std::to_string(ref.getNBytes()));
  std::span<const std::byte> bytes{blob->data(), blob->size()};
  return BlobView{bytes, std::move(blob)};
}

}  // namespace

Expected<BlobView> resolve_blob(schema::BlobRef::Reader ref) {
  switch (ref.which()) {
    case schema::BlobRef::INLINE: {
      auto data = ref.getInline();
      if (data.size() != ref.getNBytes())
        return corrupt("inline blob holds " + std::to_string(data.size()) + " bytes, its BlobRef says " +
                       std::to_string(ref.getNBytes()));
      return BlobView{{reinterpret_cast<const std::byte*>(data.begin()), data.size()}, nullptr};
    }
    case schema::BlobRef::LOCAL: {
      auto local = ref.getLocal();
      if (local.getProcess() != blob_process_id())
        return corrupt("a local BlobRef of another process arrived here; a sender that talks to other processes "
                       "must send its bytes inline or in shared memory");
      auto blob = registry().find(local.getId());
      if (!blob) return corrupt("local blob " + std::to_string(local.getId()) + " is gone (no message keeps it alive)");
      return checked_view(std::move(blob), ref, "local");
    }
    case schema::BlobRef::SHARED: {
      const std::string name = ref.getShared().getName();
      auto blob = registry().find(name);
      if (!blob)
        return corrupt("shared-memory blob " + name + " is gone, or was not taken into this process (adopt_blob)");
      return checked_view(std::move(blob), ref, "shared-memory");
    }
  }
  return corrupt("a BlobRef of an unknown kind");
}

Expected<BlobView> adopt_blob(schema::BlobRef::Reader ref) {
  if (!ref.isShared()) return resolve_blob(ref);
  const std::string name = ref.getShared().getName();
  if (!valid_segment_name(name)) return corrupt("'" + name + "' is not a brigade shared-memory blob name");
  if (auto mine = registry().find(name)) {  // made (or already taken) by this process
    if (::shm_unlink(name.c_str()) == 0) made_segments().forget(name);
    return checked_view(std::move(mine), ref, "shared-memory");
  }
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0)
    return corrupt("shared-memory blob " + name + " cannot be opened (" + errno_text() +
                   "): it is gone (its maker's TTL or exit) or on another host");
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || static_cast<uint64_t>(sb.st_size) != ref.getNBytes() || sb.st_size == 0) {
    const auto size = static_cast<long long>(sb.st_size);
    ::close(fd);
    return corrupt("shared-memory blob " + name + " holds " + std::to_string(size) + " bytes, its BlobRef says " +
                   std::to_string(ref.getNBytes()));
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(sb.st_size), PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  ::shm_unlink(name.c_str());  // taken: it lives on as this process's mapping only
  if (map == MAP_FAILED) return io_error("shared memory: cannot map " + name + ": " + std::strerror(err));
  std::shared_ptr<const HostBlob> blob = SharedBlobAccess::mapped(map, static_cast<size_t>(sb.st_size), name, false);
  registry().name(blob);
  return checked_view(std::move(blob), ref, "shared-memory");
}

void discard_blob(schema::BlobRef::Reader ref) {
  if (!ref.isShared()) return;
  const std::string name = ref.getShared().getName();
  if (!valid_segment_name(name)) return;
  ::shm_unlink(name.c_str());
  made_segments().forget(name);
}

size_t n_live_blobs() { return registry().n_live(); }

}  // namespace brigade
