// The data plane's BlobRef (DESIGN.md §3; pd.capnp): bulk bytes named by a message instead of
// carried in it. Three kinds:
//   inline: the bytes are in the message (crosses processes and hosts);
//   local:  a handle to a reference-counted host buffer of this process. The message that names
//           it carries the buffer as its attachment (msg::build_attached), so the buffer lives
//           exactly as long as some message (or a holder of resolve_blob's view) needs it: a
//           message dropped anywhere (an abort, a dead actor's mailbox) frees it, and nothing
//           has to be released by hand;
//   shared: a POSIX shared-memory segment of this host, by name (crosses processes of one host
//           without passing the bytes through a socket).
// The process-wide registry maps handles (and the names of segments this process made or took)
// to weak references; resolving a handle of another process (its nonce differs) or one whose
// buffer is gone is an error, never a wrong read.
//
// A shared segment's name is the one thing not freed by reference counting, since no process
// sees every holder. Its life: the sender writes the bytes into a segment it made
// (make_shared_blob); the process that takes the message takes the segment (adopt_blob: maps it
// and unlinks the name at once, so it lives on only as long as that process's mapping); a
// process that drops such a message on purpose unlinks it (discard_blob). What is left (a
// receiver that died before taking it) is unlinked by its maker after kSharedBlobTtl, or when
// the maker exits; a maker killed outright leaves names that the next process to make one
// sweeps (their pid is dead). Names are /brigade-kv.<pid>.<nonce>.<n>, mode 0600.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "messages/pd.capnp.h"

namespace brigade {

// Host bytes: heap memory, or the mapping of a shared-memory segment.
class HostBlob {
 public:
  explicit HostBlob(size_t n) : heap_(n) {}  // n zeroed heap bytes
  ~HostBlob();
  HostBlob(const HostBlob&) = delete;
  HostBlob& operator=(const HostBlob&) = delete;

  std::byte* data() { return map_ ? static_cast<std::byte*>(map_) : heap_.data(); }
  const std::byte* data() const { return map_ ? static_cast<const std::byte*>(map_) : heap_.data(); }
  size_t size() const { return map_ ? map_size_ : heap_.size(); }
  std::byte& operator[](size_t i) { return data()[i]; }
  const std::byte& operator[](size_t i) const { return data()[i]; }
  const std::byte* begin() const { return data(); }
  const std::byte* end() const { return data() + size(); }

  // The segment's name for a shared blob; empty for heap bytes.
  const std::string& segment() const { return name_; }

 private:
  friend struct SharedBlobAccess;
  HostBlob() = default;

  std::vector<std::byte> heap_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::string name_;
  bool made_here_ = false;  // this process made the segment (and unlinks it unless it was sent)
  mutable std::atomic<bool> sent_{false};  // a BlobRef names it (fill_blob_ref): its name is the receiver's now
};

// How a BlobRef carries its bytes (schema::BlobTransport).
enum class BlobTransport { local, inline_bytes, shared };

inline BlobTransport from_schema(schema::BlobTransport t) {
  return t == schema::BlobTransport::INLINE   ? BlobTransport::inline_bytes
         : t == schema::BlobTransport::SHARED ? BlobTransport::shared
                                              : BlobTransport::local;
}
inline schema::BlobTransport to_schema(BlobTransport t) {
  return t == BlobTransport::inline_bytes ? schema::BlobTransport::INLINE
         : t == BlobTransport::shared     ? schema::BlobTransport::SHARED
                                          : schema::BlobTransport::LOCAL;
}

// A maker's unreceived segment is unlinked after this long (a hand-off takes milliseconds; one
// that takes longer is recomputed by its receiver, never misread).
inline constexpr std::chrono::seconds kSharedBlobTtl{120};

// This process's blob nonce (random, fixed for the process's life).
uint64_t blob_process_id();

// A new shared-memory segment of n bytes (n >= 1), mapped read-write (zeroed). Errors: the
// segment cannot be made (no /dev/shm, no space).
Expected<std::shared_ptr<HostBlob>> make_shared_blob(size_t n);

// `blob`'s bytes in a shared segment: blob itself when it is one, else a copy.
Expected<std::shared_ptr<const HostBlob>> as_shared_blob(std::shared_ptr<const HostBlob> blob);

// Fills `ref` to name `blob`: a copy of its bytes (inline_bytes), a local handle, or its
// segment's name (shared: `blob` must be a shared blob, see as_shared_blob; an empty blob goes
// inline). Returns what the message must keep alive (pass it to msg::build_attached): the buffer
// for a local handle or a segment, null for inline bytes.
std::shared_ptr<const void> fill_blob_ref(schema::BlobRef::Builder ref, std::shared_ptr<const HostBlob> blob,
                                          BlobTransport transport);

// The bytes a BlobRef names. Inline: a view into the message (valid while it lives; keep is
// null). Local, or a segment this process made or took: the buffer itself (keep holds it).
// Errors (corrupt): a handle of another process, a buffer that is gone, a segment this process
// has not taken (adopt_blob), a size that disagrees with nBytes.
struct BlobView {
  std::span<const std::byte> bytes;
  std::shared_ptr<const HostBlob> keep;
};
Expected<BlobView> resolve_blob(schema::BlobRef::Reader ref);
// To forward a BlobRef in another message: copy the struct (`b.setKv(ref)`) and build that
// message with resolve_blob(ref)->keep attached.

// The receiver's first touch of a BlobRef: resolve_blob, except that a shared segment made by
// another process is mapped into this one and its name unlinked (from then on it resolves here
// while keep lives, and nowhere else). Errors: those of resolve_blob; a segment that is gone or
// not on this host; a malformed name (nothing is opened or unlinked).
Expected<BlobView> adopt_blob(schema::BlobRef::Reader ref);

// A process that drops a message naming a shared segment on purpose (an aborted hand-off) frees
// the segment's name; other kinds need nothing (their bytes go with the message).
void discard_blob(schema::BlobRef::Reader ref);

// Local buffers and shared mappings still alive in this process (tests check that dropped
// messages free theirs).
size_t n_live_blobs();

// Names of segments this process made and no receiver has taken yet (they exist in /dev/shm).
size_t n_unreceived_shared_blobs();

// Unlinks this process's made segments older than `age` (kSharedBlobTtl, checked whenever a
// segment is made; tests pass 0), and segments whose maker process is dead. Returns how many.
size_t sweep_shared_blobs(std::chrono::seconds age);

// This host's identity for shared segments (the kernel's boot id and the device of /dev/shm, which
// a container may mount apart): processes that can share segments report equal ones.
const std::string& blob_host_id();

}  // namespace brigade
