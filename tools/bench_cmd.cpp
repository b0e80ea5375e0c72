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
#include "tools/bench_online.h"
#include "tools/commands.h"

namespace brigade::tools {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  OnlineLoad load;  // the workload, and the server for online runs
  std::string json_path;
  bool offline = false;
  std::string model, topology;
  int threads = 0;
  bool launch_nodes = false;
};

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

// The server's roofline counters now (empty when /metrics cannot be read).
EngineStats server_roofline(const OnlineLoad& load) {
  auto m = server::http_request(load.host, load.port, {"GET", "/metrics", "", ""});
  return m && m->status == 200 ? roofline_from_metrics(m->body) : EngineStats{};
}

int run_online(const BenchArgs& a) {
  const EngineStats before = server_roofline(a.load);
  auto s = run_online_load(a.load);
  if (!s) return fail(s.status());
  print_summary(*s);
  print_roofline(roofline_between(before, server_roofline(a.load)));
  if (!a.json_path.empty() && !write_summary_json(*s, a.json_path)) {
    return fail(io_error("cannot write " + a.json_path));
  }
  return s->n_errors == 0 ? 0 : 1;
}

int run_offline(const BenchArgs& a) {
  auto options = engine_options(a.topology, a.model, a.threads, /*default_model=*/true);
  if (!options) return fail(options.status());
  auto nodes = launch_nodes(a.launch_nodes, a.topology, *options, a.threads, {});
  if (!nodes) return fail(nodes.status());
  auto engine = Engine::create(*options);
  if (!engine) return fail(engine.status());
  std::vector<RequestSpec> reqs;
  for (auto& conv : make_conversations(a.load.workload)) reqs.insert(reqs.end(), conv.begin(), conv.end());
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
    g.sampling.temperature = a.load.temperature;
    g.sampling.seed = a.load.workload.seed + i;
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
  print_roofline((*engine)->stats());
  if (!a.json_path.empty() && !write_summary_json(s, a.json_path)) return fail(io_error("cannot write " + a.json_path));
  return s.n_errors == 0 ? 0 : 1;
}

}  // namespace

void add_bench_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("bench", "Load generator: against `brigade serve` (online) or in-process (--offline)");
  auto a = std::make_shared<BenchArgs>();
  Workload& w = a->load.workload;
  cmd->add_option("--host", a->load.host, "Server address")->capture_default_str();
  cmd->add_option("--port", a->load.port, "Server port")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--api-key", a->load.api_key, "Bearer key for the server");
  cmd->add_option("--requests", w.n_requests, "Requests in all")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--concurrency", a->load.concurrency, "Clients each sending one request at a time")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--rate", a->load.rate, "Poisson arrivals per second instead of fixed concurrency (0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--input-len", w.input_len, "Prompt tokens (after the shared prefix)")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--input-len-max", w.input_len_max, "Uniform prompt length in [input-len, this] (0 = fixed)");
  cmd->add_option("--output-len", w.output_len, "Output tokens")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--output-len-max", w.output_len_max, "Uniform output length in [output-len, this] (0 = fixed)");
  cmd->add_option("--shared-prefix", w.shared_prefix, "Tokens every prompt starts with")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--prefix-groups", w.prefix_groups, "Distinct shared prefixes; conversations take turns using them")
      ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--turns", w.turns, "Requests per conversation (multi-turn; each extends the last)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--temperature", a->load.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--seed", w.seed, "Workload and sampling seed")->capture_default_str();
  cmd->add_option("--json", a->json_path, "Also write the numbers to this JSON file");
  cmd->add_flag("--offline", a->offline, "Run an Engine in-process and submit every request at once");
  cmd->add_option("--model", a->model, "Offline: checkpoint (default: the synthetic 100M model)");
  cmd->add_option("--topology", a->topology, "Offline: topology YAML");
  cmd->add_option("--threads", a->threads, "Offline: CPU threads (0 = all cores)");
  add_launch_flag(cmd, a->launch_nodes);
  cmd->callback([a, &run] {
    run = [a] {
      if (a->launch_nodes && !a->offline)
        return fail(invalid_argument("--launch-nodes starts an offline run's nodes; a server given --port starts its own"));
      return a->offline ? run_offline(*a) : run_online(*a);
    };
  });
}

}  // namespace brigade::tools
