// Pooler: the executor's side of pooling requests (models/pooling.h; docs/architecture.md
// "Embeddings"). A pooling sequence's prompt runs in chunks like any prefill, but no token is
// sampled: the model writes the final-norm hidden state of the rows the pooler asks for
// (StepBatch::hidden_rows) and the pooler folds them into the sequence's embedding:
//
//   last: the chunk that ends the prompt asks for its last row;
//   cls:  the chunk at position 0 asks for its first row, kept until the prompt ends;
//   mean: every chunk asks for all its rows, summed in f64 in position order. A chunked prompt
//         therefore sums the same rows in the same order as one chunk: the result differs from
//         one chunk only as far as the hidden states themselves do.
// The chunk that ends the prompt returns the raw pooled vector (mean: sum / prompt_len); the
// engine normalizes it (finish_embedding). mean and cls need the prompt from position 0, so the
// scheduler never starts such a sequence after a cached prefix; a chunk that does not continue
// what was pooled so far is refused.
//
// Owned by the step runner's thread; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/step_types.h"
#include "core/status.h"

namespace brigade {

class Pooler {
 public:
  // Plans a step's pooling: for each pooling item of `items` (its token j is batch row
  // q_start[i] + j), appends the rows whose hidden state it needs to hidden_rows. invalid_argument,
  // with nothing planned, for an item that samples, reuses a sampled token, reaches past its
  // prompt, or (mean, cls) does not continue the positions pooled so far.
  Status plan(std::span<const SeqWorkItem> items, std::span<const int32_t> q_start, std::vector<int32_t>& hidden_rows);
  bool planned() const { return !items_.empty(); }
  // Folds the planned hidden rows into their sequences (row(r) is hidden row r, f32 [hidden]) and
  // returns the pooled embedding of each sequence whose prompt ended in the step. Clears the plan.
  std::vector<PooledEmbedding> collect(const std::function<std::span<const float>(int)>& row);
  // Forgets sequences that ended (or were preempted: they restart from position 0).
  void release(std::span<const uint64_t> seq_ids);
  size_t n_tracked() const { return states_.size(); }

 private:
  struct Item {
    uint64_t seq_id = 0;
    Pooling mode = Pooling::none;
    int first_row = 0;  // its first row among the step's hidden rows
    int n_rows = 0;
    int start_pos = 0;
    bool ends = false;  // the chunk ends the prompt
    int prompt_len = 0;
  };
  // mean: the f64 sum of hidden rows [0, n); cls: row 0 (n = 1).
  struct State {
    std::vector<double> sum;
    int n = 0;
  };
  Status plan_item(const SeqWorkItem& w, int first_batch_row, std::vector<int32_t>& hidden_rows);

  std::vector<Item> items_;
  std::unordered_map<uint64_t, State> states_;
};

}  // namespace brigade
