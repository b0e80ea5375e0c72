// StepRunner: the executor's plain logic (DESIGN.md §3). Turns a planned step into one model
// forward over the paged KV cache, samples the sequences that asked for it, and remembers each
// sequence's last sampled token so a plan may refer to it before the scheduler has seen it.
//
// Two paths, chosen once at construction (StepRunnerOptions::device_steps):
//   host:   the logits of every sampling row come to the host and core/sampling.h samples them;
//           use_last_sampled tokens are filled in on the host. The default on CPUs, where host
//           and "device" memory are the same and the host sampler is the faster one.
//   device: the step's tokens live on the backend. A sequence's last sampled token stays in a
//           device table (one slot per sequence) and feeds its next step through
//           Backend::gather_tokens; rows sample on the backend (Backend::argmax, or ::sample
//           for temperature/top-k/top-p with a seed) and Backend::scatter_tokens stores the
//           tokens into the table; only the n sampled int32 tokens come back. Rows that need
//           what only the host sampler does (penalties, logprobs) download their own
//           logits row and use the host sampler, then put their token into the table. Pure
//           decode steps are padded to batch-size buckets (step_buckets.h) and run between
//           Backend::begin_step/end_step, so a GPU backend replays them as CUDA Graphs.
//           Both samplers follow one rule and random stream (core/sample_params.h), so a
//           seeded row gets the same token on either path.
//           Steps in flight: start() queues a device step whose rows all sample on the device
//           together with the download of its tokens and returns at once; finish() waits for
//           the tokens. The next step can start in between (it takes the tokens it reuses from
//           the device table), so the device never waits for the host between steps. At most
//           kMaxInFlight steps are started and not finished.
// MTP (a model loaded with its MTP module, Model::n_mtp_layers; host path only): after sampling,
// every non-pooling item's positions get the module's K/V entry (the token that follows each
// position, the target's final-norm hidden state there), and an item with mtp_drafts = k > 0
// that sampled gets up to k drafts: the module's argmax at its last valid position, then one
// single-token forward per further draft on the module's own output (InFlightStep::take_drafts).
// A failed MTP pass costs the step its drafts, never its tokens.
// An EAGLE-3 head (Model::draft_head with aux layers) runs the same pass: its first forward
// reads the target's aux-layer planes (StepBatch::aux_rows / aux_hidden) instead of hidden rows,
// its drafts are argmaxes over the draft vocabulary mapped to target ids (DraftHead::to_target).
// Speculative decoding: a work item with drafts (SeqWorkItem::n_draft = k) gets logits for its
// k + 1 positions and returns the verified run (core/sampling.h verify_drafts); both paths use
// the host sampler for it (the device path downloads its rows), and drafts enter a sequence's
// penalty history only once accepted.
// Greedy tokens are the same on both paths (the CPU backend's rows are independent bit for bit
// below cpu/ops.h kBlasMinRows rows, kQuantGemmMinRows for block-quantized weights, so padding
// changes none).
//
// Owned by one executor thread; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/step_types.h"
#include "core/backend.h"
#include "actors/executor/output_constraints.h"
#include "actors/executor/thinking_budget.h"
#include "actors/executor/pooler.h"
#include "actors/executor/prompt_logprobs.h"
#include "core/token_trie.h"
#include "core/status.h"
#include "kvstore/kv_layout.h"
#include "models/model.h"

namespace brigade {

struct StepRunnerOptions {
  bool device_steps = false;  // the device path (above); false: the host path
  // Batch-size buckets of padded decode steps (ascending); empty: no padding, no graphs.
  std::vector<int> buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  // The model's LoadOptions::max_batch_tokens: buckets above it are never used.
  int max_step_tokens = 2048;
  // The tokenizer's token bytes (special tokens empty), for constrained output; null when
  // the model has no tokenizer (the engine then refuses such requests).
  std::shared_ptr<const TokenTrie> vocab;
  // Recurrent models: the last state_snapshots of the model's state slots hold the prefix
  // cache's snapshots (SeqWorkItem::state_from / state_save name them 0..n-1); the others are
  // the running sequences'.
  int state_snapshots = 0;
};

// A step that start() queued and finish() has not handed back yet.
class InFlightStep {
 public:
  bool pending() const { return pending_; }
  // The step's work by the roofline model (Model::step_cost of the batch before any padding).
  const StepCost& cost() const { return cost_; }
  // The prompt logprobs the step computed (one run per work item that asked; prompt_logprobs.h).
  // A step with such items completes inside start(), so they are here before finish().
  std::vector<PromptLogprobRun> take_prompt_logprobs() { return std::move(prompt_logprobs_); }
  // The embeddings of pooling sequences whose prompt ended in the step (pooler.h); like prompt
  // logprobs, here once start() returns.
  std::vector<PooledEmbedding> take_embeddings() { return std::move(embeddings_); }
  // The MTP drafts of items that asked (SeqWorkItem::mtp_drafts); here once start() returns.
  std::vector<SeqDrafts> take_drafts() { return std::move(drafts_); }

