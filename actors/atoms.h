// CAF atoms for brigade's control messages (wiring), which carry actor handles rather than data.
#pragma once

#include <caf/all.hpp>

namespace brigade {

using wire_atom = caf::atom_constant<caf::atom("wire")>;

}  // namespace brigade
