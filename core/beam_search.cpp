#include "core/beam_search.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

namespace brigade {

namespace {

double length_normalized(double cum_logprob, int length, float length_penalty) {
  return cum_logprob / std::pow(static_cast<double>(length), static_cast<double>(length_penalty));
}

}  // namespace

Status BeamSearch::validate(const BeamSearchConfig& c, int vocab_size) {
  if (c.beam_width < 1) return invalid_argument("the beam width must be >= 1 (got " + std::to_string(c.beam_width) + ")");
  if (c.max_new_tokens < 1)
    return invalid_argument("a beam search needs max_tokens >= 1 (got " + std::to_string(c.max_new_tokens) + ")");
  if (!std::isfinite(c.length_penalty))
    return invalid_argument("length_penalty must be a finite number");
  std::unordered_set<int32_t> ends;
  for (int32_t t : c.end_ids) {
    if (t < 0 || t >= vocab_size)
      return invalid_argument("end token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_size) + ")");
    if (!ends.insert(t).second) return invalid_argument("end token id " + std::to_string(t) + " is given twice");
  }
  const int64_t k = int64_t{std::max<int>(2, 1 + static_cast<int>(c.end_ids.size()))} * c.beam_width;
  if (k > vocab_size)
    return invalid_argument("a beam width of " + std::to_string(c.beam_width) + " with " +
                            std::to_string(c.end_ids.size()) + " end id(s) keeps " + std::to_string(k) +
                            " candidates per step, more than the vocabulary's " + std::to_string(vocab_size) + " ids");
  return Status::ok();
}

BeamSearch::BeamSearch(BeamSearchConfig config) : config_(std::move(config)) { running_.emplace_back(); }

int BeamSearch::candidates_per_beam() const {
  return std::max<int>(2, 1 + static_cast<int>(config_.end_ids.size())) * config_.beam_width;
}

bool BeamSearch::is_end(int32_t token) const {
  return std::find(config_.end_ids.begin(), config_.end_ids.end(), token) != config_.end_ids.end();
}

// The best K of every running beam's candidates (cumulative score), best first; ties to the
// earlier beam, then the parent's more likely candidate.
std::vector<BeamSearch::Candidate> BeamSearch::best_candidates(std::span<const TokenCandidates> tops) const {
  const size_t k = static_cast<size_t>(candidates_per_beam());
  std::vector<Candidate> all;
  for (size_t b = 0; b < running_.size(); ++b) {
    const size_t n = std::min(k, tops[b].size());
    for (size_t r = 0; r < n; ++r) {
      const auto& [token, logprob] = tops[b][r];
      all.push_back({running_[b].cum_logprob + logprob, static_cast<int>(b), static_cast<int>(r), token, logprob});
    }
  }
  const size_t keep = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    [](const Candidate& a, const Candidate& b) {
                      if (a.score != b.score) return a.score > b.score;
                      return a.beam != b.beam ? a.beam < b.beam : a.rank < b.rank;
                    });
  all.resize(keep);
  return all;
}

BeamHypothesis BeamSearch::extend(const BeamHypothesis& parent, const Candidate& c,
                                  const std::shared_ptr<const TokenCandidates>& top) const {
  BeamHypothesis h;
  h.tokens.reserve(parent.tokens.size() + 1);
  h.tokens = parent.tokens;
  h.tokens.push_back(c.token);
  h.logprobs = parent.logprobs;
  h.logprobs.push_back(c.logprob);
  if (config_.keep_top) {
    h.top = parent.top;
    h.top.push_back(top);
  }
  h.cum_logprob = c.score;
  return h;
}

// transformers' _update_finished_beams for one candidate: the finished set keeps its best W.
void BeamSearch::offer_finished(BeamHypothesis h) {
  const auto worse = [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; };
  auto at = std::upper_bound(finished_.begin(), finished_.end(), h, worse);
  if (static_cast<int>(finished_.size()) >= config_.beam_width && at == finished_.end()) return;
  finished_.insert(at, std::move(h));
  if (static_cast<int>(finished_.size()) > config_.beam_width) finished_.pop_back();
}

// transformers' _check_early_stop_heuristic, after a step: can the best running beam still beat
// the worst finished one?
bool BeamSearch::improvement_possible() const {
  if (static_cast<int>(finished_.size()) < config_.beam_width || running_.empty()) return true;
  const int length = config_.early_stopping == EarlyStopping::never && config_.length_penalty > 0.0f
                         ? config_.max_new_tokens
                         : n_generated_;
  return length_normalized(running_.front().cum_logprob, length, config_.length_penalty) > finished_.back().score;
}

void BeamSearch::advance(std::span<const TokenCandidates> tops) {
  BRIGADE_CHECK(!done_, "advance() after the beam search is done");
  BRIGADE_CHECK(tops.size() == running_.size(), "one candidate list per running beam");
  const std::vector<Candidate> best = best_candidates(tops);
  std::vector<std::shared_ptr<const TokenCandidates>> shared_tops(running_.size());
  if (config_.keep_top)
    for (size_t b = 0; b < running_.size(); ++b) shared_tops[b] = std::make_shared<const TokenCandidates>(tops[b]);

  const int length = n_generated_ + 1;
  const bool at_max = length >= config_.max_new_tokens;
  const int width = config_.beam_width;
  // Finished candidates: only among the first W, and only while the search may still take them.
  const bool full = static_cast<int>(finished_.size()) >= width;
  const bool may_finish = heuristic_open_ && !(full && config_.early_stopping == EarlyStopping::on);
  std::vector<BeamHypothesis> next;
  bool all_end = true;
  for (size_t i = 0; i < best.size(); ++i) {
    const Candidate& c = best[i];
    const bool ended_at_id = is_end(c.token);
    const bool ends = ended_at_id || at_max;
    all_end = all_end && ends;
    if (ends) {
      if (static_cast<int>(i) >= width || !may_finish) continue;
      BeamHypothesis h = extend(running_[static_cast<size_t>(c.beam)], c, shared_tops[static_cast<size_t>(c.beam)]);
      h.score = length_normalized(h.cum_logprob, length, config_.length_penalty);
      h.ended_at_id = ended_at_id;
      offer_finished(std::move(h));
    } else if (static_cast<int>(next.size()) < width) {
      next.push_back(extend(running_[static_cast<size_t>(c.beam)], c, shared_tops[static_cast<size_t>(c.beam)]));
    }
  }
  running_ = std::move(next);
  n_generated_ = length;
  heuristic_open_ = heuristic_open_ && improvement_possible();
  const bool all_finished_on =
      static_cast<int>(finished_.size()) >= width && config_.early_stopping == EarlyStopping::on;
  done_ = !heuristic_open_ || all_finished_on || all_end || running_.empty();
  if (done_) running_.clear();
}

std::vector<BeamHypothesis> BeamSearch::take_results() {
  BRIGADE_CHECK(done_, "take_results() before the beam search is done");
  return std::move(finished_);
}

}  // namespace brigade
