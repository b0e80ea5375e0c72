// The executor station (DESIGN.md §3): one per device or TP rank. Owns the model weights, the
// device KV memory and a StepRunner. Runs detached, since a forward pass blocks its thread.
//
// Contract: every StepPlan gets exactly one StepResult with the same stepId. A step that fails
// (bad ids, pages outside the pool) returns StepResult.error and changes no KV state.
//
// HiCache (hicache.capnp), when the executor was given a tier actor:
//   KvSave: reads the pages' bytes at once, before any later message (CAF keeps per-sender
//           order, so a StepPlan sent after the KvSave cannot overwrite them first), and sends
//           them to the tier actor. Without a tier actor, or with a bad page id, nothing is
//           saved (logged).
//   KvLoad -> KvLoaded: asks the tier actor for the keys and keeps running steps meanwhile;
//           when the pages arrive it writes them into the given device pages and replies with
//           how many leading keys were loaded (the rest the scheduler recomputes). The pages
//           must not be used by a step before the KvLoaded. A malformed request, no tier actor
//           or a failed tier answers nLoaded = 0 with the reason in `error`.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "actors/hicache/hicache_actor.h"
#include "core/backend.h"
#include "messages/types.h"
#include "models/model.h"
#include "kvstore/kv_layout.h"

namespace brigade {

using executor_actor = caf::typed_actor<caf::replies_to<step_plan_msg>::with<step_result_msg>,
                                        caf::reacts_to<kv_save_msg>,
                                        caf::replies_to<kv_load_msg>::with<kv_loaded_msg>>;

// What an executor owns; moved into the actor at spawn.
struct ExecutorResources {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  KvCache kv;
};

// `tiers` may be null: no HiCache tiers below this executor's KV pool.
executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources,
                              hicache_actor tiers = {});

}  // namespace brigade
