// ThinkingBudgets: the reasoning-budget state of an executor's sequences (vLLM's
// thinking_token_budget, SamplingConfig::thinking_budget; docs/architecture.md "Thinking budget").
// A sequence's reasoning block is delimited as for structured output after the reasoning
// (output_constraints.h): with reasoning_start >= 0 the block opens only if the first generated
// token is reasoning_start; with reasoning_start -1 the output starts inside it (the prompt opened
// it). Inside, every generated token counts until reasoning_end closes the block; once
// thinking_budget tokens are counted, the next tokens are forced to thinking_end one by one (its
// last token is reasoning_end), and the sequence is then past its block for good: a second
// `<think>` opens nothing (the reasoning parsers read one block too).
// StepRunner owns one; it feeds each generated token (note_output, so a sequence's history
// replayed after a preemption rebuilds the count) and asks for a row's forced token before it
// samples. A plain class, tested directly and through StepRunner.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "core/sampling.h"

namespace brigade {

class ThinkingBudgets {
 public:
  // Token `token` was generated for seq_id (cfg.budgeted()).
  void feed(uint64_t seq_id, const SamplingConfig& cfg, int32_t token);
  // The token seq_id must take next, if its budget is spent; nullopt otherwise.
  std::optional<int32_t> forced(uint64_t seq_id, const SamplingConfig& cfg) const;
  void release(uint64_t seq_id) { seqs_.erase(seq_id); }
  size_t size() const { return seqs_.size(); }

 private:
  enum class Phase {
    may_open,   // no token yet: reasoning_start opens the block, anything else is the answer
    reasoning,  // inside the block, `count` tokens so far
    forcing,    // the budget is spent: thinking_end[next] comes next
    done,       // past the block (closed, forced closed, or never opened)
  };
  struct State {
    Phase phase = Phase::reasoning;
    int count = 0;
    size_t next = 0;
  };
  static State initial(const SamplingConfig& cfg);
  std::unordered_map<uint64_t, State> seqs_;
};

}  // namespace brigade
