#include "actors/engine/beam_search_run.h"

#include <algorithm>

#include "models/detokenizer.h"

namespace brigade {

BeamSearchRun::BeamSearchRun(BeamRunSetup setup, BeamSearchCallback on_done)
    : setup_(std::move(setup)), on_done_(std::move(on_done)), search_(setup_.config) {
  // The search needs K candidates per beam; a client's logprobs may ask for more alternatives.
  k_ = std::max(search_.candidates_per_beam(), setup_.options.logprobs);
}

Status BeamSearchRun::start() {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = submit_step_locked();
  if (!s.is_ok()) ended_ = true;
  return s;
}

void BeamSearchRun::cancel(const std::string& why) {
  BeamSearchCallback done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done = end_locked(/*cancel_running=*/true);
  }
  if (done) done(Status(StatusCode::cancelled, why));
}

// One request per running beam: its whole sequence as the prompt, one greedy token (never used:
// only its candidates' raw logprobs are).
Status BeamSearchRun::submit_step_locked() {
  const auto& beams = search_.running();
  request_ids_.assign(beams.size(), 0);
  tops_.assign(beams.size(), {});
  n_answered_ = 0;
  const BeamSearchOptions& o = setup_.options;
  const AdmitGroup group{beams.size() > 1 ? setup_.new_group() : 0, static_cast<uint32_t>(beams.size())};
  for (size_t b = 0; b < beams.size(); ++b) {
    GenerateOptions g;
    g.prompt_ids.reserve(setup_.prompt.size() + beams[b].tokens.size());
    g.prompt_ids = setup_.prompt;
    g.prompt_ids.insert(g.prompt_ids.end(), beams[b].tokens.begin(), beams[b].tokens.end());
    g.max_tokens = 1;
    g.sampling.temperature = 0.0f;
    g.logprobs = k_;
    g.ignore_eos = true;
    g.priority = o.priority;
    g.cache_salt = o.cache_salt;
    g.labels = o.labels;
    g.lora = o.lora;
    auto self = shared_from_this();
    const int step = step_, beam = static_cast<int>(b);
    auto id = setup_.submit(g, group, [self, step, beam](const Event& ev) { self->on_event(step, beam, ev); });
    if (!id) {
      for (uint64_t running : request_ids_)
        if (running != 0) setup_.cancel(running);
      return id.status();
    }
    request_ids_[b] = *id;
  }
  return Status::ok();
}

void BeamSearchRun::on_event(int step, int beam, const Event& ev) {
  BeamSearchCallback done;
  Expected<BeamSearchResult> out = internal_error("unset");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_ || step != step_) return;
    const size_t b = static_cast<size_t>(beam);
    if (!ev.top_logprobs.empty()) tops_[b] = ev.top_logprobs.front();
    if (step == 0 && ev.finish != FinishReason::none) cached_tokens_ = ev.cached_tokens;
    if (ev.finish == FinishReason::none) return;
    request_ids_[b] = 0;
    if (ev.finish == FinishReason::error || ev.finish == FinishReason::abort || tops_[b].empty()) {
      const StatusCode code = ev.finish == FinishReason::error && ev.error_code != StatusCode::ok ? ev.error_code
                                                                                                : StatusCode::internal;
      const std::string why = ev.finish == FinishReason::error   ? ev.error
                              : ev.finish == FinishReason::abort ? "a step request was aborted"
                                                                 : "a step request ended without its logprobs";
      out = Status(code, "beam search step " + std::to_string(step) + ": " + why);
      done = end_locked(/*cancel_running=*/true);
    } else if (++n_answered_ == static_cast<int>(tops_.size())) {
      search_.advance(tops_);
      ++step_;
      if (search_.done()) {
        out = results();
        done = end_locked(/*cancel_running=*/false);
      } else if (Status s = submit_step_locked(); !s.is_ok()) {
        out = Status(s.code(), "beam search step " + std::to_string(step_) + ": " + s.message());
        done = end_locked(/*cancel_running=*/true);
      }
    }
  }
  if (done) done(std::move(out));
}

BeamSearchCallback BeamSearchRun::end_locked(bool cancel_running) {
  if (ended_) return {};
  ended_ = true;
  if (cancel_running)
    for (uint64_t id : request_ids_)
      if (id != 0) setup_.cancel(id);
  request_ids_.clear();
  setup_.forget(setup_.id);
  return std::move(on_done_);
}

BeamSearchResult BeamSearchRun::results() {
  BeamSearchResult r;
  for (const BeamHypothesis& h : search_.take_results()) r.beams.push_back(to_beam(h));
  r.prompt_token_ids = setup_.prompt;
  r.cached_tokens = cached_tokens_;
  r.steps = step_;
  return r;
}

// vLLM's form of a finished beam: the id that ended it is dropped from token_ids, logprobs and
// text unless include_stop_str_in_output; cumulative_logprob and score count it either way.
Beam BeamSearchRun::to_beam(const BeamHypothesis& h) const {
  const BeamSearchOptions& o = setup_.options;
  Beam beam;
  beam.cumulative_logprob = h.cum_logprob;
  beam.score = h.score;
  size_t n = h.tokens.size();
  if (h.ended_at_id) {
    beam.finish = FinishReason::stop;
    beam.stop_token = h.tokens.back();
    if (!o.include_stop_str_in_output) --n;
  }
  beam.token_ids.assign(h.tokens.begin(), h.tokens.begin() + static_cast<std::ptrdiff_t>(n));
  if (o.logprobs >= 0) beam.logprobs.assign(h.logprobs.begin(), h.logprobs.begin() + static_cast<std::ptrdiff_t>(n));
  if (o.logprobs > 0) {
    for (size_t i = 0; i < n; ++i) {
      const TokenCandidates& top = *h.top[i];
      beam.top_logprobs.emplace_back(top.begin(), top.begin() + std::min<std::ptrdiff_t>(o.logprobs, std::ssize(top)));
    }
  }
  beam.token_texts.resize(beam.token_ids.size());
  if (setup_.tokenizer) {
    IncrementalDetokenizer detok(*setup_.tokenizer, o.skip_special_tokens);
    for (size_t i = 0; i < n; ++i) beam.token_texts[i] = detok.push(beam.token_ids[i]);
    if (n > 0) beam.token_texts.back() += detok.flush();
    for (const std::string& t : beam.token_texts) beam.text += t;
  }
  return beam;
}

}  // namespace brigade
