// Prompt logprobs (vLLM's SamplingParams.prompt_logprobs; what lm-evaluation-harness scores with
// `echo` + `logprobs`): the logprob of each prompt token given the tokens before it, from the
// raw logits of the position before it (no temperature, penalties, logit_bias or masks: the
// model's own distribution, as vLLM reports it), with its rank and the top k.
//
// A work item asks for them with SeqWorkItem::prompt_logprobs = k >= 0 (step_types.h). Its chunk
// covers positions [start, start + n); the logits at position p score the prompt token at p + 1,
// so the chunk scores positions [max(prompt_lp_from, start + 1), min(start + n, prompt_len - 1)],
// the last of them being next_token when the chunk ends inside the prompt. Chunks of one prompt
// therefore score every position 1..prompt_len-1 exactly once between them; the scheduler
// (prompt_lp_from) keeps a recomputed chunk from scoring a position twice.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "actors/step_types.h"
#include "core/status.h"

namespace brigade {

// What one work item's prompt logprobs need from the step: logits rows and what each scores.
struct PromptLogprobItem {
  uint64_t seq_id = 0;
  int k = 0;                     // top alternatives per position
  int first_pos = 0;             // the prompt position scored by the first row
  int first_row = 0;             // index of its first row among the step's logits rows
  std::vector<int32_t> targets;  // the prompt token each row scores, in position order
};

// The positions work item w scores, as rows of the batch (its token j is batch row
// first_batch_row + j) appended to logit_rows. Returns nothing when w asks for none or its chunk
// scores no position; invalid_argument when it asks for a position whose token it lacks.
Expected<std::optional<PromptLogprobItem>> plan_prompt_logprobs(const SeqWorkItem& w, int first_batch_row,
                                                                std::vector<int32_t>& logit_rows);

// Scores one logits row [vocab] for `target`: log-softmax at target (f32 logits, the sum in
// f64), its rank (1 + the tokens with a larger logit) and the top k (logprob descending, then
// token id ascending).
TokenLogprobEntry score_prompt_row(std::span<const float> row, int32_t target, int k);

// The run of item from its rows; row(i) is the item's i-th logits row.
template <typename RowFn>
PromptLogprobRun score_prompt_item(const PromptLogprobItem& item, RowFn&& row) {
  PromptLogprobRun run{item.seq_id, item.first_pos, {}};
  run.entries.reserve(item.targets.size());
  for (size_t i = 0; i < item.targets.size(); ++i)
    run.entries.push_back(score_prompt_row(row(static_cast<int>(i)), item.targets[i], item.k));
  return run;
}

}  // namespace brigade
