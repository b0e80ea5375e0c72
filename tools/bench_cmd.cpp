// `brigade bench`: load against a running `brigade serve` (online: fixed concurrency or Poisson
// arrivals, streamed completions, TTFT/TPOT measured at the client), or straight through an
// in-process Engine (--offline: every request submitted at once, throughput).
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "server/http_client.h"
#include "tools/bench_load.h"
#include "tools/commands.h"

namespace brigade::tools {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  Workload workload;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  int concurrency = 8;
  double rate = 0;  // > 0: Poisson arrivals
  float temperature = 0.0f;
  std::string json_path;
  bool offline = false;
  std::string model, topology;
  int threads = 0;
};

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

RequestResult run_online_request(const BenchArgs& a, const RequestSpec& spec, uint64_t seed) {
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

int run_online(const BenchArgs& a) {
  auto health = server::http_request(a.host, a.port, {"GET", "/health", "", ""}, std::chrono::seconds(5));
  if (!health || health->status != 200) {
    return fail(io_error("no server answers on " + a.host + ":" + std::to_string(a.port) +
                         ": start one with `brigade serve` (or pass --offline)"));
  }
  const auto convs = make_conversations(a.workload);
  std::vector<std::vector<RequestResult>> results(convs.size());
  auto run_conversation = [&](size_t c) {
    for (size_t t = 0; t < convs[c].size(); ++t) {
      results[c].push_back(run_online_request(a, convs[c][t], a.workload.seed + c * 1000 + t));
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  if (a.rate > 0) {
    std::mt19937_64 rng(a.workload.seed ^ 0x9e3779b97f4a7c15ull);
    std::exponential_distribution<double> gap(a.rate);
    for (size_t c = 0; c < convs.size(); ++c) {
      if (c > 0) std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
      threads.emplace_back(run_conversation, c);
    }
  } else {
    std::atomic<size_t> next{0};
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
  print_summary(s);
  if (!a.json_path.empty() && !write_summary_json(s, a.json_path)) {
    return fail(io_error("cannot write " + a.json_path));
  }
  return s.n_errors == 0 ? 0 : 1;
}

int run_offline(const BenchArgs& a) {
  auto model = model_or_default(a.model);
  if (!model) return fail(model.status());
  auto options = engine_options(a.topology, *model, a.threads);
  if (!options) return fail(options.status());
  auto engine = Engine::create(*options);
  if (!engine) return fail(engine.status());
  std::vector<RequestSpec> reqs;
  for (auto& conv : make_conversations(a.workload)) reqs.insert(reqs.end(), conv.begin(), conv.end());
  struct Track {
    Clock::time_point first, last;
    RequestResult r;
  };
  std::vector<Track> tracks(reqs.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t n_done = 0;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) {
    GenerateOptions g;
    g.prompt_ids = reqs[i].prompt;
    g.max_tokens = reqs[i].max_tokens;
    g.ignore_eos = true;
    g.sampling.temperature = a.temperature;
    g.sampling.seed = a.workload.seed + i;
    auto id = (*engine)->submit(g, [&, i](const Event& ev) {
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(mu);
      Track& t = tracks[i];
      if (!ev.token_ids.empty()) {
        if (t.r.output_tokens == 0) t.first = now;
        t.last = now;
        t.r.output_tokens += static_cast<int>(ev.token_ids.size());
      }
      if (ev.finish == FinishReason::none) return;
      t.r.ok = ev.finish != FinishReason::error;
      t.r.error = ev.error;
      t.r.prompt_tokens = ev.prompt_tokens;
      t.r.e2e_s = since(t0, now);
      t.r.ttft_s = since(t0, t.first);
      if (t.r.output_tokens > 1) t.r.tpot_s = since(t.first, t.last) / (t.r.output_tokens - 1);
      ++n_done;
      cv.notify_all();
    });
    if (!id) return fail(id.status());
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return n_done == reqs.size(); });
  const double wall = since(t0, Clock::now());
  std::vector<RequestResult> flat;
  for (const auto& t : tracks) flat.push_back(t.r);
  BenchSummary s = summarize(flat, wall);
  s.mode = "offline";
  print_summary(s);
  if (!a.json_path.empty() && !write_summary_json(s, a.json_path)) return fail(io_error("cannot write " + a.json_path));
  return s.n_errors == 0 ? 0 : 1;
}

}  // namespace

void add_bench_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("bench", "Load generator: against `brigade serve` (online) or in-process (--offline)");
  auto a = std::make_shared<BenchArgs>();
  Workload& w = a->workload;
  cmd->add_option("--host", a->host, "Server address")->capture_default_str();
  cmd->add_option("--port", a->port, "Server port")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--api-key", a->api_key, "Bearer key for the server");
  cmd->add_option("--requests", w.n_requests, "Requests in all")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--concurrency", a->concurrency, "Clients each sending one request at a time")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--rate", a->rate, "Poisson arrivals per second instead of fixed concurrency (0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--input-len", w.input_len, "Prompt tokens (after the shared prefix)")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--input-len-max", w.input_len_max, "Uniform prompt length in [input-len, this] (0 = fixed)");
  cmd->add_option("--output-len", w.output_len, "Output tokens")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--output-len-max", w.output_len_max, "Uniform output length in [output-len, this] (0 = fixed)");
  cmd->add_option("--shared-prefix", w.shared_prefix, "Tokens every prompt starts with")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--turns", w.turns, "Requests per conversation (multi-turn; each extends the last)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--temperature", a->temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--seed", w.seed, "Workload and sampling seed")->capture_default_str();
  cmd->add_option("--json", a->json_path, "Also write the numbers to this JSON file");
  cmd->add_flag("--offline", a->offline, "Run an Engine in-process and submit every request at once");
  cmd->add_option("--model", a->model, "Offline: checkpoint (default: the synthetic 100M model)");
  cmd->add_option("--topology", a->topology, "Offline: topology YAML");
  cmd->add_option("--threads", a->threads, "Offline: CPU threads (0 = all cores)");
  cmd->callback([a, &run] { run = [a] { return a->offline ? run_offline(*a) : run_online(*a); }; });
}

}  // namespace brigade::tools
