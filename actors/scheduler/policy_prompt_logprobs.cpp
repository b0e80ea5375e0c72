// SchedulerPolicy's prompt logprobs (policy.h, "Prompt logprobs"; docs/architecture.md "Prompt
// logprobs"): which prompt positions each chunk scores, and the runs coming back.
#include <algorithm>
#include <string>

#include "actors/scheduler/policy.h"

namespace brigade {

bool SchedulerPolicy::needs_prompt_logprobs(const Seq& s) const {
  return s.req.prompt_logprobs >= 0 && s.prompt_lp_next < static_cast<int>(s.req.prompt.size());
}

// Position p's logits score p + 1, so a chunk must start at or before prompt_lp_next - 1; and at
// least one token is always computed (its logits are sampled).
int SchedulerPolicy::cache_match_limit(const Seq& s) const {
  const int known = static_cast<int>(s.tokens.size());
  if (computes_whole_prompt(s)) return 0;
  return needs_prompt_logprobs(s) ? std::min(known - 1, s.prompt_lp_next - 1) : known - 1;
}

void SchedulerPolicy::plan_prompt_logprobs(const Seq& s, SeqWorkItem& w, StepEntry& e) const {
  if (!needs_prompt_logprobs(s) || w.use_last_sampled || w.n_draft > 0) return;
  const int n_prompt = static_cast<int>(s.req.prompt.size());
  const int end = w.start_pos + static_cast<int>(w.tokens.size());
  const int first = std::max(s.prompt_lp_next, w.start_pos + 1), last = std::min(end, n_prompt - 1);
  if (first > last) return;
  w.prompt_logprobs = s.req.prompt_logprobs;
  w.prompt_lp_from = s.prompt_lp_next;
  w.next_token = end < n_prompt ? s.req.prompt[static_cast<size_t>(end)] : -1;
  e.prompt_lp_first = first;
  e.prompt_lp_last = last;
}

bool SchedulerPolicy::take_prompt_logprobs(Seq& s, const StepEntry& e, std::span<const PromptLogprobRun> runs) {
  if (e.prompt_lp_first > e.prompt_lp_last) return true;
  const auto run = std::find_if(runs.begin(), runs.end(), [&](const PromptLogprobRun& r) { return r.seq_id == e.seq_id; });
  const size_t want = static_cast<size_t>(e.prompt_lp_last - e.prompt_lp_first + 1);
  if (run == runs.end() || run->first_pos != e.prompt_lp_first || run->entries.size() != want ||
      e.prompt_lp_first != s.prompt_lp_next) {
    s.error = "the executor returned prompt logprobs for other positions than " + std::to_string(e.prompt_lp_first) +
              ".." + std::to_string(e.prompt_lp_last);
    return false;
  }
  s.prompt_lps.insert(s.prompt_lps.end(), run->entries.begin(), run->entries.end());
  s.prompt_lp_next = e.prompt_lp_last + 1;
  return true;
}

void SchedulerPolicy::attach_prompt_logprobs(Seq& s, SeqEvent& ev) {
  if (s.req.prompt_logprobs < 0 || s.prompt_lps_sent || needs_prompt_logprobs(s)) return;
  s.prompt_lps_sent = true;
  ev.prompt_logprobs.reserve(s.req.prompt.size());
  ev.prompt_logprobs.push_back(TokenLogprobEntry{s.req.prompt[0], 0.0f, 0, {}});
  for (auto& e : s.prompt_lps) ev.prompt_logprobs.push_back(std::move(e));
  s.prompt_lps.clear();
  s.prompt_lps.shrink_to_fit();
}

}  // namespace brigade
