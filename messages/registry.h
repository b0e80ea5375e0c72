// Registration of brigade's message types with CAF.
#pragma once

#include <caf/actor_system_config.hpp>

namespace brigade {

// Registers every envelope in messages/types.h under a stable name ("brigade.GenerateRequest",
// "brigade.StepPlan", ...) and the "brigade" error category renderer. Call it on every
// actor_system_config before constructing the actor_system: CAF needs the names to serialise
// messages to other nodes and to check typed-actor interfaces in remote_actor(). The names are
// part of the wire protocol: renaming one breaks interoperation with nodes that use the old name.
void register_message_types(caf::actor_system_config& cfg);

}  // namespace brigade
