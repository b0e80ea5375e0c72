// The executor station (DESIGN.md §3): one per device or TP rank. Owns the model weights, the
// device KV memory and a StepRunner. Runs detached, since a forward pass blocks its thread.
//
// Contract: every StepPlan gets exactly one StepResult with the same stepId. A step that fails
// (bad ids, pages outside the pool) returns StepResult.error and changes no KV state.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "core/backend.h"
#include "messages/types.h"
#include "models/model.h"
#include "kvstore/kv_layout.h"

namespace brigade {

using executor_actor = caf::typed_actor<caf::replies_to<step_plan_msg>::with<step_result_msg>>;

// What an executor owns; moved into the actor at spawn.
struct ExecutorResources {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  KvCache kv;
};

executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources);

}  // namespace brigade
