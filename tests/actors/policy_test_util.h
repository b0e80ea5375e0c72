// Shared by the SchedulerPolicy tests: a PageSource over a PagePool, as the scheduler's lease
// would be.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
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

// Limits of the chunked-prefill policy tests: 4 running, 8 waiting, chunks of 4 tokens (a
// 10-token prompt runs as [0,4) [4,8) [8,10)), pages of 4, a vocabulary of 100.
inline SchedulerLimits chunked_limits(int max_context, bool cache) {
  SchedulerLimits l;
  l.max_running = 4;
  l.max_waiting = 8;
  l.max_step_tokens = 4;
  l.max_context = max_context;
  l.page_size = 4;
  l.vocab_size = 100;
  l.prefix_cache = cache;
  return l;
}

// A request of `prompt` for max_tokens tokens that ends at token 2 (eos).
inline SeqRequest prompt_req(uint64_t id, std::vector<int32_t> prompt, int max_tokens) {
  SeqRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.eos_ids = {2};
  return r;
}

// What an executor would return for a step: each sampling item's token, 500 + its start position
// (distinct per position, never an eos).
inline std::vector<SampledResult> sample_by_position(const PlannedStep& s) {
  std::vector<SampledResult> r;
  for (const auto& w : s.seqs)
    if (w.sample) r.push_back({w.seq_id, static_cast<int32_t>(500 + w.start_pos), 0.0f, {}});
  return r;
}

// The ids from, from + 1, ..., from + n - 1.
inline std::vector<int32_t> range(int from, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

}  // namespace brigade::testing
