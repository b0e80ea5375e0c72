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

SchedulerPolicy::SchedulerPolicy(const SchedulerLimits& limits) : limits_(limits) {
  BRIGADE_CHECK(limits_.validate().is_ok(), "limits are validated by the caller");
}

// Tokens a sequence may ever hold: its prompt plus max_tokens, capped at the context.
int SchedulerPolicy::reserve_tokens(const Seq& s) const {
  const int64_t want = static_cast<int64_t>(s.req.prompt.size()) + s.req.max_tokens;
  return static_cast<int>(std::min<int64_t>(want, limits_.max_context));
}

Status SchedulerPolicy::add(SeqRequest request, int pool_pages) {
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) return invalid_argument("the prompt is empty: give at least one token");
  if (request.max_tokens < 1)
    return invalid_argument("max_tokens must be >= 1 (got " + std::to_string(request.max_tokens) + ")");
  if (n_prompt >= limits_.max_context) {
    return invalid_argument("the prompt has " + std::to_string(n_prompt) +
                            " tokens; the model's context is " + std::to_string(limits_.max_context) +
                            " tokens and generation needs at least one more");
  }
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= limits_.vocab_size) {
      return invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(limits_.vocab_size) + ")");
    }
  }
  if (running_.count(request.id) != 0 ||
      std::any_of(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == request.id; })) {
    return invalid_argument("request id " + std::to_string(request.id) + " is already in use");
  }
  if (static_cast<int>(waiting_.size()) >= limits_.max_waiting) {
    return out_of_resources("the waiting queue is full (" + std::to_string(limits_.max_waiting) +
                            " requests); retry later");
  }
  Seq s{std::move(request), {}, 0, 0, BlockTable(limits_.page_size), 0, 0, false, next_arrival_++};
  const int need = s.blocks.pages_needed(reserve_tokens(s));
  if (need > pool_pages) {
    return out_of_resources("the request needs " + std::to_string(need) + " KV pages (prompt " +
                            std::to_string(n_prompt) + " + max_tokens " + std::to_string(s.req.max_tokens) +
                            ") but the whole pool has " + std::to_string(pool_pages) +
                            "; lower max_tokens or enlarge the KV pool");
  }
  s.tokens = s.req.prompt;
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const Seq& w) { return w.req.priority < s.req.priority; });
  waiting_.insert(pos, std::move(s));
  return Status::ok();
}

std::vector<SeqEvent> SchedulerPolicy::abort(uint64_t id, PageSource& pages) {
  std::vector<SeqEvent> events;
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == id; });
  if (w != waiting_.end()) {
    SeqEvent ev{id, {}, {}, Finish::abort, {}, static_cast<int>(w->req.prompt.size()), 0};
    waiting_.erase(w);
    events.push_back(std::move(ev));
    return events;
  }
  auto r = running_.find(id);
  if (r == running_.end()) return events;
  if (r->second.inflight_step != 0) {
    r->second.aborted = true;  // ended when its step completes: the step still writes its pages
    return events;
  }
  events.push_back(end(id, Finish::abort, {}, pages));
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
  const int need = s.blocks.pages_needed(reserve_tokens(s));
  return std::max(0, need - pages.n_available());
}

bool SchedulerPolicy::admit_next(PageSource& pages) {
  if (waiting_.empty() || static_cast<int>(running_.size()) >= limits_.max_running) return false;
  Seq& s = waiting_.front();
  const int need = s.blocks.pages_needed(reserve_tokens(s));
  auto got = pages.take(need);
  if (!got) return false;  // head-of-line waits for pages: no overtaking keeps priorities fair
  s.blocks.append(*got);
  uint64_t id = s.req.id;
  running_.emplace(id, std::move(s));
  waiting_.pop_front();
  return true;
}

void SchedulerPolicy::add_work(Seq& s, int budget, PlannedStep& step) {
  const int remaining = static_cast<int>(s.tokens.size()) - s.n_computed;
  const int chunk = std::min(remaining, budget);
  SeqWorkItem w;
  w.seq_id = s.req.id;
  w.tokens.assign(s.tokens.begin() + s.n_computed, s.tokens.begin() + s.n_computed + chunk);
  w.start_pos = s.n_computed;
  const int n_pages_used = (s.n_computed + chunk + limits_.page_size - 1) / limits_.page_size;
  w.block_table.assign(s.blocks.pages().begin(), s.blocks.pages().begin() + n_pages_used);
  w.sample = (chunk == remaining);  // the chunk reaches the end of the known tokens
  w.sampling = s.req.sampling;
  w.n_generated = static_cast<uint32_t>(s.n_generated);
  w.logprobs = s.req.logprobs;
  w.prompt_len = static_cast<int>(s.req.prompt.size());
  s.inflight_step = step.step_id;
  s.inflight_tokens = chunk;
  step.n_tokens += chunk;
  step.seqs.push_back(std::move(w));
}

