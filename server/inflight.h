// The engine requests a server has in flight, so that stop() can cancel them and wait for their
// last events before the I/O context they post into goes away.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "brigade/engine.h"

namespace brigade::server {

class Inflight {
 public:
  // Reserves a slot before Engine::submit; false once stopping (the caller answers 503).
  bool begin(uint64_t& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    key = next_key_++;
    ids_[key] = 0;
    return true;
  }
  // Names the engine id of a slot (after submit returned); no-op when it already ended.
  void set_id(uint64_t key, uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ids_.find(key);
    if (it != ids_.end()) it->second = id;
  }
  // The slot's last event was handled (or submit failed).
  void end(uint64_t key) {
    std::lock_guard<std::mutex> lock(mu_);
    ids_.erase(key);
    if (ids_.empty()) cv_.notify_all();
  }
  // Refuses new slots, cancels every named request, waits up to `timeout` for all slots to end.
  void stop_and_drain(Engine& engine, std::chrono::milliseconds timeout) {
    std::vector<uint64_t> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (const auto& [key, id] : ids_) {
        if (id != 0) ids.push_back(id);
      }
    }
    for (uint64_t id : ids) engine.cancel(id);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return ids_.empty(); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, uint64_t> ids_;  // slot key → engine id (0 until known)
  uint64_t next_key_ = 1;
  bool stopping_ = false;
};

}  // namespace brigade::server
