#include "actors/scheduler/policy.h"

#include <algorithm>

namespace brigade {

Status SchedulerLimits::validate() const {
  if (max_running < 1) return invalid_argument("max_running must be >= 1");
  if (max_waiting < 0) return invalid_argument("max_waiting must be >= 0");
  if (max_step_tokens < 1) return invalid_argument("max_step_tokens must be >= 1");
  if (max_context < 1) return invalid_argument("max_context must be >= 1");
  if (page_size < 1) return invalid_argument("page_size must be >= 1");
  if (vocab_size < 1) return invalid_argument("vocab_size must be >= 1");
  return Status::ok();
}

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::none: return "none";
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::abort: return "abort";
    case Finish::error: return "error";
  }
  return "?";
}

SchedulerPolicy::SchedulerPolicy(const SchedulerLimits& limits, int pool_pages)
    : limits_(limits), pool_pages_(pool_pages) {
  BRIGADE_CHECK(limits_.validate().is_ok(), "limits are validated by the caller");
  BRIGADE_CHECK(pool_pages_ >= 1, "a KV pool has at least one page");
}

Status SchedulerPolicy::add(SeqRequest request) {
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) return invalid_argument("the prompt is empty: give at least one token");
  if (request.max_tokens < 1)
    return invalid_argument("max_tokens must be >= 1 (got " + std::to_string(request.max_tokens) + ")");
  if (n_prompt >= limits_.max_context) {
    return invalid_argument("the prompt has " + std::to_string(n_prompt) + " tokens; the model's context is " +
                            std::to_string(limits_.max_context) + " tokens and generation needs at least one more");
  }
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= limits_.vocab_size) {
      return invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(limits_.vocab_size) + ")");
    }
  }
  const bool in_use = running_.count(request.id) != 0 ||
                      std::any_of(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == request.id; });
  if (in_use) return invalid_argument("request id " + std::to_string(request.id) + " is already in use");
  if (static_cast<int>(waiting_.size()) >= limits_.max_waiting) {
    return out_of_resources("the waiting queue is full (" + std::to_string(limits_.max_waiting) +
                            " requests); retry later");
  }
  const int capacity = pool_pages_ * limits_.page_size;
  if (n_prompt + 1 > capacity) {
    return out_of_resources("the prompt needs " + std::to_string(n_prompt + 1) + " token slots but the whole KV pool holds " +
                            std::to_string(capacity) + "; shorten the prompt or enlarge the KV pool");
  }
  Seq s{std::move(request), {}, 0, 0, 0, 0, 0, std::min(limits_.max_context, capacity), BlockTable(limits_.page_size),
        Finish::none, false, {}, next_arrival_++};
  s.tokens = s.req.prompt;
  enqueue(std::move(s));
  return Status::ok();
}

// Keeps the queue in (priority desc, arrival asc) order; a preempted sequence keeps its arrival,
// so it returns ahead of everything that came after it.
void SchedulerPolicy::enqueue(Seq s) {
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const Seq& w) {
    return w.req.priority < s.req.priority || (w.req.priority == s.req.priority && w.arrival > s.arrival);
  });
  waiting_.insert(pos, std::move(s));
}

std::vector<SeqEvent> SchedulerPolicy::abort(uint64_t id, PageSource& pages) {
  std::vector<SeqEvent> events;
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == id; });
  if (w != waiting_.end()) {
    w->ended = Finish::abort;
    events.push_back(final_event(*w));
    waiting_.erase(w);
    return events;
  }
  auto r = running_.find(id);
  if (r == running_.end() || r->second.ended != Finish::none) return events;
  r->second.ended = Finish::abort;
  drop_if_drained(id, pages, events);  // in flight: ends when its last step comes back
  return events;
}

int SchedulerPolicy::n_pages_held() const {
  int n = 0;
  for (const auto& [id, s] : running_) n += s.blocks.n_pages();
  return n;
}

int SchedulerPolicy::pages_short(const PageSource& pages) const {
  if (waiting_.empty() || static_cast<int>(running_.size()) >= limits_.max_running) return 0;
  const Seq& s = waiting_.front();
  const int need = s.blocks.pages_needed(static_cast<int>(s.tokens.size()) + 1);
  return std::max(0, need - pages.n_available());
}

bool SchedulerPolicy::admit_next(PageSource& pages) {
  if (waiting_.empty() || static_cast<int>(running_.size()) >= limits_.max_running) return false;
  Seq& s = waiting_.front();
  auto got = pages.take(s.blocks.pages_needed(static_cast<int>(s.tokens.size()) + 1));
  if (!got) return false;  // the head waits for pages: no overtaking keeps priorities fair
  s.blocks.append(*got);
  const uint64_t id = s.req.id;
  running_.emplace(id, std::move(s));
  waiting_.pop_front();
  return true;
}