std::optional<PlannedStep> SchedulerPolicy::plan(PageSource& pages) {
  while (admit_next(pages)) {
  }
  PlannedStep step;
  step.step_id = next_step_;
  int budget = limits_.max_step_tokens;
  // Decodes first: one token each, so running sequences never starve behind long prompts.
  for (auto& [id, s] : running_) {
    if (s.inflight_step != 0 || s.aborted) continue;
    if (static_cast<int>(s.tokens.size()) - s.n_computed == 1 && s.n_generated > 0 && budget > 0) {
      add_work(s, 1, step);
      budget -= 1;
    }
  }
  // Then prompt chunks fill the rest of the budget.
  for (auto& [id, s] : running_) {
    if (budget <= 0) break;
    if (s.inflight_step != 0 || s.aborted) continue;
    if (static_cast<int>(s.tokens.size()) > s.n_computed) {
      const int before = step.n_tokens;
      add_work(s, budget, step);
      budget -= step.n_tokens - before;
    }
  }
  if (step.seqs.empty()) return std::nullopt;  // releases wait for the next real step
  step.released.swap(released_);
  ++next_step_;
  ++n_inflight_;
  return step;
}

Finish SchedulerPolicy::finish_of(const Seq& s) const {
  if (s.n_generated == 0) return Finish::none;
  const int32_t last = s.tokens.back();
  if (!s.req.ignore_eos &&
      std::find(s.req.eos_ids.begin(), s.req.eos_ids.end(), last) != s.req.eos_ids.end())
    return Finish::stop;
  if (std::find(s.req.stop_ids.begin(), s.req.stop_ids.end(), last) != s.req.stop_ids.end())
    return Finish::stop;
  if (s.n_generated >= s.req.max_tokens) return Finish::length;
  if (static_cast<int>(s.tokens.size()) >= limits_.max_context) return Finish::length;
  return Finish::none;
}

void SchedulerPolicy::release(Seq& s, PageSource& pages) {
  auto taken = s.blocks.take_all();
  pages.give_back(taken);
  released_.push_back(s.req.id);
}

SeqEvent SchedulerPolicy::end(uint64_t id, Finish f, std::string error, PageSource& pages) {
  auto it = running_.find(id);
  BRIGADE_CHECK(it != running_.end(), "only running sequences end here");
  Seq& s = it->second;
  SeqEvent ev{id, {}, {}, f, std::move(error), static_cast<int>(s.req.prompt.size()), s.n_generated,
              f == Finish::error ? StatusCode::internal : StatusCode::ok};
  release(s, pages);
  running_.erase(it);
  return ev;
}

std::vector<SeqEvent> SchedulerPolicy::complete(uint64_t step_id, std::span<const SampledResult> sampled,
                                                PageSource& pages) {
  std::vector<SeqEvent> events;
  std::map<uint64_t, const SampledResult*> by_seq;
  for (const auto& r : sampled) by_seq[r.seq_id] = &r;
  std::vector<uint64_t> ids;
  for (auto& [id, s] : running_)
    if (s.inflight_step == step_id) ids.push_back(id);
  for (uint64_t id : ids) {
    Seq& s = running_.at(id);
    s.n_computed += s.inflight_tokens;
    s.inflight_step = 0;
    s.inflight_tokens = 0;
    SeqEvent ev{id, {}, {}, Finish::none, {}, static_cast<int>(s.req.prompt.size()), 0};
    if (auto hit = by_seq.find(id); hit != by_seq.end()) {
      s.tokens.push_back(hit->second->token);
      ++s.n_generated;
      ev.new_tokens.push_back(hit->second->token);
      if (s.req.logprobs >= 0) {
        ev.logprobs.push_back(hit->second->logprob);
        if (s.req.logprobs > 0) ev.top_logprobs.push_back(hit->second->top);
      }
    }
    ev.completion_tokens = s.n_generated;
    Finish f = s.aborted ? Finish::abort : finish_of(s);
    if (f != Finish::none) {
      ev.finish = f;
      release(s, pages);
      running_.erase(id);
    }
    if (!ev.new_tokens.empty() || ev.finish != Finish::none) events.push_back(std::move(ev));
  }
  --n_inflight_;
  return events;
}

std::vector<SeqEvent> SchedulerPolicy::fail(uint64_t step_id, const std::string& error, PageSource& pages) {
  std::vector<SeqEvent> events;
  std::vector<uint64_t> ids;
  for (auto& [id, s] : running_)
    if (s.inflight_step == step_id) ids.push_back(id);
  for (uint64_t id : ids) events.push_back(end(id, Finish::error, error, pages));
  --n_inflight_;
  return events;
}

}  // namespace brigade
