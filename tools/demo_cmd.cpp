// `brigade demo`: the main job (README command one). Makes the default synthetic model when
// absent, starts the OpenAI-compatible server on it (127.0.0.1, a free port), shows one chat
// completion, drives the server with a short load of concurrent streaming clients, and prints the
// load generator's summary table with the server's own counters from /metrics.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "server/http_client.h"
#include "server/http_server.h"
#include "tools/bench_online.h"
#include "tools/commands.h"

namespace brigade::tools {

namespace {

struct DemoArgs {
  std::string model;
  std::string topology;
  int threads = 0;
  bool launch_nodes = false;
  OnlineLoad load;
};

// The sample lines of /metrics whose names start with one of `names` (no labels, no histograms).
std::string metric_lines(const std::string& metrics, std::initializer_list<const char*> names) {
  std::istringstream in(metrics);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    for (const char* n : names) {
      const std::string name(n);
      if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() && line[name.size()] == ' ') {
        out += "  " + line + "\n";
      }
    }
  }
  return out;
}

int run_demo(DemoArgs a) {
  auto options = engine_options(a.topology, a.model, a.threads, /*default_model=*/true);
  if (!options) return fail(options.status());
  const std::string* model = &options->model_path;
  auto nodes = launch_nodes(a.launch_nodes, a.topology, *options, a.threads, {});
  if (!nodes) return fail(nodes.status());
  const auto t_load = std::chrono::steady_clock::now();
  auto engine = Engine::create(*options);
  if (!engine) return fail(engine.status());
  const auto& m = (*engine)->model();
  std::printf("model %s: %s, %.1fM parameters, %.0f MiB of weights, context %d; loaded in %.2f s\n", model->c_str(),
              m.arch.c_str(), static_cast<double>(m.n_params) / 1e6, static_cast<double>(m.weight_bytes) / (1 << 20),
              m.max_context, std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());

  server::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.model_name = "brigade-demo";
  auto server = server::HttpServer::start(**engine, so);
  if (!server) return fail(server.status());
  a.load.host = so.host;
  a.load.port = (*server)->port();
  std::printf("server on http://%s:%d\n\n", so.host.c_str(), a.load.port);

  // One chat completion, as a client would send it (the synthetic model's weights are random, so
  // its text is too; the point is the path: template, tokenizer, scheduler, executor, detokenizer).
  const nlohmann::json chat = {
      {"model", so.model_name},
      {"messages", {{{"role", "user"}, {"content", "Say something about kitchens."}}}},
      {"max_tokens", 24},
      {"temperature", 0.8},
      {"seed", 1}};
  auto reply = server::http_request(a.load.host, a.load.port, {"POST", "/v1/chat/completions", chat.dump(), ""});
  if (!reply) return fail(reply.status());
  if (reply->status != 200) return fail(internal_error("chat completion failed: HTTP " + std::to_string(reply->status) + ": " + reply->body));
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices")) return fail(internal_error("chat completion: unexpected body " + reply->body));
  std::printf("POST /v1/chat/completions -> %s\n\n",
              j["choices"][0]["message"]["content"].get<std::string>().c_str());

  const Workload& w = a.load.workload;
  std::printf("load: %d streaming requests from %d concurrent clients, prompts of %d-%d tokens, %d-%d output tokens\n",
              w.n_requests, a.load.concurrency, w.input_len, std::max(w.input_len, w.input_len_max), w.output_len,
              std::max(w.output_len, w.output_len_max));
  auto summary = run_online_load(a.load);
  if (!summary) return fail(summary.status());
  print_summary(*summary);

  auto metrics = server::http_request(a.load.host, a.load.port, {"GET", "/metrics", "", ""});
  if (metrics && metrics->status == 200) {
    std::printf("\nserver counters (/metrics):\n%s",
                metric_lines(metrics->body, {"brigade_requests_finished_total", "brigade_prompt_tokens_total",
                                             "brigade_generation_tokens_total", "brigade_steps_total",
                                             "brigade_preemptions_total", "brigade_kv_pages_total",
                                             "brigade_kv_pages_used"})
                    .c_str());
  }
  print_roofline((*engine)->stats());
  (*server)->stop();
  server->reset();  // before the engine it serves
  return summary->n_errors == 0 ? 0 : 1;
}

}  // namespace

void add_demo_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("demo", "The main job: serve the default model and drive it with a short load");
  auto a = std::make_shared<DemoArgs>();
  Workload& w = a->load.workload;
  w.n_requests = 32;
  w.input_len = 32;
  w.input_len_max = 192;
  w.output_len = 32;
  w.output_len_max = 96;
  a->load.temperature = 0.8f;
  cmd->add_option("--model", a->model, "Checkpoint (default: the synthetic 100M model, made when absent)");
  cmd->add_option("--topology", a->topology, "Topology YAML");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)");
  add_launch_flag(cmd, a->launch_nodes);
  cmd->add_option("--requests", w.n_requests, "Requests in all")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--concurrency", a->load.concurrency, "Concurrent streaming clients")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->callback([a, &run] { run = [a] { return run_demo(*a); }; });
}

}  // namespace brigade::tools
