#include "tools/bench_load.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

namespace brigade::tools {

namespace {

int draw(std::mt19937_64& rng, int lo, int hi) {
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

void append_random(std::mt19937_64& rng, int n, std::vector<int32_t>& out) {
  std::uniform_int_distribution<int32_t> id(3, 258);
  for (int i = 0; i < n; ++i) out.push_back(id(rng));
}

nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}};
}

}  // namespace

std::vector<std::vector<RequestSpec>> make_conversations(const Workload& w) {
  std::mt19937_64 rng(w.seed);
  std::vector<std::vector<int32_t>> prefixes(static_cast<size_t>(std::max(1, w.prefix_groups)));
  for (auto& prefix : prefixes) append_random(rng, w.shared_prefix, prefix);
  const int turns = std::max(1, w.turns);
  const int n_conv = (w.n_requests + turns - 1) / turns;
  std::vector<std::vector<RequestSpec>> out;
  int made = 0;
  for (int c = 0; c < n_conv; ++c) {
    std::vector<RequestSpec> conv;
    std::vector<int32_t> history = prefixes[static_cast<size_t>(c) % prefixes.size()];
    for (int t = 0; t < turns && made < w.n_requests; ++t, ++made) {
      if (t > 0) history.insert(history.end(), static_cast<size_t>(conv.back().max_tokens), 13);  // the answer
      append_random(rng, draw(rng, w.input_len, w.input_len_max), history);
      conv.push_back({history, draw(rng, w.output_len, w.output_len_max), c});
    }
    out.push_back(std::move(conv));
  }
  return out;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t i = static_cast<size_t>(pos);
    const double frac = pos - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
  };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return p;
}

BenchSummary summarize(const std::vector<RequestResult>& results, double wall_s) {
  BenchSummary s;
  s.n_requests = static_cast<int>(results.size());
  s.wall_s = wall_s;
  std::vector<double> ttft, tpot, e2e;
  for (const auto& r : results) {
    if (!r.ok) {
      ++s.n_errors;
      if (s.first_error.empty()) s.first_error = r.error;
      continue;
    }
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    if (r.output_tokens > 1) tpot.push_back(r.tpot_s);
    e2e.push_back(r.e2e_s);
  }
  if (wall_s > 0) {
    s.requests_per_s = static_cast<double>(s.n_requests - s.n_errors) / wall_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / wall_s;
    s.total_tokens_per_s = static_cast<double>(s.output_tokens + s.prompt_tokens) / wall_s;
  }
  s.ttft_s = percentiles(ttft);
  s.tpot_s = percentiles(tpot);
  s.e2e_s = percentiles(e2e);
  return s;
}

void print_summary(const BenchSummary& s) {
  std::printf("\n%s: %d requests (%d errors) in %.2f s", s.mode.c_str(), s.n_requests, s.n_errors, s.wall_s);
  if (s.mode == "online") {
    if (s.rate > 0) {
      std::printf(", Poisson arrivals at %.2f req/s", s.rate);
    } else {
      std::printf(", %d concurrent clients", s.concurrency);
    }
  }
  std::printf("\n  throughput: %.2f requests/s, %.1f output tokens/s, %.1f total tokens/s\n", s.requests_per_s,
              s.output_tokens_per_s, s.total_tokens_per_s);
  std::printf("  tokens: %lld prompt, %lld output\n\n", static_cast<long long>(s.prompt_tokens),
              static_cast<long long>(s.output_tokens));
  std::printf("  %-10s %10s %10s %10s %10s\n", "ms", "p50", "p90", "p99", "mean");
  auto row = [](const char* name, const Percentiles& p) {
    std::printf("  %-10s %10.1f %10.1f %10.1f %10.1f\n", name, p.p50 * 1e3, p.p90 * 1e3, p.p99 * 1e3, p.mean * 1e3);
  };
  row("TTFT", s.ttft_s);
  row("TPOT", s.tpot_s);
  row("latency", s.e2e_s);
  if (!s.first_error.empty()) std::printf("\n  first error: %s\n", s.first_error.c_str());
}

bool write_summary_json(const BenchSummary& s, const std::string& path) {
  nlohmann::json j = {{"mode", s.mode},
                      {"concurrency", s.concurrency},
                      {"rate", s.rate},
                      {"requests", s.n_requests},
                      {"errors", s.n_errors},
                      {"wall_s", s.wall_s},
                      {"requests_per_s", s.requests_per_s},
                      {"output_tokens_per_s", s.output_tokens_per_s},
                      {"total_tokens_per_s", s.total_tokens_per_s},
                      {"prompt_tokens", s.prompt_tokens},
                      {"output_tokens", s.output_tokens},
                      {"ttft_s", percentiles_json(s.ttft_s)},
                      {"tpot_s", percentiles_json(s.tpot_s)},
                      {"latency_s", percentiles_json(s.e2e_s)},
                      {"first_error", s.first_error}};
  std::ofstream f(path);
  f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return static_cast<bool>(f);
}

}  // namespace brigade::tools
