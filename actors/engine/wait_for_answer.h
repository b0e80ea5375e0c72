// The blocking forms of the engine's one-answer calls (Engine::embed, Engine::beam_search): submit
// with a callback, then wait on the calling thread for its one answer.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "core/status.h"

namespace brigade {

// `submit(callback)` starts the call and returns its Expected id; `callback` (an
// std::function<void(Expected<T>)>) is then called exactly once, on any thread. Returns the
// submission's error, else the answer. Blocks the calling thread (never an engine callback's).
template <class T, class Submit>
Expected<T> wait_for_answer(Submit&& submit) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Expected<T>> answer;
  };
  auto sh = std::make_shared<Shared>();
  auto id = submit([sh](Expected<T> r) {
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->answer.emplace(std::move(r));
    sh->cv.notify_all();
  });
  if (!id) return id.status();
  std::unique_lock<std::mutex> lock(sh->mu);
  sh->cv.wait(lock, [&] { return sh->answer.has_value(); });
  return std::move(*sh->answer);
}

}  // namespace brigade
