# Scheduler <-> KV page manager: leases of pages from one KV pool (DESIGN.md §3, §5).
@0x95dbac82a7946c35;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::schema");

struct PageLeaseRequest {
  requestId @0 :UInt64;
  nPages @1 :Int32;                # pages wanted
  minPages @2 :Int32;              # grant fewer, down to this, rather than nothing
}

struct PageLeaseGrant {
  requestId @0 :UInt64;
  pages @1 :List(Int32);           # empty when nothing could be granted
  nFree @2 :Int32;                 # pages still free after the grant
  nTotal @3 :Int32;
}

struct PageFree {
  pages @0 :List(Int32);
}

# Anyone -> scheduler: how much of a prompt its prefix cache holds (a router's cache-aware
# choice, an embedding application's introspection). Read-only: recency is not touched.
struct PrefixQuery {
  tokens @0 :List(Int32);
}

struct PrefixQueryResult {
  cachedTokens @0 :Int32;          # leading tokens whose KV pages the device cache holds
  cachedPages @1 :Int32;           # pages the whole device cache holds
}
