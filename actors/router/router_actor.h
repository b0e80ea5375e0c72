// The router station (DESIGN.md §3): in front of the schedulers of a data-parallel engine (two or
// more instances), it sends each tokenized request to one instance (RouterPolicy decides) and
// passes the instances' TokenEvents on to the tokenizer, counting from them the load it routes by.
//
// Contract: takes the place of a scheduler for the tokenizer (a router_actor handle converts to
// scheduler_actor) and of the tokenizer for each scheduler (to token_sink_actor). Every request
// goes to exactly one instance, or, when none is serving, is answered with one error event. An
// abort goes to the instance that owns the request (unknown ids are ignored). A PrefixQuery is
// answered by the instance the router would choose for those tokens now. When an instance's
// scheduler stops (its actors are linked: an executor or KV manager that dies takes it along),
// nothing more is routed there and each of its requests in flight ends with an error event; the
// other instances keep serving. An engine shutting down (exit reason user_shutdown) ends none.
//
// PD separation (RouterSetup::roles): requests go to prefill instances only; each KvHandoff a
// prefill scheduler sends here goes on to the least loaded decode instance, which owns the
// request from then on (its aborts go there). An abort that reaches a prefill instance after it
// handed the request off is ignored there; the router remembers it and drops the hand-off when it
// arrives, ending the request with finish abort. A hand-off with no decode instance serving ends
// its request with an error event.
//
// A CacheReset (the engine resets its instances' caches) empties the router's prefix trees: cache
// affinity starts over. It changes nothing else and is answered with an empty CacheResetDone.
#pragma once

#include <caf/all.hpp>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.h"
#include "actors/router/router_policy.h"
#include "actors/scheduler/scheduler_actor.h"
#include "messages/types.h"

namespace brigade {

using router_actor =
    caf::typed_actor<caf::reacts_to<generate_request_msg>, caf::reacts_to<abort_msg>, caf::reacts_to<token_event_msg>,
                     caf::replies_to<prefix_query_msg>::with<prefix_query_result_msg>,
                     caf::reacts_to<kv_handoff_msg>, caf::reacts_to<wire_atom, int32_t, scheduler_actor>,
                     caf::replies_to<cache_reset_msg>::with<cache_reset_done_msg>>;

// What the router counts per instance, for the Engine's stats (read from other threads).
struct RouterCounters {
  explicit RouterCounters(int n_instances)
      : routed(static_cast<size_t>(n_instances)), down(static_cast<size_t>(n_instances)) {}
  // Requests routed to each instance, by RouteReason (cache, load, round_robin).
  std::vector<std::array<std::atomic<uint64_t>, 3>> routed;
  std::vector<std::atomic<bool>> down;  // the instance stopped
};

struct RouterSetup {
  RouterConfig config;
  std::vector<std::string> instance_names;  // for messages; one per instance
  std::vector<PdRole> roles;                // one per instance, or empty: all both
  std::shared_ptr<RouterCounters> counters;  // may be null
};

// Instances are wired after spawning (the schedulers need the router as their sink): send
// (wire_atom, index, scheduler) once for every index in [0, instance_names.size()) before any
// request; the router monitors each scheduler. Wiring an instance that went down again (a remote
// node reconnected) brings it back up, with an empty prefix tree.
router_actor spawn_router(caf::actor_system& system, RouterSetup setup, token_sink_actor sink);

}  // namespace brigade
