# Multi-process clusters (DESIGN.md §3 "Topologies"; docs/architecture.md "Processes"): a
# `brigade node` process serves one instance of a topology and publishes one node actor through
# CAF's middleman. A front (an Engine whose topology names the instance `remote: HOST:PORT`)
# connects to it, introduces itself with NodeHello (plus its event sinks, as actor handles beside
# the message) and gets NodeInfo back; from then on the node actor takes the place of the
# instance's scheduler for the front's router, and forwards the scheduler's TokenEvents and
# hand-offs to the front. NodeStatsRequest/NodeStats carry the instance's counters.
@0xc7cfa448590d8b09;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("brigade::schema");

# Front -> node, with the front's token sink and hand-off sink. Reply: NodeInfo, or an error
# (another front is connected; a protocol, instance name or role mismatch), in which case the
# node keeps no trace of the front.
struct NodeHello {
  protocol @0 :UInt32;             # kNodeProtocol of the front's build; must equal the node's
  front @1 :Text;                  # names the front in the node's logs
  instance @2 :Text;               # the instance name the front's topology gives this endpoint
  role @3 :Text;                   # and its role there (both | prefill | decode)
  # Authentication (actors/node/node_auth.h), when the node has a token: the challenge of the
  # NodeInfo that (info) returned, HMAC proof of the shared token over it, and the front's nonce
  # for the node's proof in the reply.
  challenge @4 :Data;
  proof @5 :Data;
  nonce @6 :Data;
}

# What the front needs to route to, validate requests for and report the instance.
struct NodeInfo {
  protocol @0 :UInt32;
  instance @1 :Text;               # the instance the node serves (its topology's name)
  role @2 :Text;                   # both | prefill | decode
  arch @3 :Text;                   # ModelSummary of the node's model
  vocabSize @4 :Int32;
  maxPosition @5 :Int32;
  nParams @6 :UInt64;
  weightBytes @7 :UInt64;
  hasTokenizer @8 :Bool;
  nPages @9 :Int32;                # its KV pool
  kvPageBytes @10 :UInt64;         # one page's bytes (PD layout check)
  peakBytesPerS @11 :Float64;      # its measured ceilings (0 without `roofline: true`)
  peakFlopsPerS @12 :Float64;
  pid @13 :Int64;                  # the node process (logs)
  kvLayout @14 :Text;              # what the page bytes mean (PD layout check; LoadedInstance::kv_layout)
  authRequired @15 :Bool;          # the node has a token: a hello must prove it
  challenge @16 :Data;             # (info) answer: a fresh single-use challenge for the hello
  proof @17 :Data;                 # hello answer: the node's proof over the hello's nonce
  hostId @18 :Text;                # the node's host (its boot id): pd.transfer shm needs the front's
}

struct NodeStatsRequest {}

# The instance's EngineStats: every field by its C++ name (actors/node/node_stats.cpp), so a
# field added later is ignored by an older reader instead of misread. Integers and flags in
# `counts`, times and rates in `reals`.
struct NodeStats {
  counts @0 :List(Count);
  reals @1 :List(Real);

  struct Count {
    name @0 :Text;
    value @1 :UInt64;
  }
  struct Real {
    name @0 :Text;
    value @1 :Float64;
  }
}
