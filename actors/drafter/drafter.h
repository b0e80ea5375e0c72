// The drafter station (DESIGN.md §7): proposes tokens that may follow a sequence, for the target
// executor to verify in one forward. The interface is a request/proposal pair that maps onto a
// message, so a drafter that runs elsewhere (a small draft model on its own executor, an MTP
// head) can take the place of the in-process n-gram drafter (ngram_drafter.h) that the
// scheduler calls directly (docs/architecture.md, "Speculative decoding").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace brigade {

struct DraftQuery {
  uint64_t seq_id = 0;
  std::span<const int32_t> tokens;  // prompt + generated tokens, oldest first; the last one is
                                    // the token the next step feeds
  int max_tokens = 0;               // propose at most this many
};

struct DraftProposal {
  std::vector<int32_t> tokens;  // the proposed continuation after query.tokens; may be empty
  // false: the drafter did not try for this query (an MTP module not asked for drafts last step,
  // a proposal gone stale): an empty answer then says nothing about how well it drafts.
  bool attempted = true;
};

// What a drafter that runs a model spent (EngineStats spec_draft_*); zero for the n-gram drafter.
struct DrafterStats {
  uint64_t forwards = 0;     // draft model forwards
  uint64_t forward_us = 0;   // wall time in them
  uint64_t fed_tokens = 0;   // tokens whose K/V the draft computed (prefill after a rollback or
                             // first sight, and the drafts themselves)
  uint64_t evicted_seqs = 0; // sequences whose draft K/V made room for another's
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Proposes up to query.max_tokens tokens; empty when it has nothing worth verifying. Must not
  // keep query.tokens past the call.
  virtual DraftProposal propose(const DraftQuery& query) = 0;
  // The proposals of several sequences (distinct seq_ids), in query order: what a step's decodes
  // ask together, so a draft model can run them as one batch. By default one propose() each.
  virtual std::vector<DraftProposal> propose_batch(std::span<const DraftQuery> queries) {
    std::vector<DraftProposal> out;
    for (const DraftQuery& q : queries) out.push_back(propose(q));
    return out;
  }
  // A drafter whose proposals are made elsewhere (MTP: by the executor, with each step) receives
  // them here: `tokens` would follow the sequence once it holds n_tokens tokens.
  virtual void take_proposal(uint64_t /*seq_id*/, int /*n_tokens*/, std::vector<int32_t> /*tokens*/) {}
  // The sequence ended: drop whatever the drafter keeps for it.
  virtual void forget(uint64_t /*seq_id*/) {}
  virtual DrafterStats stats() const { return {}; }
};

}  // namespace brigade
