# HiCache: moving KV pages between the device and the tiers below it (DESIGN.md §5).
# Scheduler -> executor: KvSave, KvLoad (answered by KvLoaded).
# Executor -> tier actor: TierPut, TierGet (answered by TierPages); anyone -> tier actor:
# TierStatsRequest (answered by TierStats).
# Page bytes travel inline (Data) for now, in the layout of KvCache::read_page: per layer, K
# then V, each the page's [pageSize, nKvHeads, headDim] slice.
@0x8a3919e43cae4ad5;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::schema");

# A page's content name: the 128-bit hash chain of kvstore/page_key.h.
struct PageKey {
  hi @0 :UInt64;
  lo @1 :UInt64;
}

enum Tier {
  host @0;
  disk @1;
}

# Copy device pages to the tiers: pages[i] holds the content named keys[i]. The executor reads
# the pages before it runs any later step, so the sender may reuse them right after.
struct KvSave {
  pages @0 :List(Int32);
  keys @1 :List(PageKey);
}

# Fill device pages from the tiers: keys[i] goes into pages[i], for the longest leading run of
# keys the tiers hold. The pages must not be used by any step until KvLoaded arrives.
struct KvLoad {
  requestId @0 :UInt64;
  keys @1 :List(PageKey);
  pages @2 :List(Int32);
}

struct KvLoaded {
  requestId @0 :UInt64;
  nLoaded @1 :Int32;               # leading keys whose pages now hold their content
  nFromHost @2 :Int32;
  nFromDisk @3 :Int32;
  error @4 :Text;                  # why fewer were loaded than the tiers may hold; empty if none
}

# Store pages: data[i] holds the content named keys[i]. Fire and forget.
struct TierPut {
  keys @0 :List(PageKey);
  data @1 :List(Data);
}

# Look up the longest leading run of keys.
struct TierGet {
  keys @0 :List(PageKey);
}

struct TierPages {
  data @0 :List(Data);             # data[i] for keys[i], i < the run's length
  from @1 :List(Tier);             # the tier each came from
}

struct TierStatsRequest {}

struct TierStats {
  hostHits @0 :UInt64;
  hostMisses @1 :UInt64;
  hostBytesIn @2 :UInt64;          # bytes stored into host (puts and promotions)
  hostBytesOut @3 :UInt64;         # bytes served from host
  hostEvictions @4 :UInt64;
  hostEntries @5 :UInt64;
  hostBytesUsed @6 :UInt64;
  diskHits @7 :UInt64;
  diskMisses @8 :UInt64;
  diskBytesIn @9 :UInt64;
  diskBytesOut @10 :UInt64;
  diskEvictions @11 :UInt64;
  diskEntries @12 :UInt64;
  diskBytesUsed @13 :UInt64;
  diskCorrupt @14 :UInt64;         # entries that failed their checksum, dropped
  hasDisk @15 :Bool;               # a disk tier is configured and opened
  diskDegraded @16 :Bool;          # an I/O error turned it off
}

# Anyone -> tier actor: drop every page of the host tier, and of the disk tier with `disk`
# (a prefix cache reset). Answered by TierCleared.
struct TierClear {
  disk @0 :Bool;
}

struct TierCleared {
  hostEntries @0 :UInt64;
  diskEntries @1 :UInt64;
  error @2 :Text;                  # the disk tier's error, if clearing it failed
}
