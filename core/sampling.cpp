#include "core/sampling.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/status.h"

namespace brigade {

int32_t argmax(std::span<const float> logits) {
  BRIGADE_CHECK(!logits.empty(), "argmax over a non-empty vocabulary");
  int32_t best = 0;
  float best_v = logits[0];
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > best_v) {
      best_v = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

float log_softmax_at(std::span<const float> logits, int32_t index) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(index)] - mx) - std::log(sum));
}

void apply_logit_rules(std::span<float> logits, const SamplingConfig& cfg, uint64_t n_generated) {
  const auto in_vocab = [&](int32_t t) { return t >= 0 && static_cast<size_t>(t) < logits.size(); };
  if (!cfg.allowed_token_ids.empty()) {  // sorted: one pass masks the ids between them
    size_t next = 0;
    for (auto id = static_cast<int32_t>(0); static_cast<size_t>(id) < logits.size(); ++id) {
      if (next < cfg.allowed_token_ids.size() && cfg.allowed_token_ids[next] == id) {
        ++next;
        continue;
      }
      logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    }
  }
  for (const auto& [t, bias] : cfg.logit_bias) {
    if (in_vocab(t)) logits[static_cast<size_t>(t)] += bias;
  }
  if (n_generated < static_cast<uint64_t>(std::max(cfg.min_tokens, 0))) {
    for (int32_t t : cfg.end_ids) {
      if (in_vocab(t)) logits[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
    }
  }
}

void PenaltyHistory::add_output(const SamplingConfig& cfg, int32_t token) {
  if (cfg.has_penalties()) ++output_counts[token];
  if (cfg.bad_words.empty()) return;
  output_tail.push_back(token);
  constexpr size_t kKeep = SamplingConfig::kMaxBadWordTokens - 1;
  if (output_tail.size() >= 2 * kKeep)  // trimmed in batches: amortised O(1) per token
    output_tail.erase(output_tail.begin(), output_tail.end() - static_cast<std::ptrdiff_t>(kKeep));
}

void apply_bad_words(std::span<float> logits, const std::vector<std::vector<int32_t>>& bad_words,
                     std::span<const int32_t> tail) {
  for (const std::vector<int32_t>& word : bad_words) {
    if (word.empty() || word.size() > tail.size() + 1) continue;
    const int32_t last = word.back();
    if (last < 0 || static_cast<size_t>(last) >= logits.size()) continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.end() - 1, tail.end() - static_cast<std::ptrdiff_t>(prefix)))
      logits[static_cast<size_t>(last)] = -std::numeric_limits<float>::infinity();
  }
}

void apply_penalties(std::span<float> logits, const SamplingConfig& cfg, const PenaltyHistory& history) {
  const auto in_vocab = [&](int32_t t) { return t >= 0 && static_cast<size_t>(t) < logits.size(); };
  if (cfg.repetition_penalty != 1.0f) {
    for (int32_t t : history.seen) {
      if (!in_vocab(t)) continue;
      float& v = logits[static_cast<size_t>(t)];
      v = v > 0.0f ? v / cfg.repetition_penalty : v * cfg.repetition_penalty;
    }
  }
  if (cfg.presence_penalty != 0.0f || cfg.frequency_penalty != 0.0f) {
    for (const auto& [t, n] : history.output_counts) {
      if (!in_vocab(t) || n <= 0) continue;
      logits[static_cast<size_t>(t)] -= cfg.presence_penalty + cfg.frequency_penalty * static_cast<float>(n);
    }
  }
}

std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int k) {
  std::vector<std::pair<int32_t, float>> out;
  if (k <= 0 || logits.empty()) return out;
  const size_t n = std::min(static_cast<size_t>(k), logits.size());
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  float mx = logits[static_cast<size_t>(ids[0])];
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const double log_z = static_cast<double>(mx) + std::log(sum);
  for (size_t i = 0; i < n; ++i)
    out.emplace_back(ids[i], static_cast<float>(static_cast<double>(logits[static_cast<size_t>(ids[i])]) - log_z));
  return out;
}

SampleParams sample_params(const SamplingConfig& cfg, uint64_t n_generated) {
  SampleParams p;
  if (cfg.temperature <= 0.0f || cfg.top_k == 1) return p;  // greedy
  p.temperature = cfg.temperature;
  p.top_k = cfg.top_k;
  p.top_p = cfg.top_p;
  if (cfg.min_p > 0.0f) p.log_min_p = std::log(cfg.min_p);
  p.seed = cfg.seed;
  p.step = n_generated;
  return p;
}

SampleOutput sample_token(std::span<const float> logits, const SamplingConfig& cfg,
                          uint64_t n_generated, bool with_logprob) {
  SampleOutput out;
  out.token = sample_like_device(logits, sample_params(cfg, n_generated));
  if (with_logprob) out.logprob = log_softmax_at(logits, out.token);
  return out;
}

}  // namespace brigade

namespace brigade {

namespace {

uint32_t key_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return sample_order_key(bits);
}

}  // namespace

int32_t sample_like_device(std::span<const float> logits, const SampleParams& p) {
  if (!(p.temperature > 0.0f)) return argmax(logits);
  const size_t vocab = logits.size();
  const float inv_t = 1.0f / p.temperature;
  std::vector<float> x(vocab);
  std::vector<uint32_t> keys(vocab);
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < vocab; ++i) {
    x[i] = logits[i] * inv_t;
    keys[i] = key_of(x[i]);
    mx = std::max(mx, x[i]);
  }
  uint32_t thresh = 0;  // keys >= thresh are kept
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    std::vector<uint32_t> sorted = keys;
    std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(), std::greater<>());
    thresh = sorted[static_cast<size_t>(p.top_k - 1)];
  }
  if (p.log_min_p > -std::numeric_limits<float>::infinity()) thresh = std::max(thresh, key_of(mx + p.log_min_p));
  if (p.top_p < 1.0f) {
    // The first distinct key (from the largest) whose cumulative mass reaches top_p of the total.
    std::vector<std::pair<uint32_t, float>> kept;
    float total = 0.0f;
    for (size_t i = 0; i < vocab; ++i) {
      if (keys[i] < thresh) continue;
      kept.emplace_back(keys[i], std::exp(x[i] - mx));
      total += kept.back().second;
    }
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const float target = p.top_p * total;
    float mass = 0.0f;
    for (size_t j = 0; j < kept.size(); ++j) {
      mass += kept[j].second;
      const bool last_of_key = j + 1 == kept.size() || kept[j + 1].first != kept[j].first;
      if (last_of_key && mass >= target) {
        thresh = std::max(thresh, kept[j].first);
        break;
      }
    }
  }
  float total = 0.0f;
  int32_t last = -1;
  for (size_t i = 0; i < vocab; ++i) {
    if (keys[i] < thresh) continue;
    total += std::exp(x[i] - mx);
    last = static_cast<int32_t>(i);
  }
  const float u = device_uniform(p.seed, p.step) * total;
  float run = 0.0f;
  for (size_t i = 0; i < vocab; ++i) {
    if (keys[i] < thresh) continue;
    run += std::exp(x[i] - mx);
    if (u < run) return static_cast<int32_t>(i);
  }
  return std::max(last, 0);
}

}  // namespace brigade