bool SchedulerPolicy::preempt_one(uint64_t except, PageSource& pages) {
  Seq* victim = nullptr;
  for (auto& [id, s] : running_) {
    if (id == except || s.n_inflight != 0 || s.ended != Finish::none) continue;
    if (!victim || s.req.priority < victim->req.priority ||
        (s.req.priority == victim->req.priority && s.arrival > victim->arrival))
      victim = &s;
  }
  if (!victim) return false;
  const uint64_t id = victim->req.id;
  pages.give_back(victim->blocks.take_all());
  released_.push_back(id);  // the executor forgets its sampled token and penalty history
  victim->n_computed = victim->n_scheduled = 0;
  Seq s = std::move(*victim);
  running_.erase(id);
  enqueue(std::move(s));
  ++n_preemptions_;
  return true;
}

// Makes the block table cover n_positions, preempting others when the pool is short.
bool SchedulerPolicy::ensure_pages(Seq& s, int n_positions, PageSource& pages) {
  const int need = s.blocks.pages_needed(n_positions);
  if (need == 0) return true;
  while (pages.n_available() < need) {
    if (!preempt_one(s.req.id, pages)) return false;
  }
  s.blocks.append(*pages.take(need));
  return true;
}

// A decode: one token, either the last one seen or the one an in-flight step is sampling.
bool SchedulerPolicy::wants_decode(const Seq& s) const {
  if (s.ended != Finish::none) return false;
  const int known = static_cast<int>(s.tokens.size());
  if (s.n_pending > 0) {
    BRIGADE_CHECK(s.n_scheduled == known + s.n_pending - 1, "pending samples follow the scheduled positions");
    return s.n_generated + s.n_pending < s.req.max_tokens && known + s.n_pending < s.max_context;
  }
  return s.n_generated > 0 && known - s.n_scheduled == 1;
}

// A chunk of known tokens not yet scheduled: a prompt, or the recompute of a preempted sequence.
bool SchedulerPolicy::wants_chunk(const Seq& s) const {
  return s.ended == Finish::none && s.n_pending == 0 && static_cast<int>(s.tokens.size()) > s.n_scheduled &&
         !wants_decode(s);
}

void SchedulerPolicy::add_work(Seq& s, int n_tokens, PlannedStep& step, std::vector<StepEntry>& entries) {
  const int known = static_cast<int>(s.tokens.size());
  const bool pending = s.n_pending > 0;
  SeqWorkItem w;
  w.seq_id = s.req.id;
  if (pending) {
    w.tokens = {0};  // replaced by the executor with the token it sampled last for this sequence
    w.use_last_sampled = true;
  } else {
    w.tokens.assign(s.tokens.begin() + s.n_scheduled, s.tokens.begin() + s.n_scheduled + n_tokens);
  }
  w.start_pos = s.n_scheduled;
  const int n_pages_used = (s.n_scheduled + n_tokens + limits_.page_size - 1) / limits_.page_size;
  w.block_table.assign(s.blocks.pages().begin(), s.blocks.pages().begin() + n_pages_used);
  w.sample = pending || s.n_scheduled + n_tokens == known;
  w.sampling = s.req.sampling;
  w.n_generated = static_cast<uint32_t>(s.n_generated + s.n_pending);  // index of the token sampled
  w.logprobs = s.req.logprobs;
  w.prompt_len = static_cast<int>(s.req.prompt.size());
  s.n_scheduled += n_tokens;
  if (w.sample) ++s.n_pending;
  ++s.n_inflight;
  step.n_tokens += n_tokens;
  entries.push_back({s.req.id, n_tokens, w.sample});
  step.seqs.push_back(std::move(w));
}

std::optional<PlannedStep> SchedulerPolicy::plan(PageSource& pages) {
  PlannedStep step;
  step.step_id = next_step_;
  std::vector<StepEntry> entries;
  int budget = limits_.max_step_tokens;
  auto ids = [&] {
    std::vector<uint64_t> out;
    for (const auto& [id, s] : running_) out.push_back(id);
    return out;
  };
  // 1. Decodes of running sequences: one token each, so they never starve behind long prompts.
  for (uint64_t id : ids()) {
    auto it = running_.find(id);  // an earlier decode may have preempted it
    if (budget <= 0 || it == running_.end() || !wants_decode(it->second)) continue;
    if (!ensure_pages(it->second, it->second.n_scheduled + 1, pages)) continue;
    add_work(it->second, 1, step, entries);
    --budget;
  }
  // 2. Admission with the pages left, 3. prompt (and recompute) chunks fill the budget.
  while (admit_next(pages)) {
  }
  for (uint64_t id : ids()) {
    auto it = running_.find(id);
    if (budget <= 0) break;
    if (it == running_.end() || !wants_chunk(it->second)) continue;
    Seq& s = it->second;
    const int n = std::min(static_cast<int>(s.tokens.size()) - s.n_scheduled, budget);
    if (!ensure_pages(s, s.n_scheduled + n, pages)) continue;
    add_work(s, n, step, entries);
    budget -= n;
  }
  if (step.seqs.empty()) return std::nullopt;  // releases wait for the next real step
  step.released.swap(released_);
  inflight_.emplace(step.step_id, std::move(entries));
  ++next_step_;
  return step;
}

