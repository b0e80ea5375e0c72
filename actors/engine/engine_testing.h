// Test hooks into an Engine made by Engine::create; not part of the public API.
#pragma once

#include "brigade/engine.h"

namespace brigade {

// Makes instance `index`'s executor exit as a crash would (exit reason kill). Its instance's
// other actors are linked to it and stop too; with a router, the instance's requests in flight
// end with finish == error and the other instances keep serving. invalid_argument for an index
// the engine does not have.
Status kill_instance_executor_for_testing(Engine& engine, int index);

}  // namespace brigade
