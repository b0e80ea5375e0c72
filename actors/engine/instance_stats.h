// One instance's EngineStats: read from its scheduler's in-process counters, summed over
// instances, and carried between processes as a NodeStats message (messages/node.capnp) for
// instances that run in a `brigade node`.
#pragma once

#include "actors/engine/instance.h"
#include "brigade/engine.h"
#include "messages/types.h"

namespace brigade {

// The instance's counters and gauges, its ceilings and pool size; tier stats are not included
// (they are the tier actor's answer: add_tier_stats).
EngineStats counter_stats(const SpawnedInstance& inst);
// Copies a tier actor's TierStats answer into `s` (and sets s.tiers).
void add_tier_stats(schema::TierStats::Reader r, EngineStats& s);
// Adds one instance's stats into a sum: every count, gauge, time and ceiling (the instances'
// together); flags are or-ed.
void accumulate(EngineStats& to, const EngineStats& from);

// Every EngineStats field by name (the NodeStats wire form) and back. A name the reader does
// not know is skipped, so nodes and fronts of different builds still agree on the fields they
// share.
node_stats_msg encode_node_stats(const EngineStats& s);
EngineStats decode_node_stats(schema::NodeStats::Reader r);

// A scheduler's CacheResetDone with the instance's tiers' TierCleared folded in (a cache reset
// of a whole instance: the engine's for local ones, a node's for its own).
cache_reset_done_msg with_tiers_cleared(const cache_reset_done_msg& done, schema::TierCleared::Reader tiers);

}  // namespace brigade
