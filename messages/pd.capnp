# Prefill/decode separation (DESIGN.md §3 "Topologies"; docs/architecture.md "PD separation"):
# a prefill instance runs a prompt, samples its first token and hands the sequence, with the KV
# bytes of its pages, to a decode instance.
#   prefill scheduler -> its executor: KvExport (answered by KvExported: the pages' bytes)
#   prefill scheduler -> router -> decode scheduler: KvHandoff (the request's state + the bytes)
#   decode scheduler -> its executor: KvImport (answered by KvImported: the pages are written)
# Page bytes are in KvCache::read_page's layout (per layer K then V, each the page's
# [pageSize, nKvHeads, headDim] slice in the KV dtype, int8 with its scales), one page after another.
@0xc4e1f0a7d35b2e91;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::schema");

using Req = import "request.capnp";

# Bulk bytes of the data plane (DESIGN.md §3): inline in the message, a handle to a
# reference-counted host buffer of this process, or a POSIX shared-memory segment of this host
# (messages/blob.h). A local handle names its process, so one that crosses into another process
# is refused instead of misread; a sender that may talk to another process sends inline, or in
# shared memory when every process is on one host (pd.transfer: shm).
struct BlobRef {
  nBytes @0 :UInt64;
  union {
    inline @1 :Data;
    local @2 :LocalBlob;
    shared @3 :SharedBlob;
  }
}

struct LocalBlob {
  process @0 :UInt64;              # the process's blob nonce (random per process)
  id @1 :UInt64;                   # the buffer's id in that process's blob registry
}

# A shared-memory segment (shm_open name /brigade-kv.<pid>.<nonce>.<n>, nBytes long). The
# process that takes the message maps it and unlinks the name (adopt_blob).
struct SharedBlob {
  name @0 :Text;
}

# How a reply carries the bytes it is asked for.
enum BlobTransport {
  local @0;                        # a handle (the reply stays in this process)
  inline @1;                       # the bytes in the message
  shared @2;                       # a shared-memory segment
}

# Read device pages into one host buffer, page after page. Reply: KvExported.
struct KvExport {
  requestId @0 :UInt64;
  pages @1 :List(Int32);
  transport @2 :BlobTransport;     # how the reply carries the bytes
}

struct KvExported {
  requestId @0 :UInt64;
  blob @1 :BlobRef;                # nPages x pageBytes bytes; empty with an error
  pageBytes @2 :UInt64;
  error @3 :Text;                  # non-empty: nothing was read
}

# Write the blob's pages into device pages (pages[i] gets the i-th pageBytes of the blob). The
# pages must not be used by a step before KvImported. Reply: KvImported.
struct KvImport {
  requestId @0 :UInt64;
  pages @1 :List(Int32);
  blob @2 :BlobRef;
  pageBytes @3 :UInt64;
}

struct KvImported {
  requestId @0 :UInt64;
  error @1 :Text;                  # non-empty: the pages hold nothing usable
}

# A prefilled sequence moving to a decode instance: everything its decode needs to continue
# exactly as a colocated instance would (same tokens greedy or seeded).
struct KvHandoff {
  requestId @0 :UInt64;
  prompt @1 :List(Int32);
  generated @2 :List(Int32);       # tokens sampled so far (the prefill side's first token)
  nKvTokens @3 :Int32;             # positions [0, nKvTokens) have KV in the blob's pages
  maxTokens @4 :Int32;
  sampling @5 :Req.SamplingParams; # seed included: the stream continues at len(generated)
  stopIds @6 :List(Int32);
  eosIds @7 :List(Int32);
  ignoreEos @8 :Bool;
  priority @9 :Int32;
  pageSize @10 :Int32;             # the KV layout the bytes are in: the decode side checks it
  pageBytes @11 :UInt64;
  nPages @12 :Int32;
  kv @13 :BlobRef;
  sentAtMicros @14 :Int64;         # steady clock of the sending process when the bytes were read
                                   # (transfer latency; meaningful in the same process only)
  fromInstance @15 :Text;          # the prefill instance (logs)
  lora @16 :UInt32;                # the request's LoRA adapter id (0 = base)
  images @17 :List(Req.ImageInput);  # the prompt's images: a failed import recomputes the prompt
  cacheSalt @18 :Text;             # the request's cache salt: the decode side keys its pages with it
}
