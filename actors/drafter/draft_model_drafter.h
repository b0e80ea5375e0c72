// Draft-model drafting (DESIGN.md §7; vLLM's `speculative_config: {model: ...}`): a small model of
// the target's vocabulary proposes the k tokens it would itself produce greedily after the
// sequence, and the target verifies them in one forward.
//
// The drafter owns the draft model, its backend and its own paged KV pool. Per sequence it keeps
// the tokens whose K/V its cache holds (positions 0..n-1). A query's tokens are compared with
// them: the longest common prefix stays, the rest is rolled back, so the draft's KV follows
// whatever the target accepted (rejected drafts, a bonus token) and whatever the sequence became
// (a recompute after preemption keeps the same tokens, so nothing is lost; a sequence the drafter
// has never seen, e.g. a prefix-cache hit or a PD hand-off on the target's side, is prefilled
// here from its first token). Then the missing tokens are fed, and k - 1 more greedy steps give
// the proposal: argmax of each row, ties to the lowest id (core/sampling.h argmax).
// propose_batch() runs the sequences of a step together: each forward carries every sequence
// that still feeds or drafts (at most max_step_tokens tokens; a long prefill goes in chunks), so
// k drafts for B sequences cost about k batched forwards, not k x B single ones. Proposals are greedy whatever the request samples with;
// the target's verifier treats a draft as a point mass, which keeps the target distribution for
// any drafter (docs/architecture.md "Speculative decoding").
//
// Memory is bounded: the pool has n_pages pages of page_size tokens over all sequences. A query
// that needs pages the pool lacks takes them from the least recently used other sequences (which
// re-prefill if they draft again); one that needs more than the whole pool, or positions past
// the draft's context, gets a shorter or empty proposal. forget() frees a sequence's pages.
//
// Owned and called by one thread (the scheduler's); not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/drafter/drafter.h"
#include "core/backend.h"
#include "core/status.h"
#include "kvstore/kv_layout.h"
#include "models/model.h"

namespace brigade {

struct DraftModelOptions {
  int page_size = 16;          // tokens per page of the draft's KV pool
  int n_pages = 0;             // pages in the pool (>= 1)
  int max_step_tokens = 2048;  // longest forward (the draft model's LoadOptions::max_batch_tokens)
  DType kv_dtype = DType::f32;
  Status validate() const;
};

class DraftModelDrafter final : public Drafter {
 public:
  // Takes the loaded draft model and the backend it lives on, and allocates the KV pool.
  // invalid_argument for bad options; the backend's error when the pool does not fit.
  static Expected<std::unique_ptr<DraftModelDrafter>> create(std::unique_ptr<Backend> backend,
                                                             std::unique_ptr<Model> model, DraftModelOptions options);

  DraftProposal propose(const DraftQuery& query) override;
  std::vector<DraftProposal> propose_batch(std::span<const DraftQuery> queries) override;
  void forget(uint64_t seq_id) override;
  DrafterStats stats() const override;

  // For tests: sequences with K/V in the pool, the tokens cached for one (0 when none), free pages.
  size_t n_tracked() const { return seqs_.size(); }
  int n_cached(uint64_t seq_id) const;
  int n_free_pages() const { return static_cast<int>(free_pages_.size()); }
  const Model& model() const { return *model_; }

 private:
  struct SeqKv {
    std::vector<int32_t> tokens;  // tokens whose K/V the pool holds, at positions 0..n-1
    std::vector<int32_t> pages;   // the pool pages of those positions, in order
    uint64_t last_use = 0;
    bool busy = false;            // in the batch being drafted: not evicted for another
  };
  // One sequence of a propose_batch: what it still has to feed and the drafts so far.
  struct Work {
    uint64_t seq_id = 0;
    SeqKv* seq = nullptr;
    std::span<const int32_t> todo;  // tokens to feed next; its last one's logits give a draft
    int k = 0;
    DraftProposal* out = nullptr;   // reserved for k tokens (todo may point into it)
  };

  DraftModelDrafter(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model, KvCache kv,
                    DraftModelOptions options);
  // Pages for positions [0, n_positions) of seq_id, taking pages of least recently used other
  // sequences when the pool runs short; false (nothing taken) when the pool cannot hold them.
  bool reserve(uint64_t seq_id, SeqKv& s, int n_positions);
  // Rolls s back to its first n tokens; pages wholly past them go back to the pool.
  void truncate(SeqKv& s, int n);
  void drop(uint64_t seq_id);
  // Rolls the sequence back to its common prefix with the query and reserves the pages of its
  // drafting; nullopt when it gets no drafts (k = 0, or the pool cannot hold it).
  std::optional<Work> prepare(const DraftQuery& query, DraftProposal& out);
  // One forward over the works that have tokens to feed (up to max_step_tokens of them): feeds
  // them at positions seq->tokens.size()..., appends a draft to each whose todo it finished and
  // points that one's todo at its new draft until it has k. Returns whether any work remains.
  Expected<bool> step(std::vector<Work>& works);
  void add_to_batch(const Work& w, int m);
  Status ensure_logits(int n_rows);

  std::unique_ptr<Backend> backend_;  // declared first: destroyed last
  std::unique_ptr<Model> model_;
  KvCache kv_;
  DraftModelOptions options_;
  std::unordered_map<uint64_t, SeqKv> seqs_;
  std::vector<int32_t> free_pages_;
  uint64_t clock_ = 0;  // last_use stamps
  StepBatch batch_;
  Buffer logits_buf_;  // [logits_rows_, vocab] f32 on the backend
  int logits_rows_ = 0;
  std::vector<float> host_logits_;
  DrafterStats stats_;
};

}  // namespace brigade
