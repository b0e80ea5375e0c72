// SchedulerPolicy: the plain scheduling logic of one instance (DESIGN.md §6), tested without
// actors. The scheduler actor owns one and translates messages into calls.
//
// Each running sequence has tokens [0, n_tokens) of which [0, n_computed) have KV in the cache.
// A step gives each chosen sequence the tokens [n_computed, n_computed + chunk): a prompt chunk,
// or the one token sampled last (decode). Decodes go first, then prompt chunks fill the step's
// token budget (chunked prefill), then waiting requests are admitted in priority order.
//
// Pages: admission reserves pages for the whole sequence (prompt + max_tokens, capped at the
// context), taken from a PageSource, so a running sequence never runs out mid-generation. Pages
// go back to the PageSource when a sequence ends and no step that uses them is in flight.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/sampling.h"
#include "core/status.h"
#include "actors/step_types.h"
#include "kvstore/page_pool.h"

namespace brigade {

struct SchedulerLimits {
  int max_running = 64;         // sequences in the running set
  int max_waiting = 1024;       // bounded queue: a request beyond it is refused
  int max_step_tokens = 512;    // token budget of one step (decode tokens + prompt chunks)
  int max_context = 0;          // the model's context length (prompt + generated)
  int page_size = 16;
  int vocab_size = 0;
  Status validate() const;
};

enum class Finish : uint8_t { none, stop, length, abort, error };
const char* finish_name(Finish f);

struct SeqRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingConfig sampling;
  int logprobs = -1;                 // -1 none; else the sampled token's logprob
  std::vector<int32_t> stop_ids;     // stops besides eos (unless ignore_eos)
  std::vector<int32_t> eos_ids;
  bool ignore_eos = false;
  int priority = 0;                  // higher first
};

// Where the policy gets pages and gives them back (the scheduler's lease on the KV pool).
class PageSource {
 public:
  virtual ~PageSource() = default;
  virtual int n_available() const = 0;
  // Exactly n pages, or nullopt (nothing taken).
  virtual std::optional<std::vector<int32_t>> take(int n) = 0;
  virtual void give_back(std::span<const int32_t> pages) = 0;
};

// What the scheduler tells a client after a step (mirrors schema::TokenEvent).
struct SeqEvent {
  uint64_t seq_id = 0;
  std::vector<int32_t> new_tokens;
  std::vector<float> logprobs;  // one per new token when asked
  Finish finish = Finish::none;
  std::string error;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  StatusCode error_code = StatusCode::ok;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;  // per new token, when asked
};

class SchedulerPolicy {
 public:
  explicit SchedulerPolicy(const SchedulerLimits& limits);

  // Queues a request. Errors (nothing queued): invalid prompt or parameters, queue full
  // (out_of_resources), a prompt that does not fit the context or the whole KV pool.
  Status add(SeqRequest request, int pool_pages);
  // Ends a request: a waiting one at once; a running one when no step using it is in flight.
  // Returns the events to send now (possibly none). Unknown ids are ignored.
  std::vector<SeqEvent> abort(uint64_t id, PageSource& pages);

  // Pages the head of the waiting queue needs beyond what `pages` has now (0 when it fits or
  // nothing can be admitted): what the scheduler asks its KV page manager for.
  int pages_short(const PageSource& pages) const;

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  int n_running() const { return static_cast<int>(running_.size()); }
  int n_inflight() const { return n_inflight_; }
  // Pages held by running sequences.
  int n_pages_held() const;

  // Plans the next step from sequences that have no step in flight, admitting waiting requests
  // when `pages` can hold them. nullopt when there is nothing to run now.
  std::optional<PlannedStep> plan(PageSource& pages);
  // Applies a finished step: appends sampled tokens, ends sequences that are done (their
  // pages go back to `pages`). Returns one event per sequence that sampled or ended.
  std::vector<SeqEvent> complete(uint64_t step_id, std::span<const SampledResult> sampled,
                                 PageSource& pages);
  // A step failed as a whole: every sequence in it ends with `error`.
  std::vector<SeqEvent> fail(uint64_t step_id, const std::string& error, PageSource& pages);

 private:
  struct Seq {
    SeqRequest req;
    std::vector<int32_t> tokens;  // prompt + generated
    int n_computed = 0;           // tokens whose KV is in the cache
    int n_generated = 0;
    BlockTable blocks;
    uint64_t inflight_step = 0;   // 0 = none
    int inflight_tokens = 0;
    bool aborted = false;
    uint64_t arrival = 0;
  };

  int reserve_tokens(const Seq& s) const;
  bool admit_next(PageSource& pages);
  void add_work(Seq& s, int budget, PlannedStep& step);
  Finish finish_of(const Seq& s) const;
  SeqEvent end(uint64_t id, Finish f, std::string error, PageSource& pages);
  void release(Seq& s, PageSource& pages);

  SchedulerLimits limits_;
  std::deque<Seq> waiting_;               // sorted by (priority desc, arrival)
  std::map<uint64_t, Seq> running_;       // ordered by id: stable plan order
  std::vector<uint64_t> released_;
  uint64_t next_step_ = 1;
  uint64_t next_arrival_ = 0;
  int n_inflight_ = 0;
};

}  // namespace brigade