 private:
  friend class StepRunner;
  std::vector<SampledResult> results_;  // a complete step's results
  std::vector<PromptLogprobRun> prompt_logprobs_;
  std::vector<PooledEmbedding> embeddings_;
  std::vector<SeqDrafts> drafts_;
  bool pending_ = false;                // true: the tokens are still on their way
  uint64_t ticket_ = 0;                 // Backend::download_async
  int buffer_ = 0;                      // which of the runner's host token buffers
  std::vector<uint64_t> row_seqs_;      // sequence of each sampled row
  StepCost cost_;
};

class StepRunner {
 public:
  static constexpr int kMaxInFlight = 2;

  // backend and model must outlive the runner; the runner owns the KV cache.
  StepRunner(Backend& backend, Model& model, KvCache kv, StepRunnerOptions options = {});

  // Runs the step. On error nothing was written to the KV cache outside the step's sequences' own
  // pages (copy_partial_pages) and no state changed (except after a failed collective under
  // tensor parallelism: the KV cache is then undefined).
  Expected<std::vector<SampledResult>> run(const PlannedStep& step);

  // run() in two halves. start() runs the step, or on the device path queues it when every
  // sampling row samples on the device (then the returned step is pending()); errors as run(),
  // and a failed start leaves nothing in flight. Starting a step while kMaxInFlight are
  // pending is a bug (checked). finish() hands back the sampled tokens, waiting for the backend when needed;
  // call it once per started step, in start order.
  Expected<InFlightStep> start(const PlannedStep& step);
  // Whether finish() would return without waiting.
  bool ready(const InFlightStep& step) const;
  std::vector<SampledResult> finish(InFlightStep& step);
  int n_pending() const { return n_pending_; }

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
  // Sequences with a sampled token the next step may reuse.
  size_t n_tracked() const { return options_.device_steps ? slot_of_.size() : last_sampled_.size(); }
  bool device_steps() const { return options_.device_steps; }

 private:
  // with_pooling: plan the pooling items' hidden rows (not on a tensor-parallel follower).
  Status build_batch(const PlannedStep& step, bool with_pooling = true);
  // The hidden rows of the step just run, to the host as f32, folded by the pooler.
  std::vector<PooledEmbedding> pool_hidden_rows();
  // Plans the pooling items' hidden rows and, with an MTP module, every other item's fed rows
  // after them (batch_.hidden_rows, batch_.hidden; mtp_hidden_first_).
  Status plan_hidden_rows(const PlannedStep& step);
  bool mtp_on() const { return model_.n_mtp_layers() > 0; }
  bool eagle3_on() const { return !draft_head_.aux_layers.empty(); }
  // The MTP pass over the step just run on the host path (class comment); out is its results.
  std::vector<SeqDrafts> run_mtp(const PlannedStep& step, const std::vector<SampledResult>& out);
  Status mtp_pass(const PlannedStep& step, const std::vector<SampledResult>& out, std::vector<SeqDrafts>& drafts);
  // Grows the MTP output buffers to n rows each.
  Status ensure_mtp_hidden(int n);
  // Appends the logits rows of the step's prompt logprobs after the sampling rows.
  Status plan_prompt_rows(const PlannedStep& step);
  // Scores the prompt rows (logits rows from n_sample_rows_ on); row(r) is logits row r [vocab].
  std::vector<PromptLogprobRun> score_prompt_rows(const std::function<std::span<const float>(int)>& row) const;
  Status ensure_logits(int n_rows);
  // Before a step's forward: the rows its items copy from partly matched cached pages
  // (SeqWorkItem::copy_rows). invalid_argument, nothing copied, when an item's copy does not fit
  // its start and block table. A step that fails after this leaves the rows in its own sequences'
  // pages, which nothing else reads.
  Status copy_partial_pages(const PlannedStep& step);
  // Adds the step's input tokens to the penalty history of sequences that use penalties.
  void record_history(const PlannedStep& step);
  // Recurrent models: the state slot of each sequence of the step (batch_.state_slots), a free
  // one for a sequence not seen before; resource_exhausted when none is left.
  Status assign_state_slots(const PlannedStep& step);
  int running_state_slots() const { return model_.state_slots() - options_.state_snapshots; }
  // Refuses malformed drafts (SeqWork.nDraft) before anything runs.
  Status check_drafts(const SeqWorkItem& w);
  // Samples row (penalties, logprobs) with the random draw of stream step n_generated + offset.
  SampledResult sample_row(const SeqWorkItem& w, std::span<float> row, uint32_t offset = 0);
  // Appends the tokens of one sampling item: its sampled token, or with drafts the verified run
  // (core/sampling.h verify_drafts). row(j) is the item's j-th logits row [vocab], j <= n_draft.
  void sample_item(const SeqWorkItem& w, const std::function<std::span<float>(int)>& row,
                   std::vector<SampledResult>& out);
  Expected<std::vector<SampledResult>> run_on_host(const PlannedStep& step, std::vector<PromptLogprobRun>& prompt_logprobs);

