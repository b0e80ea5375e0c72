// MTP drafting (DESIGN.md §7; vLLM's `speculative_config: {method: "deepseek_mtp"}`, SGLang's
// NEXTN): the executor whose model runs its MTP module drafts with each step
// (actors/executor/step_runner.h, SeqWorkItem::mtp_drafts) and returns the proposals with the
// step's tokens (StepResult.drafts). This drafter is the scheduler's side: it keeps the latest
// proposal of each sequence with the token count it follows, and answers a query with it when
// the sequence still has exactly those tokens (a step in flight, a stop or a preemption since
// then make it stale: no drafts that step, and no judgement of the module's acceptance).
//
// Owned and called by one thread (the scheduler's); not thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "actors/drafter/drafter.h"

namespace brigade {

class MtpDrafter final : public Drafter {
 public:
  DraftProposal propose(const DraftQuery& query) override;
  void take_proposal(uint64_t seq_id, int n_tokens, std::vector<int32_t> tokens) override;
  void forget(uint64_t seq_id) override { board_.erase(seq_id); }

  size_t n_tracked() const { return board_.size(); }

 private:
  struct Entry {
    int n_tokens = 0;  // the sequence's length the proposal follows
    std::vector<int32_t> tokens;
  };
  std::unordered_map<uint64_t, Entry> board_;
};

}  // namespace brigade
