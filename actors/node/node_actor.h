// The node station (DESIGN.md §3 "Topologies"; docs/architecture.md "Processes"): the one actor
// a `brigade node` process publishes. It stands in for the instance's scheduler towards a front
// (an Engine in another process whose topology names this instance `remote: HOST:PORT`), and for
// the front's router towards the scheduler, so neither the scheduler nor the router knows that
// a process boundary lies between them.
//
// Contract:
// - (info) is answered with NodeInfo and changes nothing else: a front checks what the node
//   serves before it connects, so a front that gives up leaves no trace. With a token the answer
//   carries a fresh single-use challenge (actors/node/node_auth.h; the oldest of 64 outstanding
//   ones is forgotten).
// - A front then sends (hello, NodeHello, its token sink, its hand-off sink) and gets
//   NodeInfo; one front at a time (a second gets an error while the first is connected), and
//   the hello's protocol and instance name must match the node's. With a token the hello must
//   prove it over an outstanding challenge, and the answer proves it back over the front's nonce.
// - Once a front is connected, aborts, prefix queries, hand-offs and stats requests are taken
//   only from the front's process (its CAF node); requests only from its router.
// - Requests, aborts, prefix queries and incoming hand-offs (scheduler_actor's interface) go on
//   to the scheduler; the scheduler's TokenEvents and outgoing hand-offs go on to the front.
// - The node monitors the front: when it goes (a clean shutdown or a lost connection), every
//   request of that front still in flight here is aborted, so its pages come back, and the node
//   waits for the next front.
// - The node actor monitors the scheduler: when the instance stops (an executor that dies takes
//   its scheduler along), the node actor exits with the same reason, and the front, which
//   monitors it, fails that instance's requests in flight.
// - NodeStatsRequest is answered with the instance's EngineStats (NodeStats).
// - CacheReset (from the front's process) resets the instance's prefix cache, then clears its
//   HiCache tiers (the host tier; the disk tier when asked): one CacheResetDone for both.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <memory>

#include "actors/atoms.h"
#include "actors/engine/instance.h"
#include "actors/hicache/hicache_actor.h"
#include "actors/scheduler/scheduler_actor.h"
#include "messages/types.h"

namespace brigade {

// Fronts and nodes of different protocols refuse each other at the hello. 2: NodeInfo.kvLayout
// (page layouts under tensor parallelism). 3: authentication fields (actors/node/node_auth.h).
// 4: CacheReset. 5: shared-memory BlobRefs (pd.transfer shm) and NodeInfo.hostId.
inline constexpr uint32_t kNodeProtocol = 5;

using node_actor = scheduler_actor::extend<
    caf::reacts_to<token_event_msg>,
    caf::replies_to<info_atom>::with<node_info_msg>,
    caf::replies_to<hello_atom, node_hello_msg, token_sink_actor, handoff_sink_actor>::with<node_info_msg>,
    caf::replies_to<node_stats_request_msg>::with<node_stats_msg>,
    caf::replies_to<cache_reset_msg>::with<cache_reset_done_msg>,
    caf::reacts_to<wire_atom, scheduler_actor, hicache_actor>>;

struct NodeSetup {
  node_info_msg info;                            // what the hello is answered with
  std::shared_ptr<SchedulerCounters> counters;   // the instance's (counter_stats)
  RooflineCeilings ceilings;
  int n_pages = 0;
  std::shared_ptr<std::atomic<bool>> stopped;    // set when the node actor exits; may be null
  std::string token;  // the topology's node token: a front's hello must prove it; empty: none
};

// Whether a node whose NodeInfo is `info` serves `instance` with `role` and speaks this build's
// protocol: the one check a front makes before it connects, a node makes at the hello and the
// node watch makes on a node that comes back. The error says what differs.
Status node_serves(schema::NodeInfo::Reader info, const std::string& instance, const std::string& role);

// Names the actor handles in node_actor's interface for CAF (the hello carries the front's sinks;
// remote_actor checks the interface by these names). Call it with register_message_types on the
// config of every actor system that runs or connects to a node.
void register_node_types(caf::actor_system_config& cfg);

// The instance is spawned with the node actor as its sink and hand-off sink; then send the node
// (wire, scheduler, tiers or null) once, before publishing it. Only the first wire message, and
// only one from this process, is taken.
node_actor spawn_node_actor(caf::actor_system& system, NodeSetup setup);

}  // namespace brigade
