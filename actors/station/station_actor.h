// The shell that hosts a Station (include/brigade/station.h) in the request path, between the
// tokenizer (or the station before it) and the router / scheduler (or the station after it).
//
// Contract: takes the place of a scheduler for what is upstream (a station_actor converts to
// scheduler_actor) and of the tokenizer for what is downstream (to token_sink_actor). Every
// request it receives goes downstream exactly once (passed at once or released later), or is
// answered upstream with exactly one error event (rejected, at once or while held), or, when the
// client cancels it while held, with one abort event. Events and aborts of requests that went
// downstream pass through in order; so does a PrefixQuery (delegated). A KvHandoff never comes
// this way (it goes scheduler to router) and is passed downstream should one arrive.
// The Station's methods and timer callbacks all run on this actor, one at a time; an exception
// a station throws fails the request that caused it (or is logged, from on_event / a timer)
// and never stops the actor.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <memory>

#include "actors/atoms.h"
#include "actors/scheduler/scheduler_actor.h"
#include "brigade/station.h"
#include "brigade/topology.h"
#include "messages/types.h"

namespace brigade {

using station_actor =
    caf::typed_actor<caf::reacts_to<generate_request_msg>, caf::reacts_to<abort_msg>, caf::reacts_to<token_event_msg>,
                     caf::replies_to<prefix_query_msg>::with<prefix_query_result_msg>,
                     caf::reacts_to<kv_handoff_msg>, caf::reacts_to<wire_atom, scheduler_actor>,
                     caf::reacts_to<timer_atom, uint64_t>>;

// What the station did, for Engine::station_stats (written by the actor, read by any thread).
struct StationCounters {
  std::atomic<uint64_t> requests{0}, passed{0}, released{0}, rejected{0}, cancelled{0};
  std::atomic<int> held{0};
};

// `upstream` takes this station's outgoing events (the tokenizer or the station before it);
// `counters` (not null) are kept up to date.
// Send (wire_atom, downstream) once before any request. `config.detached` spawns the actor on a
// thread of its own.
station_actor spawn_station(caf::actor_system& system, const StationConfig& config, std::unique_ptr<Station> station,
                            token_sink_actor upstream, std::shared_ptr<StationCounters> counters);

// Makes every station of `configs`, from `types` first, then the built-in types. Errors name the
// station; an unknown type lists every known one.
Expected<std::vector<std::unique_ptr<Station>>> make_stations(const std::vector<StationConfig>& configs,
                                                              const std::map<std::string, StationFactory>& types);

}  // namespace brigade
