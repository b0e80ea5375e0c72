#include "actors/executor/thinking_budget.h"

namespace brigade {

ThinkingBudgets::State ThinkingBudgets::initial(const SamplingConfig& cfg) {
  if (cfg.reasoning_end < 0 || cfg.thinking_end.empty()) return {.phase = Phase::done};
  return {.phase = cfg.reasoning_start >= 0 ? Phase::may_open : Phase::reasoning};
}

void ThinkingBudgets::feed(uint64_t seq_id, const SamplingConfig& cfg, int32_t token) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) it = seqs_.emplace(seq_id, initial(cfg)).first;
  State& s = it->second;
  switch (s.phase) {
    case Phase::may_open:
      s.phase = token == cfg.reasoning_start ? Phase::reasoning : Phase::done;
      return;
    case Phase::reasoning:
      if (s.count < cfg.thinking_budget) {
        if (token == cfg.reasoning_end) {
          s.phase = Phase::done;
        } else {
          ++s.count;
        }
        return;
      }
      s.phase = Phase::forcing;  // the budget was spent: this token was thinking_end's first
      [[fallthrough]];
    case Phase::forcing:
      // Each token fed here was the one forced (sample_row allows nothing else).
      if (s.next < cfg.thinking_end.size() && token == cfg.thinking_end[s.next]) ++s.next;
      if (s.next >= cfg.thinking_end.size()) s.phase = Phase::done;
      return;
    case Phase::done:
      return;
  }
}

std::optional<int32_t> ThinkingBudgets::forced(uint64_t seq_id, const SamplingConfig& cfg) const {
  if (!cfg.budgeted()) return std::nullopt;
  const auto it = seqs_.find(seq_id);
  const State s = it != seqs_.end() ? it->second : initial(cfg);
  if (s.phase == Phase::reasoning && s.count >= cfg.thinking_budget) return cfg.thinking_end.front();
  if (s.phase == Phase::forcing && s.next < cfg.thinking_end.size()) return cfg.thinking_end[s.next];
  return std::nullopt;
}

}  // namespace brigade