  // ---- the device path (step_runner_device.cpp) ----
  Expected<InFlightStep> start_on_device(const PlannedStep& step);
  // The step's prompt logprobs, from its logits rows downloaded in blocks.
  std::vector<PromptLogprobRun> download_prompt_rows();
  // The host buffer the next pending step's n_rows tokens land in (grown before the step runs,
  // so a failed allocation changes nothing).
  Status ensure_host_tokens(int n_rows);
  // The sampled tokens of a step whose rows all sampled on the device: queued for download.
  InFlightStep download_tokens(int n_rows, const PlannedStep& step);
  // Gives every sampling sequence of the step a slot in the device token table (growing it);
  // `added` lists the sequences that got a new one, for unassign_slots when the step fails.
  Status assign_slots(const PlannedStep& step, std::vector<uint64_t>& added);
  void unassign_slots(std::span<const uint64_t> seq_ids);
  Status grow_table(int32_t n_slots);
  // Uploads the step's tokens, feeds, runs the forward, samples and stores the tokens; between
  // begin_step/end_step when `key` is set.
  Status launch_device_step(std::optional<uint64_t> key, bool sampled);
  // The host sampler for one item of a device step (its rows from first_row on, downloaded one
  // by one); its last token is put into the device table.
  void sample_on_host(const SeqWorkItem& w, int first_row, std::vector<SampledResult>& out);
  static bool needs_host_sampler(const SeqWorkItem& w);
  // One generated token (fed as input, or an accepted draft) enters the sequence's history.
  void note_output(const SeqWorkItem& w, int32_t token);
  // Masks the tokens that would break w's JSON object, schema instance or choice; end ids only
  // once it is complete.
  void mask_output(const SeqWorkItem& w, std::span<float> row);
  static void force_token(std::span<float> row, int32_t token);

  Backend& backend_;
  Model& model_;
  KvCache kv_;
  StepRunnerOptions options_;
  StepBatch batch_;
  StepCost cost_;  // of batch_ as build_batch left it
  std::vector<size_t> sample_items_;  // index into step.seqs of each logits row (an item with
                                      // drafts has n_draft + 1 consecutive rows)
  // Prompt logprobs: their logits rows follow the sampling rows ([n_sample_rows_, logit rows)),
  // so a step's logits hold [sampling rows + prompt rows, vocab] f32, at most its tokens' rows.
  int n_sample_rows_ = 0;
  std::vector<PromptLogprobItem> prompt_items_;
  Pooler pooler_;
  Buffer hidden_buf_;                // [hidden rows, hidden_size] in the activation dtype
  std::vector<uint8_t> host_hidden_;
  std::vector<float> hidden_row_;
  int mtp_hidden_first_ = 0;  // the first of the MTP rows in batch_.hidden
  StepBatch mtp_batch_;
  Buffer mtp_hidden_[2];      // [rows, hidden_size] activation dtype: chained drafts' prev_hidden / output
  size_t mtp_hidden_rows_ = 0;
  Model::DraftHead draft_head_;  // what forward_mtp takes and gives (Model::draft_head)
  Buffer aux_buf_;               // an EAGLE-3 head's aux planes (StepBatch::aux_hidden)
  Buffer logits_buf_;
  size_t logits_rows_cap_ = 0;
  std::vector<float> host_logits_;
  std::unordered_map<uint64_t, int32_t> last_sampled_;
  std::unordered_map<uint64_t, PenaltyHistory> history_;  // sequences with penalties or bad words only
  std::vector<float> raw_row_;
  OutputConstraints constraints_;  // constrained sequences' matchers, over options_.vocab
  ThinkingBudgets budgets_;         // budgeted sequences' reasoning counts
  std::vector<std::pair<int32_t, float>> ends_;

  // Device path state. feed_ [n_tokens]: the token-table slot a row's token comes from (-1: the
  // uploaded id). The table holds each tracked sequence's last sampled token at its slot.
  std::vector<int32_t> feed_;
  std::vector<int32_t> store_;  // [logit rows] slot each sampled token goes to, -1 = none
  std::vector<SampleParams> params_;
  std::vector<int32_t> sampled_;
  std::unordered_map<uint64_t, int32_t> slot_of_;
  std::vector<int32_t> free_slots_;
  // Recurrent models (Model::state_slots): each running sequence's state slot
  // (StepBatch::state_slots), given at its first step and freed when it is released.
  std::unordered_map<uint64_t, int32_t> state_slot_of_;
  std::vector<int32_t> free_state_slots_;
  int32_t n_slots_ = 0;  // slots handed out so far (the table's used prefix)
  Buffer table_;         // [table_cap_] i32
  int32_t table_cap_ = 0;
  Buffer d_tokens_, d_feed_, d_params_, d_sampled_, d_store_;
  // Host buffers the tokens of steps in flight land in (Backend::allocate_host), used in turn.
  Buffer host_tokens_[kMaxInFlight];
  bool host_busy_[kMaxInFlight] = {};
  int next_host_ = 0;
  int n_pending_ = 0;
};

}  // namespace brigade
