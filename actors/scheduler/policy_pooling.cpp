// SchedulerPolicy's pooling requests (policy.h, "Pooling"; docs/architecture.md "Embeddings"):
// which chunk brings the embedding back, and taking it.
#include <algorithm>
#include <string>

#include "actors/scheduler/policy.h"

namespace brigade {

bool SchedulerPolicy::computes_whole_prompt(const Seq& s) const {
  return s.req.pooling == Pooling::mean || s.req.pooling == Pooling::cls || limits_.prompt_whole;
}

void SchedulerPolicy::plan_pooling(const Seq& s, SeqWorkItem& w, StepEntry& e) const {
  if (s.req.pooling == Pooling::none) return;
  w.pooling = s.req.pooling;
  e.pools = w.start_pos + static_cast<int>(w.tokens.size()) == static_cast<int>(s.req.prompt.size());
}

bool SchedulerPolicy::take_embedding(Seq& s, const StepEntry& e, std::span<const PooledEmbedding> embeddings) {
  const auto got = std::find_if(embeddings.begin(), embeddings.end(),
                                [&](const PooledEmbedding& p) { return p.seq_id == e.seq_id; });
  if (!e.pools && got == embeddings.end()) return true;
  if (!e.pools || got == embeddings.end() || got->values.empty()) {
    s.error = e.pools ? "the executor returned no embedding for a pooling sequence whose prompt ended"
                      : "the executor returned an embedding the step did not ask for";
    return false;
  }
  s.embedding = got->values;
  return true;
}

}  // namespace brigade
