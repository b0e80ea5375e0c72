// CAF atoms for brigade's control messages (wiring), which carry actor handles rather than data.
#pragma once

#include <caf/all.hpp>

namespace brigade {

using wire_atom = caf::atom_constant<caf::atom("wire")>;
// A front introduces itself to a `brigade node` (actors/node/node_actor.h).
using connect_atom = caf::atom_constant<caf::atom("connect")>;
// Asks a `brigade node` what it serves (NodeInfo) without connecting.
using info_atom = caf::atom_constant<caf::atom("info")>;

}  // namespace brigade

