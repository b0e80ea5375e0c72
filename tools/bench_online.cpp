#include "tools/bench_online.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "server/http_client.h"

namespace brigade::tools {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

RequestResult run_online_request(const OnlineLoad& a, const RequestSpec& spec, uint64_t seed) {
  nlohmann::json body = {{"prompt", spec.prompt},       {"max_tokens", spec.max_tokens},
                         {"temperature", a.temperature}, {"seed", seed},
                         {"ignore_eos", true},           {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  RequestResult r;
  server::SseSplitter split;
  std::vector<std::string> events;
  const auto t0 = Clock::now();
  Clock::time_point first{}, last{};
  bool seen_token = false;
  std::string error_text;
  auto res = server::http_stream(a.host, a.port, {"POST", "/v1/completions", body.dump(), a.api_key},
                                 [&](std::string_view piece) {
                                   const auto now = Clock::now();
                                   events.clear();
                                   split.feed(piece, events);
                                   for (const auto& e : events) {
                                     if (e == "[DONE]") continue;
                                     auto j = nlohmann::json::parse(e, nullptr, false);
                                     if (j.is_discarded()) continue;
                                     if (j.contains("error")) error_text = j["error"].value("message", "error");
                                     if (j.contains("usage") && j["usage"].is_object()) {
                                       r.prompt_tokens = j["usage"].value("prompt_tokens", 0);
                                       r.output_tokens = j["usage"].value("completion_tokens", 0);
                                     }
                                     if (j.contains("choices") && !j["choices"].empty()) {
                                       if (!seen_token) first = now;
                                       seen_token = true;
                                       last = now;
                                     }
                                   }
                                   if (!seen_token && !error_text.empty()) return false;
                                   return true;
                                 });
  r.e2e_s = since(t0, Clock::now());
  if (!res) {
    r.error = res.status().to_string();
    return r;
  }
  r.http_status = res->status;
  if (res->status != 200 || !error_text.empty() || !seen_token) {
    r.error = "HTTP " + std::to_string(res->status) + (error_text.empty() ? "" : ": " + error_text);
    return r;
  }
  r.ok = true;
  r.ttft_s = since(t0, first);
  if (r.output_tokens > 1) r.tpot_s = since(first, last) / (r.output_tokens - 1);
  return r;
}

}  // namespace

Expected<BenchSummary> run_online_load(const OnlineLoad& a) {
  auto health = server::http_request(a.host, a.port, {"GET", "/health", "", ""}, std::chrono::seconds(5));
  if (!health || health->status != 200) {
    return io_error("no server answers on " + a.host + ":" + std::to_string(a.port) +
                    ": start one with `brigade serve` (or pass --offline)");
  }
  const auto convs = make_conversations(a.workload);
  std::vector<std::vector<RequestResult>> results(convs.size());
  auto run_conversation = [&](size_t c) {
    for (size_t t = 0; t < convs[c].size(); ++t) {
      results[c].push_back(run_online_request(a, convs[c][t], a.workload.seed + c * 1000 + t));
    }
  };
  const auto t0 = Clock::now();
  std::atomic<size_t> next{0};  // the closed-loop workers' next conversation; outlives them (joined below)
  std::vector<std::thread> threads;
  if (a.rate > 0) {
    std::mt19937_64 rng(a.workload.seed ^ 0x9e3779b97f4a7c15ull);
    std::exponential_distribution<double> gap(a.rate);
    for (size_t c = 0; c < convs.size(); ++c) {
      if (c > 0) std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
      threads.emplace_back(run_conversation, c);
    }
  } else {
    for (int i = 0; i < a.concurrency; ++i) {
      threads.emplace_back([&] {
        for (size_t c = next++; c < convs.size(); c = next++) run_conversation(c);
      });
    }
  }
  for (auto& t : threads) t.join();
  const double wall = since(t0, Clock::now());
  std::vector<RequestResult> flat;
  for (auto& r : results) flat.insert(flat.end(), r.begin(), r.end());
  BenchSummary s = summarize(flat, wall);
  s.mode = "online";
  s.concurrency = a.rate > 0 ? 0 : a.concurrency;
  s.rate = a.rate;
  return s;
}

}  // namespace brigade::tools
