// Embedding brigade in your own program: a small batch service.
//
//   batch_service --model DIR [--topology FILE] [--max-tokens N] [--budget-ms MS] < prompts.txt
//
// It reads one prompt per line, submits them all at once to one Engine (the actors run inside
// this process; continuous batching puts them in the same steps), collects each request's
// streamed text in its callback, cancels any request still running after --budget-ms, and
// prints one line per prompt plus the engine's counters. Everything it uses is the public API in
// include/brigade/engine.h; a service of your own starts the same way.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "brigade/engine.h"

namespace {

// What the callbacks fill in. Callbacks run on engine threads, so the state is behind a mutex.
struct Job {
  std::string prompt;
  uint64_t id = 0;
  std::string text;
  int tokens = 0;
  brigade::FinishReason finish = brigade::FinishReason::none;
  std::string error;
};

struct Jobs {
  std::mutex mu;
  std::condition_variable done_cv;
  std::vector<Job> jobs;
  size_t done = 0;
};

int usage(const char* why) {
  std::fprintf(stderr, "batch_service: %s\nusage: batch_service --model DIR [--topology FILE] [--max-tokens N] "
               "[--budget-ms MS] < prompts.txt\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, topology_file;
  int max_tokens = 32;
  long budget_ms = 10'000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(("missing the value of " + arg).c_str());
    const char* value = argv[++i];
    if (arg == "--model") model = value;
    else if (arg == "--topology") topology_file = value;
    else if (arg == "--max-tokens") max_tokens = std::atoi(value);
    else if (arg == "--budget-ms") budget_ms = std::atol(value);
    else return usage(("unknown option " + arg).c_str());
  }
  if (model.empty()) return usage("--model is required");

  // 1. The engine: a topology (the default one CPU executor, or a YAML file) and a model.
  brigade::EngineOptions options;
  options.model_path = model;
  options.progress = false;
  if (!topology_file.empty()) {
    auto topology = brigade::load_topology_file(topology_file);
    if (!topology) return usage(topology.status().to_string().c_str());
    options.topology = *topology;
  }
  auto engine = brigade::Engine::create(options);
  if (!engine) {
    std::fprintf(stderr, "batch_service: %s\n", engine.status().to_string().c_str());
    return 1;
  }

  // 2. Submit every prompt; each callback appends its request's text as it streams.
  Jobs state;
  for (std::string line; std::getline(std::cin, line);)
    if (!line.empty()) state.jobs.push_back(Job{.prompt = line});
  for (size_t i = 0; i < state.jobs.size(); ++i) {
    brigade::GenerateOptions request;
    request.prompt = state.jobs[i].prompt;
    request.max_tokens = max_tokens;
    request.sampling.temperature = 0.0f;  // greedy: the same prompt gives the same text every run
    auto id = (*engine)->submit(request, [&state, i](const brigade::Event& ev) {
      std::lock_guard lock(state.mu);
      Job& job = state.jobs[i];
      job.text += ev.text;
      job.tokens += static_cast<int>(ev.token_ids.size());
      if (ev.finish == brigade::FinishReason::none) return;
      job.finish = ev.finish;
      job.error = ev.error;
      ++state.done;
      state.done_cv.notify_all();
    });
    std::lock_guard lock(state.mu);
    if (id) {
      state.jobs[i].id = *id;
    } else {  // refused at submit (a bad parameter, a full queue): no events will come
      state.jobs[i].finish = brigade::FinishReason::error;
      state.jobs[i].error = id.status().to_string();
      ++state.done;
    }
  }

  // 3. Wait for all of them, cancelling whatever is still running when the budget is spent.
  {
    std::unique_lock lock(state.mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
    if (!state.done_cv.wait_until(lock, deadline, [&] { return state.done == state.jobs.size(); })) {
      for (const Job& job : state.jobs)
        if (job.finish == brigade::FinishReason::none) (*engine)->cancel(job.id);
      // A cancelled request still ends with one last event (finish = abort).
      state.done_cv.wait(lock, [&] { return state.done == state.jobs.size(); });
    }
  }

  // 4. Results and the engine's counters.
  for (const Job& job : state.jobs) {
    std::printf("[%s] %d tokens: %s%s%s\n", brigade::finish_reason_name(job.finish), job.tokens, job.text.c_str(),
                job.error.empty() ? "" : "  error: ", job.error.c_str());
  }
  const brigade::EngineStats s = (*engine)->stats();
  std::printf("engine: %llu requests, %llu prompt tokens, %llu generated tokens in %llu steps\n",
              static_cast<unsigned long long>(s.requests_done), static_cast<unsigned long long>(s.prompt_tokens),
              static_cast<unsigned long long>(s.generated_tokens), static_cast<unsigned long long>(s.steps));
  return 0;
}
