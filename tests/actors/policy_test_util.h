// Shared by the SchedulerPolicy tests: a PageSource over a PagePool, as the scheduler's lease
// would be.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "actors/scheduler/policy.h"
#include "kvstore/page_pool.h"

namespace brigade::testing {

// `obtainable`: the pages the KV page manager would still grant (n_obtainable), 0 by default:
// a sequence short of pages then preempts instead of waiting.
class PoolSource final : public PageSource {
 public:
  explicit PoolSource(int n, int obtainable = 0) : pool(n), obtainable_(obtainable) {}
  int n_available() const override { return pool.n_free(); }
  std::optional<std::vector<int32_t>> take(int n) override {
    auto r = pool.allocate(n);
    if (!r) return std::nullopt;
    return *r;
  }
  void give_back(std::span<const int32_t> pages) override { pool.unref(pages); }
  int n_obtainable() const override { return obtainable_; }

  PagePool pool;

 private:
  int obtainable_;
};

}  // namespace brigade::testing
