// `brigade demo`: the main job. Makes the default synthetic model when absent, then runs several
// concurrent prompts through the actor topology and prints their text and the throughput.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "tools/commands.h"

namespace brigade::tools {

namespace {

struct DemoArgs {
  std::string model;
  int requests = 8;
  int max_tokens = 48;
  std::string topology;
  int threads = 0;
};

const char* kPrompts[] = {
    "The kitchen brigade",   "Once upon a time",        "In a distant galaxy", "The actor model",
    "Paged attention means", "A radix tree stores",     "def fibonacci(n):",   "Bonjour, je m'appelle",
    "1, 2, 3, 4,",           "The quick brown fox",     "Dear diary,",         "Breaking news:",
};

int run_demo(const DemoArgs& a) {
  std::string model = a.model;
  if (model.empty()) {
    model = default_model_dir();
    Status st = ensure_default_model(model);
    if (!st.is_ok()) return fail(st);
  }
  auto options = engine_options(a.topology, model, a.threads);
  if (!options) return fail(options.status());
  const auto t_load = std::chrono::steady_clock::now();
  auto engine = Engine::create(*options);
  if (!engine) return fail(engine.status());
  const auto& m = (*engine)->model();
  std::printf("model %s: %s, %.1fM parameters, %.0f MiB of weights, context %d\n", model.c_str(), m.arch.c_str(),
              static_cast<double>(m.n_params) / 1e6, static_cast<double>(m.weight_bytes) / (1 << 20), m.max_context);
  std::printf("loaded in %.2f s; running %d concurrent requests of %d tokens\n\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count(), a.requests,
              a.max_tokens);

  struct Result {
    std::string prompt, text;
    int n_tokens = 0;
    double ttft = 0, total = 0;
    FinishReason finish = FinishReason::none;
    std::string error;
  };
  std::vector<Result> results(static_cast<size_t>(a.requests));
  std::mutex mu;
  std::condition_variable cv;
  int n_done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.requests; ++i) {
    GenerateOptions r;
    r.prompt = kPrompts[static_cast<size_t>(i) % std::size(kPrompts)];
    r.max_tokens = a.max_tokens;
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.ignore_eos = true;
    results[static_cast<size_t>(i)].prompt = r.prompt;
    auto id = (*engine)->submit(r, [&, i](const Event& ev) {
      std::lock_guard<std::mutex> lock(mu);
      Result& res = results[static_cast<size_t>(i)];
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (res.n_tokens == 0 && !ev.token_ids.empty()) res.ttft = now;
      res.n_tokens += static_cast<int>(ev.token_ids.size());
      res.text += ev.text;
      if (ev.finish != FinishReason::none) {
        res.finish = ev.finish;
        res.error = ev.error;
        res.total = now;
        ++n_done;
        cv.notify_all();
      }
    });
    if (!id) return fail(id.status());
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return n_done == a.requests; });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int total_tokens = 0;
  for (const auto& r : results) {
    total_tokens += r.n_tokens;
    std::printf("--- %s\n%s%s\n", r.prompt.c_str(), r.prompt.c_str(), r.text.c_str());
    if (r.finish == FinishReason::error) std::printf("[error: %s]\n", r.error.c_str());
  }
  std::printf("\n%-4s %8s %10s %10s %12s\n", "req", "tokens", "ttft_s", "total_s", "tokens/s");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    std::printf("%-4zu %8d %10.3f %10.3f %12.1f\n", i, r.n_tokens, r.ttft, r.total,
                r.total > 0 ? r.n_tokens / r.total : 0.0);
  }
  std::printf("\n%d requests, %d tokens in %.2f s: %.1f tokens/s aggregate\n", a.requests, total_tokens, wall,
              total_tokens / wall);
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("demo", "The main job: concurrent prompts through the default model");
  auto a = std::make_shared<DemoArgs>();
  cmd->add_option("--model", a->model, "Checkpoint (default: the synthetic 100M model, made when absent)");
  cmd->add_option("--requests", a->requests, "Concurrent requests")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens per request")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--topology", a->topology, "Topology YAML");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)");
  cmd->callback([a, &run] { run = [a] { return run_demo(*a); }; });
}

}  // namespace brigade::tools
