#include "actors/executor/executor_actor.h"

#include <chrono>

#include "actors/executor/step_runner.h"
#include "actors/step_codec.h"

namespace brigade {

namespace {

struct ExecutorState {
  std::shared_ptr<ExecutorResources> resources;
  std::unique_ptr<StepRunner> runner;
  static inline const char* name = "brigade.executor";
};

executor_actor::behavior_type executor_fun(executor_actor::stateful_pointer<ExecutorState> self,
                                           std::shared_ptr<ExecutorResources> resources) {
  self->state.resources = resources;
  self->state.runner = std::make_unique<StepRunner>(*resources->backend, *resources->model,
                                                    std::move(resources->kv));
  return {
      [self](const step_plan_msg& plan) -> step_result_msg {
        const auto t0 = std::chrono::steady_clock::now();
        PlannedStep step = decode_step_plan(plan.reader());
        auto sampled = self->state.runner->run(step);
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - t0).count();
        if (!sampled) return encode_step_error(step.step_id, sampled.status().to_string());
        return encode_step_result(step.step_id, *sampled, step.n_tokens, static_cast<uint64_t>(us));
      },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources) {
  return system.spawn<caf::detached>(executor_fun, std::move(resources));
}

}  // namespace brigade
