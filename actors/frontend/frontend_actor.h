// The embedded frontend station (DESIGN.md §3): delivers TokenEvents to the callbacks that
// Engine::submit registered, in order, and forgets a request after its final event.
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "actors/scheduler/scheduler_actor.h"
#include "brigade/engine.h"
#include "messages/types.h"

namespace brigade {

// Callbacks of live requests, shared by the Engine (which adds) and the frontend (which calls).
class CallbackRegistry {
 public:
  void add(uint64_t id, EventCallback cb);
  // Calls the callback of ev.request_id; removes it when ev is final. Unknown ids are dropped.
  void deliver(const Event& ev);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<EventCallback>> callbacks_;
};

Event to_event(schema::TokenEvent::Reader r);

token_sink_actor spawn_frontend(caf::actor_system& system, std::shared_ptr<CallbackRegistry> registry);

}  // namespace brigade
