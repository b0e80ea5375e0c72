#include "actors/executor/prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace brigade {

Expected<std::optional<PromptLogprobItem>> plan_prompt_logprobs(const SeqWorkItem& w, int first_batch_row,
                                                                std::vector<int32_t>& logit_rows) {
  if (w.prompt_logprobs < 0) return std::optional<PromptLogprobItem>();
  const int n = static_cast<int>(w.tokens.size());
  const int first = std::max(w.prompt_lp_from, w.start_pos + 1);
  const int last = std::min(w.start_pos + n, w.prompt_len - 1);
  if (first > last) return std::optional<PromptLogprobItem>();
  const std::string seq = "sequence " + std::to_string(w.seq_id);
  if (w.use_last_sampled || w.n_draft > 0)
    return invalid_argument(seq + " asks for prompt logprobs in a decode step");
  if (last == w.start_pos + n && w.next_token < 0)
    return invalid_argument(seq + " asks for the logprob of prompt position " + std::to_string(last) +
                            " without its token (next_token)");
  PromptLogprobItem item;
  item.seq_id = w.seq_id;
  item.k = w.prompt_logprobs;
  item.first_pos = first;
  item.first_row = static_cast<int>(logit_rows.size());
  for (int q = first; q <= last; ++q) {
    logit_rows.push_back(first_batch_row + (q - 1 - w.start_pos));  // position q - 1 scores q
    item.targets.push_back(q - w.start_pos < n ? w.tokens[static_cast<size_t>(q - w.start_pos)] : w.next_token);
  }
  return std::optional<PromptLogprobItem>(std::move(item));
}

TokenLogprobEntry score_prompt_row(std::span<const float> row, int32_t target, int k) {
  TokenLogprobEntry e;
  e.token = target;
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : row) mx = std::max(mx, v);
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v - mx));
  const double log_z = std::log(sum);
  const auto logprob = [&](float v) { return static_cast<float>(static_cast<double>(v - mx) - log_z); };
  const bool valid = target >= 0 && static_cast<size_t>(target) < row.size();
  const float tv = valid ? row[static_cast<size_t>(target)] : -std::numeric_limits<float>::infinity();
  e.logprob = logprob(tv);
  int32_t above = 0;
  for (float v : row) above += v > tv ? 1 : 0;
  e.rank = above + 1;
  // Top k by a bounded min-heap: better = larger logit, then smaller id.
  const size_t n_top = std::min(static_cast<size_t>(std::max(k, 0)), row.size());
  if (n_top == 0) return e;
  const auto better = [&](int32_t a, int32_t b) {
    const float la = row[static_cast<size_t>(a)], lb = row[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> heap;  // the worst kept on top
  heap.reserve(n_top + 1);
  for (int32_t t = 0; t < static_cast<int32_t>(row.size()); ++t) {
    if (heap.size() < n_top) {
      heap.push_back(t);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(t, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = t;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  e.top.reserve(n_top);
  for (int32_t t : heap) e.top.emplace_back(t, logprob(row[static_cast<size_t>(t)]));
  return e;
}

}  // namespace brigade
