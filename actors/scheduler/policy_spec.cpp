// SchedulerPolicy's speculative decoding (DESIGN.md §7): the load rule, drafting within a step's
// limits, the per-sequence acceptance measure, and applying a verified run.
#include <algorithm>
#include <string>

#include "actors/drafter/ngram_drafter.h"
#include "actors/scheduler/policy.h"

namespace brigade {

Status SpeculativeLimits::validate() const {
  if (num_tokens < 0 || num_tokens > 16)
    return invalid_argument("speculative num_tokens must be in [0, 16] (0 = off; got " + std::to_string(num_tokens) + ")");
  if (num_tokens == 0) return Status::ok();
  const NgramDrafterOptions drafter{ngram_min, ngram_max};
  if (Status st = drafter.validate(); !st.is_ok()) return invalid_argument("speculative " + st.message());
  if (!(min_acceptance >= 0.0 && min_acceptance <= 1.0))
    return invalid_argument("speculative min_acceptance must be in [0, 1] (got " + std::to_string(min_acceptance) + ")");
  if (disable_batch_size < 0)
    return invalid_argument("speculative disable_batch_size must be >= 0 (0 = no limit)");
  return Status::ok();
}

SpecStats SchedulerPolicy::spec_stats() const {
  SpecStats out = spec_stats_;
  if (drafter_) out.drafter = drafter_->stats();
  return out;
}

// Drafts pay off while a step is bound by reading the weights: verifying k more positions then
// costs little. Once the last step came back compute-bound, or the batch is large, they would
// only add work.
bool SchedulerPolicy::drafting_this_step() {
  const DraftRule r = step_rule_;
  if (r == DraftRule::compute_bound) ++spec_stats_.off_compute_bound_steps;
  if (r == DraftRule::batch) ++spec_stats_.off_batch_steps;
  return r == DraftRule::on;
}

SchedulerPolicy::DraftRule SchedulerPolicy::draft_rule() const {
  if (!drafter_) return DraftRule::no_drafter;
  if (last_step_compute_bound_) return DraftRule::compute_bound;
  const int limit = limits_.spec.disable_batch_size;
  if (limit > 0) {
    const auto n = std::count_if(running_.begin(), running_.end(), [&](const auto& kv) { return wants_decode(kv.second); });
    if (n > limit) return DraftRule::batch;
  }
  return DraftRule::on;
}

// One drafter call for the step's decodes (a draft model runs them as one batch). Each k stays
// within max_tokens, the context and the budget the step would leave the sequence if every
// earlier one used all of its drafts, so the plan that follows never runs short of budget.
std::map<uint64_t, std::vector<int32_t>> SchedulerPolicy::propose_drafts(const std::vector<uint64_t>& ids, int budget) {
  std::vector<DraftQuery> queries;
  std::vector<Seq*> seqs;
  for (uint64_t id : ids) {
    Seq& s = running_.at(id);
    const int known = static_cast<int>(s.tokens.size());
    // k + 1 tokens may arrive: stay within the budget, max_tokens and the context.
    const int k = !spec_active(s) ? 0
                                   : std::min({limits_.spec.num_tokens, budget - 1, s.req.max_tokens - s.n_generated - 1,
                                               s.max_context - known - 1});
    budget -= 1 + std::max(k, 0);
    if (k <= 0) continue;
    queries.push_back({s.req.id, s.tokens, k});
    seqs.push_back(&s);
  }
  std::map<uint64_t, std::vector<int32_t>> out;
  if (queries.empty()) return out;
  std::vector<DraftProposal> proposals = drafter_->propose_batch(queries);
  BRIGADE_CHECK(proposals.size() == queries.size(), "a drafter answers every query");
  for (size_t i = 0; i < queries.size(); ++i) {
    std::vector<int32_t>& p = proposals[i].tokens;
    // A drafter elsewhere is not trusted: at most k tokens, all inside the vocabulary.
    if (p.size() > static_cast<size_t>(queries[i].max_tokens)) p.resize(static_cast<size_t>(queries[i].max_tokens));
    p.erase(std::find_if(p.begin(), p.end(), [&](int32_t t) { return t < 0 || t >= limits_.vocab_size; }), p.end());
    if (p.empty()) {
      ++spec_stats_.misses;
      // An attempt that found nothing cost the sequence its overlap and gained nothing; a drafter
      // that did not try (MTP after a step without drafts) says nothing about its acceptance.
      if (proposals[i].attempted) note_acceptance(*seqs[i], 0.0);
    } else {
      out[queries[i].seq_id] = std::move(p);
    }
  }
  return out;
}

// Slots for the drafts come from pages the lease holds free: a guess never preempts a sequence
// or evicts a cached prefix (ensure_pages would), and a short lease just means no drafts.
bool SchedulerPolicy::take_draft_pages(Seq& s, int n_draft, PageSource& pages) {
  const int need = s.blocks.pages_needed(s.n_scheduled + 1 + n_draft);
  if (need == 0) return true;
  if (need > pages.n_available()) return false;
  auto got = pages.take(need);
  if (!got) return false;
  s.blocks.append(*got);
  s.tree_owned.resize(static_cast<size_t>(s.blocks.n_pages()), false);
  return true;
}

void SchedulerPolicy::note_acceptance(Seq& s, double fraction) {
  s.spec_rate = 0.8 * s.spec_rate + 0.2 * fraction;
  if (s.spec_rate >= limits_.spec.min_acceptance) return;
  s.spec_off_until = s.n_generated + kSpecCooldownTokens;  // then it tries again, afresh
  s.spec_rate = 1.0;
  ++spec_stats_.seqs_turned_off;
}

// The step fed the sequence's last token (at e.start) and e.n_draft drafts; 1..n_draft+1 tokens
// came back: the accepted drafts and the target's own token. KV at e.start holds the last token
// and the following positions hold the drafts, valid as far as they were accepted and kept.
void SchedulerPolicy::complete_drafts(Seq& s, const StepEntry& e, const std::vector<const SampledResult*>* got,
                                      std::vector<SeqEvent>& events, PageSource& pages) {
  --s.n_pending;
  s.drafting = false;
  int n_valid = 1;  // KV positions from e.start on that hold the sequence's tokens
  const int m = got ? static_cast<int>(got->size()) : 0;
  if (s.ended == Finish::none && (m < 1 || m > e.n_draft + 1)) {
    s.ended = Finish::error;
    s.error = "the executor returned " + std::to_string(m) + " tokens for a sequence that verified " +
              std::to_string(e.n_draft) + " drafts (expected 1 to " + std::to_string(e.n_draft + 1) + ")";
  } else if (s.ended == Finish::none) {  // an aborted sequence drops its tokens
    const int accepted = m - 1;
    spec_stats_.accepted_tokens += static_cast<uint64_t>(accepted);
    note_acceptance(s, static_cast<double>(accepted) / e.n_draft);
    const int appended = append_tokens(s, *got, events);
    n_valid += std::min(accepted, appended);
  }
  s.n_computed = s.n_scheduled = e.start + n_valid;
  if (s.ended == Finish::none) cache_computed(s, pages);
  // Rejected drafts' slots: pages wholly past the known tokens go back to the lease; the rest of
  // the last page is overwritten by the next step.
  std::vector<int32_t> past = s.blocks.take_past(static_cast<int>(s.tokens.size()));
  s.tree_owned.resize(static_cast<size_t>(s.blocks.n_pages()));
  pages.give_back(past);
}

}  // namespace brigade
