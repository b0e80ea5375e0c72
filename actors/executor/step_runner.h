// StepRunner: the executor's plain logic (DESIGN.md §3). Turns a planned step into one model
// forward over the paged KV cache, samples the sequences that asked for it, and remembers each
// sequence's last sampled token so a plan may refer to it before the scheduler has seen it.
//
// Owned by one executor thread; not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/step_types.h"
#include "core/backend.h"
#include "core/status.h"
#include "kvstore/kv_layout.h"
#include "models/model.h"

namespace brigade {

class StepRunner {
 public:
  // backend and model must outlive the runner; the runner owns the KV cache.
  StepRunner(Backend& backend, Model& model, KvCache kv);

  // Runs the step. On error nothing was written to the KV cache and no state changed (except
  // after a failed collective under tensor parallelism: the KV cache is then undefined).
  Expected<std::vector<SampledResult>> run(const PlannedStep& step);

  // Tensor parallelism (rank 0): forgets step.released and replaces each use_last_sampled token
  // by the token this runner sampled, so the plan can go to ranks that do not sample.
  // invalid_argument when a sequence has no sampled token; step is then unchanged.
  Status resolve_last_sampled(PlannedStep& step);
  // Tensor parallelism (ranks other than 0): the step's forward only, no logits, no sampling.
  // The plan must be resolved (no use_last_sampled). Errors as run().
  Status run_forward_only(const PlannedStep& step);
  // Forgets the per-sequence state of sequences that ended.
  void release(std::span<const uint64_t> seq_ids);

  const KvCache& kv() const { return kv_; }
  // For filling pages from the HiCache tiers (KvLoad), between steps.
  KvCache& kv() { return kv_; }
  Backend& backend() { return backend_; }
  size_t n_tracked() const { return last_sampled_.size(); }

 private:
  Status build_batch(const PlannedStep& step);
  Status ensure_logits(int n_rows);
  // Adds the step's input tokens to the penalty history of sequences that use penalties.
  void record_history(const PlannedStep& step);
  SampledResult sample_row(const SeqWorkItem& w, std::span<float> row);

  Backend& backend_;
  Model& model_;
  KvCache kv_;
  StepBatch batch_;
  std::vector<size_t> sample_items_;  // index into step.seqs of each logits row
  Buffer logits_buf_;
  size_t logits_rows_cap_ = 0;
  std::vector<float> host_logits_;
  std::unordered_map<uint64_t, int32_t> last_sampled_;
  std::unordered_map<uint64_t, PenaltyHistory> history_;  // sequences with penalties only
  std::vector<float> raw_row_;
};

}  // namespace brigade
