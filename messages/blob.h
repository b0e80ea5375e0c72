// The data plane's BlobRef (DESIGN.md §3; pd.capnp): bulk bytes named by a message instead of
// carried in it. Two kinds:
//   inline: the bytes are in the message (what crosses processes);
//   local:  a handle to a reference-counted host buffer of this process. The message that names
//           it carries the buffer as its attachment (msg::build_attached), so the buffer lives
//           exactly as long as some message (or a holder of resolve_blob's view) needs it: a
//           message dropped anywhere (an abort, a dead actor's mailbox) frees it, and nothing
//           has to be released by hand.
// The process-wide registry maps handles to weak references; resolving a handle of another
// process (its nonce differs) or one whose buffer is gone is an error, never a wrong read.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "messages/pd.capnp.h"

namespace brigade {

using HostBlob = std::vector<std::byte>;

// This process's blob nonce (random, fixed for the process's life).
uint64_t blob_process_id();

// Fills `ref` to name `blob`: a copy of its bytes (inline_bytes) or a local handle. Returns what
// the message must keep alive (pass it to msg::build_attached): the buffer for a local handle,
// null for inline bytes.
std::shared_ptr<const void> fill_blob_ref(schema::BlobRef::Builder ref, std::shared_ptr<const HostBlob> blob,
                                          bool inline_bytes);

// The bytes a BlobRef names. Inline: a view into the message (valid while it lives; keep is
// null). Local: the buffer itself (keep holds it). Errors (corrupt): a handle of another process,
// a buffer that is gone, a size that disagrees with nBytes.
struct BlobView {
  std::span<const std::byte> bytes;
  std::shared_ptr<const HostBlob> keep;
};
Expected<BlobView> resolve_blob(schema::BlobRef::Reader ref);
// To forward a BlobRef in another message: copy the struct (`b.setKv(ref)`) and build that
// message with resolve_blob(ref)->keep attached.

// Local buffers still alive (tests check that dropped messages free theirs).
size_t n_live_blobs();

}  // namespace brigade