Finish SchedulerPolicy::finish_of(const Seq& s) const {
  if (s.n_generated == 0) return Finish::none;
  const int32_t last = s.tokens.back();
  if (!s.req.ignore_eos && std::find(s.req.eos_ids.begin(), s.req.eos_ids.end(), last) != s.req.eos_ids.end())
    return Finish::stop;
  if (std::find(s.req.stop_ids.begin(), s.req.stop_ids.end(), last) != s.req.stop_ids.end()) return Finish::stop;
  if (s.n_generated >= s.req.max_tokens) return Finish::length;
  if (static_cast<int>(s.tokens.size()) >= s.max_context) return Finish::length;
  return Finish::none;
}

SeqEvent SchedulerPolicy::final_event(Seq& s) {
  s.final_sent = true;
  SeqEvent ev;
  ev.seq_id = s.req.id;
  ev.finish = s.ended;
  ev.error = s.error;
  ev.error_code = s.ended == Finish::error ? StatusCode::internal : StatusCode::ok;
  ev.prompt_tokens = static_cast<int>(s.req.prompt.size());
  ev.completion_tokens = s.n_generated;
  return ev;
}

void SchedulerPolicy::release(Seq& s, PageSource& pages) {
  pages.give_back(s.blocks.take_all());
  released_.push_back(s.req.id);
}

// An ended sequence leaves once no step in flight uses it; its final event goes out then if it
// has not yet (abort, error).
void SchedulerPolicy::drop_if_drained(uint64_t id, PageSource& pages, std::vector<SeqEvent>& events) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  Seq& s = it->second;
  if (s.ended == Finish::none || s.n_inflight != 0) return;
  if (!s.final_sent) events.push_back(final_event(s));
  release(s, pages);
  running_.erase(it);
}

std::vector<SeqEvent> SchedulerPolicy::complete(uint64_t step_id, std::span<const SampledResult> sampled,
                                                PageSource& pages) {
  BRIGADE_CHECK(!inflight_.empty() && inflight_.begin()->first == step_id, "steps complete in the order planned");
  std::vector<StepEntry> entries = std::move(inflight_.begin()->second);
  inflight_.erase(inflight_.begin());
  std::map<uint64_t, const SampledResult*> by_seq;
  for (const auto& r : sampled) by_seq[r.seq_id] = &r;
  std::vector<SeqEvent> events;
  for (const StepEntry& e : entries) {
    Seq& s = running_.at(e.seq_id);  // a sequence with a step in flight is never dropped
    --s.n_inflight;
    s.n_computed += e.n_tokens;
    if (e.sample) {
      --s.n_pending;
      auto hit = by_seq.find(e.seq_id);
      if (s.ended == Finish::none && hit == by_seq.end()) {
        s.ended = Finish::error;
        s.error = "the executor returned no token for a sequence that asked for one";
      } else if (s.ended == Finish::none) {  // tokens after the end (overlap) are dropped
        const SampledResult& r = *hit->second;
        s.tokens.push_back(r.token);
        ++s.n_generated;
        SeqEvent ev;
        ev.seq_id = e.seq_id;
        ev.new_tokens.push_back(r.token);
        if (s.req.logprobs >= 0) {
          ev.logprobs.push_back(r.logprob);
          if (s.req.logprobs > 0) ev.top_logprobs.push_back(r.top);
        }
        ev.prompt_tokens = static_cast<int>(s.req.prompt.size());
        ev.completion_tokens = s.n_generated;
        s.ended = finish_of(s);
        if (s.ended != Finish::none) {
          ev.finish = s.ended;
          s.final_sent = true;
        }
        events.push_back(std::move(ev));
      }
    }
    drop_if_drained(e.seq_id, pages, events);
  }
  return events;
}

std::vector<SeqEvent> SchedulerPolicy::fail(uint64_t step_id, const std::string& error, PageSource& pages) {
  BRIGADE_CHECK(!inflight_.empty() && inflight_.begin()->first == step_id, "steps complete in the order planned");
  std::vector<StepEntry> entries = std::move(inflight_.begin()->second);
  inflight_.erase(inflight_.begin());
  std::vector<SeqEvent> events;
  for (const StepEntry& e : entries) {
    Seq& s = running_.at(e.seq_id);
    --s.n_inflight;
    if (e.sample) --s.n_pending;
    if (s.ended == Finish::none) {
      s.ended = Finish::error;
      s.error = error;
    }
    drop_if_drained(e.seq_id, pages, events);
  }
  return events;
}

}  // namespace brigade
