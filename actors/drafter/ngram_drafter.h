// Prompt-lookup (n-gram) drafting, as vLLM's `ngram` speculative method: the continuation of a
// sequence is guessed from its own past. For n from ngram_max down to ngram_min, find the most
// recent earlier occurrence of the sequence's last n tokens in prompt + generated tokens; the up
// to k tokens that followed it are the proposal. Works where outputs copy their input (code
// edits, summaries quoting the prompt, retrieval answers) or repeat themselves (small models'
// greedy loops).
//
// Stateless between calls: each query scans the tokens backwards, O(len x ngram_max) at worst,
// which at the contexts served here costs microseconds next to a forward.
#pragma once

#include "actors/drafter/drafter.h"
#include "core/status.h"

namespace brigade {

struct NgramDrafterOptions {
  int ngram_min = 1;  // shortest suffix that may match (>= 1)
  int ngram_max = 3;  // longest suffix tried first (>= ngram_min)
  Status validate() const;
};

class NgramDrafter final : public Drafter {
 public:
  // options must validate (checked).
  explicit NgramDrafter(NgramDrafterOptions options);
  DraftProposal propose(const DraftQuery& query) override;

 private:
  NgramDrafterOptions options_;
};

}  // namespace brigade
