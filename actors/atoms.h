// CAF atoms for brigade's control messages (wiring), which carry actor handles rather than data.
#pragma once

#include <caf/all.hpp>

namespace brigade {

using wire_atom = caf::atom_constant<caf::atom("wire")>;
// A front introduces itself to a `brigade node` (actors/node/node_actor.h).
using hello_atom = caf::atom_constant<caf::atom("hello")>;
// Asks a `brigade node` what it serves (NodeInfo) without connecting.
using info_atom = caf::atom_constant<caf::atom("info")>;
// The front's node watch tries to reach a lost node again (actors/node/node_watch.h).
using retry_atom = caf::atom_constant<caf::atom("retry")>;
// A station's timer fires (actors/station/station_actor.h).
using timer_atom = caf::atom_constant<caf::atom("timer")>;

}  // namespace brigade

