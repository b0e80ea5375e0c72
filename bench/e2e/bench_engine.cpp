// End-to-end engine benchmark (issue: foundation): decode tokens/s at 1, 8 and 32 concurrent
// sequences and prefill tokens/s for a 512-token prompt (--prefill-len N: N tokens) on the default
// model, each against the machine's ceilings measured in the same run (read bandwidth, f32 GEMM
// rate); and the time the actors add per step, with the model on a no-op backend.
//
//   build/bench/e2e/bench_engine [--model DIR|FILE.gguf] [--threads N] [--weights q8_0] [--json FILE] [--kv-memory-mb M]
//   build/bench/e2e/bench_engine --kv-context 1984   (bf16 vs int8 KV at a long context only)
//   build/bench/e2e/bench_engine --spec 4 [--model ../shared/testdata/models/stories260K.bin]
//                                    (n-gram speculative decoding on vs off only)
//   build/bench/e2e/bench_engine --spec 4 --draft-model D [--model M]
//                                    (a draft model's speculative decoding on vs off only)
//   build/bench/e2e/bench_engine --spec 3 --mtp --model M   (M's MTP module drafting vs off only)
//   build/bench/e2e/bench_engine --prompt-logprobs 5 [--prompt-len 2048]
//                                    (prefill with prompt logprobs vs without only)
//   build/bench/e2e/bench_engine --stations 2   (what stations add to a step: no-op backend)
//   build/bench/e2e/bench_engine --beam 4 [--prompt-len N, default 64]  (a beam search vs batch-4 decode only)
//   build/bench/e2e/bench_engine --turns 6 [--prompt-len 512] [--turn-tokens 64] [--decode-tokens 32] --model M
//                                    (a conversation with the prefix cache on vs off only)
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <tuple>

#include "bench/e2e/null_backend.h"
#include "brigade/engine.h"
#include "core/thread_pool.h"
#include "cpu/membw.h"
#include "models/make_model.h"
#include "cpu/openblas_core.h"

namespace brigade {
namespace {

using Clock = std::chrono::steady_clock;

struct RunStats {
  double wall_s = 0;
  double decode_tok_s = 0;   // tokens/s while every sequence was decoding
  double ttft_s = 0;         // mean time to first token
  int n_tokens = 0;
  int n_prompt_logprobs = 0;  // entries received (one per prompt token when asked)
};

// A run that has had no event for this long reports the engine's state and exits (status 3): a
// lost final event must show up as an error with what was pending, never as a silent hang.
std::chrono::seconds g_watchdog{900};

[[noreturn]] void report_hang(Engine& engine, const std::vector<double>& first, const std::vector<double>& finish,
                              size_t n_tokens) {
  std::fprintf(stderr, "bench_engine: no event for %lld s (%zu tokens received); pending requests:",
               static_cast<long long>(g_watchdog.count()), n_tokens);
  for (size_t b = 0; b < finish.size(); ++b) {
    if (finish[b] == 0) std::fprintf(stderr, " #%zu (first token %s)", b, first[b] < 0 ? "never" : "seen");
  }
  const EngineStats st = engine.stats();
  std::fprintf(stderr,
               "\nengine: running %d, waiting %d, steps %llu, done %llu, generated %llu, preemptions %llu, "
               "kv pages %d/%d, cache pages %d\n",
               st.n_running, st.n_waiting, static_cast<unsigned long long>(st.steps),
               static_cast<unsigned long long>(st.requests_done), static_cast<unsigned long long>(st.generated_tokens),
               static_cast<unsigned long long>(st.preemptions), st.kv_pages_used, st.kv_pages_total, st.cache_pages);
  std::fflush(stderr);
  std::_Exit(3);
}

// B concurrent requests of prompt_len tokens each, generating max_tokens greedily. period > 0:
// each prompt repeats its first `period` tokens (a workload whose output may copy its input).
RunStats run_batch(Engine& engine, int batch, int prompt_len, int max_tokens, int period = 0, int prompt_logprobs = -1) {
  std::mutex mu;
  std::condition_variable cv;
  int n_done = 0, n_prompt_logprobs = 0;
  std::vector<double> first(static_cast<size_t>(batch), -1), finish(static_cast<size_t>(batch), 0);
  std::vector<double> token_times;
  double last_event = 0;  // since t0
  const auto t0 = Clock::now();
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  for (int b = 0; b < batch; ++b) {
    GenerateOptions r;
    const int n_ids = std::min(20000, static_cast<int>(engine.model().vocab_size) - 3);  // small models too
    for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(3 + (b * 131 + (period > 0 ? i % period : i) * 17) % n_ids);
    r.max_tokens = max_tokens;
    r.prompt_logprobs = prompt_logprobs;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    auto id = engine.submit(r, [&, b](const Event& ev) {
      std::lock_guard<std::mutex> lock(mu);
      const double now = since();
      last_event = now;
      for (size_t k = 0; k < ev.token_ids.size(); ++k) token_times.push_back(now);
      n_prompt_logprobs += static_cast<int>(ev.prompt_logprobs.size());
      if (first[static_cast<size_t>(b)] < 0 && !ev.token_ids.empty()) first[static_cast<size_t>(b)] = now;
      if (ev.finish == FinishReason::error) {
        // A failed request would leave the run's numbers meaningless (no first token): say why.
        std::fprintf(stderr, "request %d failed: %s\n", b, ev.error.c_str());
        std::exit(1);
      }
      if (ev.finish != FinishReason::none) {
        finish[static_cast<size_t>(b)] = now;
        ++n_done;
        cv.notify_all();
      }
    });
    if (!id) {
      std::fprintf(stderr, "submit failed: %s\n", id.status().to_string().c_str());
      std::exit(1);
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  // A hang is a run with no event for the watchdog's time (a slow machine still makes progress).
  while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return n_done == batch; })) {
    if (since() - last_event > static_cast<double>(g_watchdog.count())) report_hang(engine, first, finish, token_times.size());
  }
  RunStats s;
  s.wall_s = since();
  s.n_tokens = static_cast<int>(token_times.size());
  s.n_prompt_logprobs = n_prompt_logprobs;
  const double start = *std::max_element(first.begin(), first.end());
  const double end = *std::min_element(finish.begin(), finish.end());
  const auto in_window = std::count_if(token_times.begin(), token_times.end(),
                                       [&](double t) { return t > start && t <= end; });
  s.decode_tok_s = end > start ? static_cast<double>(in_window) / (end - start) : 0.0;
  double sum = 0;
  for (double f : first) sum += f;
  s.ttft_s = sum / batch;
  return s;
}

// A station that passes everything and looks at every event: what a station costs by itself.
class PassThrough final : public Station {
 public:
  StationVerdict on_request(StationRequest&, StationContext&) override { return StationVerdict::pass(); }
  void on_event(const StationEvent& ev, StationContext&) override { n_tokens_ += ev.n_new_tokens; }

 private:
  int64_t n_tokens_ = 0;
};

// --weights: the executor's weight type for every engine the run makes ("auto" keeps the checkpoint's).
std::string g_weights = "auto";
// --mtp: speculative decoding with the model's MTP module (method mtp) instead of n-grams.
bool g_mtp = false;
bool g_partial_pages = true;  // cache.partial_pages of the engines make_engine builds
bool g_no_prefix_cache = false;  // --no-prefix-cache: cache.radix off in every engine make_engine builds

// Exits when the engine does not start, unless `optional` (then null, the reason printed).
int64_t g_kv_memory_mb = 512;

std::unique_ptr<Engine> make_engine(const std::string& model, int threads, bool null_backend, int max_running,
                                    const std::string& kv_dtype = "auto", int spec_tokens = 0,
                                    const std::string& draft_model = "", bool radix = true, int n_stations = 0,
                                    bool optional = false) {
  EngineOptions o;
  o.station_types["pass"] = [](const StationSpec&) -> Expected<std::unique_ptr<Station>> {
    return std::unique_ptr<Station>(std::make_unique<PassThrough>());
  };
  for (int i = 0; i < n_stations; ++i) o.topology.stations.push_back({"pass" + std::to_string(i), "pass", false, {}});
  o.model_path = model;
  o.progress = false;
  auto& inst = o.topology.instances.front();
  inst.executors.front().threads = threads;
  inst.executors.front().weights = g_weights;
  inst.scheduler.max_running = max_running;
  inst.scheduler.max_step_tokens = 512;
  inst.kv.memory_mb = g_kv_memory_mb;
  inst.kv.dtype = kv_dtype;
  inst.cache.radix = radix && !g_no_prefix_cache;
  inst.cache.partial_pages = g_partial_pages;
  if (null_backend) o.backend_factory = [] { return make_null_backend(); };
  if (spec_tokens > 0) {
    inst.scheduler.speculative.method = g_mtp ? "mtp" : draft_model.empty() ? "ngram" : "draft_model";
    inst.scheduler.speculative.model = draft_model;
    inst.scheduler.speculative.num_tokens = spec_tokens;
  }
  auto e = Engine::create(o);
  if (!e) {
    std::fprintf(stderr, "engine: %s\n", e.status().to_string().c_str());
    if (optional) return nullptr;
    std::exit(1);
  }
  return std::move(*e);
}

// A conversation on the prefix cache, on and off (cache.radix; for a recurrent model its state
// snapshots): the first turn a prompt_len-token prompt, each later turn the last prompt, its
// answer and turn_tokens new tokens; answers of decode_tokens greedy tokens. Per turn the prompt,
// the tokens the cache served and the time to the first token with and without it, and their
// ratio (same run, same machine: the ratio is what the cache buys).
nlohmann::json compare_turns(const std::string& model, int threads, int turns, int prompt_len, int turn_tokens,
                             int decode_tokens) {
  auto cached = make_engine(model, threads, false, 8, "auto", 0, "", /*radix=*/true);
  auto uncached = make_engine(model, threads, false, 8, "auto", 0, "", /*radix=*/false);
  const int n_ids = std::min(20000, static_cast<int>(cached->model().vocab_size) - 3);
  auto new_ids = [&](int turn, int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(3 + (turn * 7919 + i * 17) % n_ids);
    return v;
  };
  // One turn on an engine: (seconds to its first token, cached tokens, its answer).
  auto run_turn = [&](Engine& engine, const std::vector<int32_t>& prompt) {
    std::mutex mu;
    std::condition_variable cv;
    double first = -1;
    int cached_tokens = 0;
    bool done = false;
    std::vector<int32_t> answer;
    GenerateOptions r;
    r.prompt_ids = prompt;
    r.max_tokens = decode_tokens;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    const auto t0 = Clock::now();
    auto id = engine.submit(r, [&](const Event& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (first < 0 && !ev.token_ids.empty()) first = std::chrono::duration<double>(Clock::now() - t0).count();
      answer.insert(answer.end(), ev.token_ids.begin(), ev.token_ids.end());
      cached_tokens = std::max(cached_tokens, ev.cached_tokens);
      if (ev.finish == FinishReason::error) {
        std::fprintf(stderr, "turn failed: %s\n", ev.error.c_str());
        std::exit(1);
      }
      if (ev.finish != FinishReason::none) {
        done = true;
        cv.notify_all();
      }
    });
    if (!id) {
      std::fprintf(stderr, "submit failed: %s\n", id.status().to_string().c_str());
      std::exit(1);
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return std::make_tuple(first, cached_tokens, answer);
  };
  std::printf("\n%-6s %10s %10s %14s %14s %10s\n", "turn", "prompt", "cached", "TTFT on (ms)", "TTFT off (ms)",
              "on / off");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<int32_t> on_prompt = new_ids(0, prompt_len), off_prompt = on_prompt;
  double sum_on = 0, sum_off = 0;
  for (int t = 0; t < turns; ++t) {
    auto [on_s, on_cached, on_answer] = run_turn(*cached, on_prompt);
    auto [off_s, off_cached, off_answer] = run_turn(*uncached, off_prompt);
    std::printf("%-6d %10zu %10d %14.1f %14.1f %10.2f\n", t + 1, on_prompt.size(), on_cached, on_s * 1e3, off_s * 1e3,
                on_s / off_s);
    rows.push_back(nlohmann::json{{"turn", t + 1}, {"prompt_tokens", on_prompt.size()}, {"cached_tokens", on_cached},
                                  {"ttft_on_s", on_s}, {"ttft_off_s", off_s}});
    if (t > 0) {
      sum_on += on_s;
      sum_off += off_s;
    }
    const std::vector<int32_t> more = new_ids(t + 1, turn_tokens);
    on_prompt.insert(on_prompt.end(), on_answer.begin(), on_answer.end());
    on_prompt.insert(on_prompt.end(), more.begin(), more.end());
    off_prompt.insert(off_prompt.end(), off_answer.begin(), off_answer.end());
    off_prompt.insert(off_prompt.end(), more.begin(), more.end());
  }
  if (turns > 1) std::printf("turns 2..%d: TTFT with the cache %.2f of without\n", turns, sum_on / sum_off);
  const EngineStats st = cached->stats();
  std::printf("cache: %llu hit tokens, %llu state snapshots saved, %llu restored\n",
              static_cast<unsigned long long>(st.cache_hit_tokens), static_cast<unsigned long long>(st.cache_state_saves),
              static_cast<unsigned long long>(st.cache_state_restores));
  return {{"turns", rows}, {"ttft_ratio_later_turns", turns > 1 ? sum_on / sum_off : 0.0}};
}

// Decode at batch 8 after a `context`-token prompt, with bf16 and with int8 KV (alternating runs,
// best of `repeats` each, so load on a shared machine hits both alike). KV bytes per token come
// from the pages that kv.memory_mb holds. Returns the JSON of the section.
nlohmann::json compare_kv_dtypes(const std::string& model, int threads, int context, int decode_tokens, int repeats) {
  constexpr int kBatch = 8;
  const std::vector<std::string> dtypes = {"bf16", "int8"};
  std::vector<std::unique_ptr<Engine>> engines;
  for (const std::string& t : dtypes) engines.push_back(make_engine(model, threads, false, kBatch, t));
  std::vector<double> best(dtypes.size(), 0.0);
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < dtypes.size(); ++i)
      best[i] = std::max(best[i], run_batch(*engines[i], kBatch, context, decode_tokens).decode_tok_s);
  nlohmann::json out;
  std::printf("\n%-22s %12s %14s %12s\n", "decode, KV dtype", "tokens/s", "KV bytes/tok", "vs bf16");
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const EngineStats st = engines[i]->stats();
    const double bytes_per_token = 512.0 * 1024 * 1024 / st.kv_pages_total / 16;
    std::printf("%-4s batch %d ctx %-7d %12.1f %14.0f %11.2fx\n", dtypes[i].c_str(), kBatch, context, best[i],
                bytes_per_token, best[i] / best[0]);
    out.push_back({{"kv_dtype", dtypes[i]}, {"batch", kBatch}, {"context", context}, {"tokens_per_s", best[i]},
                   {"kv_bytes_per_token", bytes_per_token}});
  }
  return out;
}

// Speculative decoding (the n-gram drafter, or draft_model when given; k = spec_tokens) against
// plain decoding: greedy decode of `batch` sequences whose prompts repeat a 16-token pattern,
// after a 64-token prompt; alternating runs, best of `repeats` each. Tokens per step, the
// acceptance rate and the draft model's share of the time come from EngineStats over the
// measured runs.
nlohmann::json compare_speculation(const std::string& model, int threads, int spec_tokens, int decode_tokens,
                                   int repeats, const std::string& draft_model) {
  nlohmann::json out;
  std::printf("\n%-24s %12s %12s %12s %12s %14s %12s\n", "decode, speculation", "tokens/s", "vs off", "tokens/step",
              "acceptance", "no-draft steps", "draft ms/tok");
  for (int batch : {1, 8}) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (int k : {0, spec_tokens}) engines.push_back(make_engine(model, threads, false, batch, "auto", k, draft_model));
    for (auto& e : engines) run_batch(*e, batch, 64, 8, 16);  // warm-up
    std::vector<EngineStats> before;
    for (auto& e : engines) before.push_back(e->stats());
    std::vector<double> best(engines.size(), 0.0);
    for (int r = 0; r < repeats; ++r)
      for (size_t i = 0; i < engines.size(); ++i)
        best[i] = std::max(best[i], run_batch(*engines[i], batch, 64, decode_tokens, 16).decode_tok_s);
    for (size_t i = 0; i < engines.size(); ++i) {
      const EngineStats a = engines[i]->stats(), &b = before[i];
      // The prompts of a run take one step, which gives every sequence its first token.
      const double steps = static_cast<double>(a.steps - b.steps);
      const double per_step = static_cast<double>(a.generated_tokens - b.generated_tokens) / steps;
      const uint64_t drafted = a.spec_draft_tokens - b.spec_draft_tokens;
      const double acceptance =
          drafted > 0 ? static_cast<double>(a.spec_accepted_tokens - b.spec_accepted_tokens) / static_cast<double>(drafted) : 0.0;
      // Steps the load rule planned without drafts (the last step was compute-bound).
      const uint64_t off_steps = (a.spec_off_compute_bound_steps - b.spec_off_compute_bound_steps) +
                                 (a.spec_off_batch_steps - b.spec_off_batch_steps);
      // The draft model's forward time per generated token (all measured runs).
      const double draft_ms = static_cast<double>(a.spec_draft_forward_us - b.spec_draft_forward_us) * 1e-3 /
                              static_cast<double>(a.generated_tokens - b.generated_tokens);
      const std::string name = i == 0 ? "off" : (g_mtp ? "mtp" : draft_model.empty() ? "ngram" : "draft") + std::string(" k=") +
                                                    std::to_string(spec_tokens);
      std::printf("%-10s batch %-12d %12.1f %11.2fx %12.2f %12.2f %14llu %12.2f\n", name.c_str(), batch, best[i],
                  best[i] / best[0], per_step, acceptance, static_cast<unsigned long long>(off_steps), draft_ms);
      out.push_back({{"speculation", name}, {"batch", batch}, {"tokens_per_s", best[i]}, {"tokens_per_step", per_step},
                     {"acceptance", acceptance}, {"draft_tokens", drafted}, {"no_draft_steps", off_steps},
                     {"draft_ms_per_token", draft_ms}});
    }
  }
  return out;
}

// Prefill tokens/s of one prompt_len-token prompt (time to its first token) without and with
// prompt logprobs (top k), alternating runs, best of `repeats` each. The radix cache is off: a
// repeated prompt would otherwise skip its prefill in the runs without prompt logprobs.
nlohmann::json compare_prompt_logprobs(const std::string& model, int threads, int prompt_len, int k, int repeats) {
  auto engine = make_engine(model, threads, false, 4, "auto", 0, "", /*radix=*/false);
  run_batch(*engine, 1, 256, 1);  // warm-up: page faults, thread start
  std::printf("%-32s %10s %10s %9s %12s\n", "prefill", "tokens/s", "ttft ms", "relative", "step GFLOP");
  nlohmann::json out = nlohmann::json::array();
  double best[2] = {0.0, 0.0}, step_gflops[2] = {0.0, 0.0};  // the roofline's count of the work
  for (int r = 0; r < repeats; ++r) {
    for (int with = 0; with < 2; ++with) {
      const uint64_t flops = engine->stats().step_flops;
      const RunStats s = run_batch(*engine, 1, prompt_len, 1, 0, with ? k : -1);
      if (s.n_prompt_logprobs != (with ? prompt_len : 0)) {
        std::fprintf(stderr, "got %d prompt logprobs for a %d-token prompt\n", s.n_prompt_logprobs, prompt_len);
        std::exit(1);
      }
      best[with] = std::max(best[with], prompt_len / s.ttft_s);
      step_gflops[with] = static_cast<double>(engine->stats().step_flops - flops) / 1e9;
    }
  }
  for (int with = 0; with < 2; ++with) {
    const std::string name = with ? "prompt_logprobs " + std::to_string(k) : "without";
    std::printf("%-32s %10.1f %10.1f %8.2fx %12.1f\n", (name + ", " + std::to_string(prompt_len) + " tokens").c_str(),
                best[with], 1e3 * prompt_len / best[with], best[with] / best[0], step_gflops[with]);
    out.push_back({{"prompt_logprobs", with ? k : -1}, {"prompt_tokens", prompt_len}, {"tokens_per_s", best[with]},
                   {"step_gflops", step_gflops[with]}});
  }
  return out;
}

// Orchestration (no-op backend) with 0 and with n pass-through stations: the step period and
// what the actors add to it, alternating runs, best of `repeats` each.
nlohmann::json compare_stations(const std::string& model, int threads, int n_stations, int repeats) {
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-26s %12s %14s %14s\n", "orchestration, stations", "us/step", "actors us", "vs none");
  for (int batch : {1, 32}) {
    std::vector<std::unique_ptr<Engine>> engines;
    for (int n : {0, n_stations}) engines.push_back(make_engine(model, threads, true, 64, "auto", 0, "", true, n));
    double best[2] = {1e30, 1e30}, best_actor[2] = {1e30, 1e30};
    for (int r = 0; r < repeats; ++r) {
      for (int i = 0; i < 2; ++i) {
        run_batch(*engines[i], batch, 4, 8);
        const EngineStats before = engines[i]->stats();
        const RunStats s = run_batch(*engines[i], batch, 4, 512);
        const EngineStats after = engines[i]->stats();
        const double steps = static_cast<double>(after.steps - before.steps);
        const double us = s.wall_s * 1e6 / steps;
        best[i] = std::min(best[i], us);
        best_actor[i] = std::min(best_actor[i], us - static_cast<double>(after.executor_us - before.executor_us) / steps);
      }
    }
    for (int i = 0; i < 2; ++i) {
      const int n = i == 0 ? 0 : n_stations;
      std::printf("%-2d stations, batch %-10d %12.1f %14.1f %13.2fx\n", n, batch, best[i], best_actor[i], best[i] / best[0]);
      out.push_back({{"stations", n}, {"batch", batch}, {"us_per_step", best[i]}, {"actor_us_per_step", best_actor[i]}});
    }
  }
  return out;
}

// A beam search of width W (Engine::beam_search: a request per beam and step) against greedy
// decoding of W sequences (one request each) over the same prompt length and tokens, with the
// prefix cache on (with partly filled pages, and whole pages only) and off: tokens/s of the W beams as a fraction of batch-W decode's, and the
// tokens each beam computes per step (the cache serves the rest; 1 is the floor). Alternating
// runs, best of `repeats` each.
nlohmann::json compare_beam_search(const std::string& model, int threads, int width, int prompt_len, int decode_tokens,
                                   int repeats) {
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-28s %12s %10s %16s %14s %14s\n", "beam search", "tokens/s", "vs decode", "computed/beam/step",
              "cached/step", "steps/search step");
  BeamSearchOptions beam;  // ids under 503: inside every model's vocabulary (stories260K has 512)
  for (int i = 0; i < prompt_len; ++i) beam.prompt_ids.push_back(3 + (i * 17) % 500);
  beam.beam_width = width;
  beam.max_tokens = decode_tokens;
  beam.ignore_eos = true;
  // The cache with partly filled pages (the default), with whole pages only, and off.
  for (const std::string mode : {"pages+rows", "whole pages", "off"}) {
    const bool radix = mode != "off";
    g_partial_pages = mode == "pages+rows";
    auto engine = make_engine(model, threads, false, std::max(64, 2 * width), "auto", 0, "", radix);
    g_partial_pages = true;
    run_batch(*engine, width, prompt_len, 4);  // warm-up
    double best_decode = 0.0, best_beam = 0.0, computed = 0.0, cached = 0.0, engine_steps = 0.0;
    for (int r = 0; r < repeats; ++r) {
      best_decode = std::max(best_decode, run_batch(*engine, width, prompt_len, decode_tokens).decode_tok_s);
      const EngineStats before = engine->stats();
      const auto t0 = Clock::now();
      auto result = engine->beam_search(beam);
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!result) {
        std::fprintf(stderr, "beam search failed: %s\n", result.status().to_string().c_str());
        std::exit(1);
      }
      const EngineStats after = engine->stats();
      const double beam_steps = static_cast<double>(width) * result->steps;
      best_beam = std::max(best_beam, beam_steps / wall);
      computed = static_cast<double>(after.step_tokens - before.step_tokens) / beam_steps;
      cached = static_cast<double>(after.cache_hit_tokens - before.cache_hit_tokens) / beam_steps;
      // Engine steps per search step: 1 when a step's W requests are planned together.
      engine_steps = static_cast<double>(after.steps - before.steps) / result->steps;
    }
    const std::string name = "width " + std::to_string(width) + ", cache " + mode;
    std::printf("%-28s %12.1f %9.2fx %16.1f %14.1f %14.2f\n", name.c_str(), best_beam, best_beam / best_decode, computed,
                cached, engine_steps);
    std::printf("%-28s %12.1f\n", ("decode batch " + std::to_string(width)).c_str(), best_decode);
    out.push_back({{"beam_width", width}, {"radix", radix}, {"partial_pages", mode == "pages+rows"},
                   {"prompt_tokens", prompt_len}, {"tokens", decode_tokens},
                   {"beam_tokens_per_s", best_beam}, {"decode_tokens_per_s", best_decode},
                   {"fraction_of_decode", best_beam / best_decode}, {"computed_tokens_per_beam_step", computed},
                   {"cached_tokens_per_beam_step", cached}, {"engine_steps_per_search_step", engine_steps}});
  }
  return out;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  using namespace brigade;
  cpu::reexec_for_openblas_core(argv);  // as the brigade command does (cpu/openblas_core.h)
  CLI::App app{"brigade end-to-end engine benchmark"};
  std::string model, json_path;
  int threads = 0;
  int decode_tokens = 64;
  bool orchestration_only = false;
  int kv_context = 0;
  int kv_repeats = 2;
  int turns = 0, turn_tokens = 64;
  int n_stations = 0;
  app.add_option("--model", model, "Checkpoint (default: the synthetic 100M model, made when absent)");
  app.add_option("--threads", threads, "CPU threads (0 = all cores)");
  app.add_option("--decode-tokens", decode_tokens, "Tokens generated per sequence")->capture_default_str();
  app.add_option("--json", json_path, "Write the numbers as JSON");
  app.add_option("--kv-memory-mb", g_kv_memory_mb,
                 "kv.memory_mb of the engines (a recurrent model's states come out of it too)")->capture_default_str();
  app.add_flag("--orchestration-only", orchestration_only, "Run only the no-op backend section");
  app.add_option("--kv-context", kv_context,
                 "Only compare bf16 and int8 KV: decode at batch 8 after prompts of this many tokens");
  app.add_option("--kv-repeats", kv_repeats, "Runs per KV dtype in --kv-context (best counts)")->capture_default_str();
  int spec_tokens = 0;
  app.add_option("--spec", spec_tokens,
                 "Only compare n-gram speculative decoding with this many drafts against plain decoding, "
                 "on prompts that repeat themselves (runs per setting: --kv-repeats)");
  std::string draft_model;
  app.add_option("--draft-model", draft_model, "With --spec: draft with this model instead of n-grams");
  app.add_flag("--mtp", g_mtp, "With --spec: draft with the model's MTP module (DeepSeek-V3's; method mtp)");
  int prompt_logprobs = -1, prompt_len = 2048;
  app.add_option("--prompt-logprobs", prompt_logprobs,
                 "Only compare prefill with these top-k prompt logprobs against prefill without (runs: --kv-repeats)");
  app.add_option("--stations", n_stations, "Only compare orchestration without and with this many pass-through stations");
  app.add_option("--weights", g_weights,
                 "Weight type after load (auto, f32, bf16, q8_0, q4_0): e.g. the default model's decode quantized")
      ->capture_default_str();
  app.add_option("--prompt-len", prompt_len, "With --prompt-logprobs: the prompt's tokens")->capture_default_str();
  int prefill_len = 512;
  app.add_option("--prefill-len", prefill_len,
                 "The prefill section's prompt tokens (taken 512 per step: longer prompts are chunked)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16384));
  int watchdog_s = static_cast<int>(g_watchdog.count());
  app.add_option("--watchdog-s", watchdog_s,
                 "A run with no event for this many seconds prints what is pending and exits 3")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  int beam_width = 0;
  app.add_option("--turns", turns,
                 "Only compare a conversation of this many turns with the prefix cache on and off (first prompt: "
                 "--prompt-len, default 512; answers: --decode-tokens, default 32)");
  app.add_flag("--no-prefix-cache", g_no_prefix_cache,
               "The engines run without the prefix cache (cache.radix: false; a recurrent model's state "
               "snapshots with it)");
  app.add_option("--turn-tokens", turn_tokens, "With --turns: new tokens per turn")->capture_default_str();
  app.add_option("--beam", beam_width,
                 "Only compare a beam search of this width against decoding as many sequences (prompt: --prompt-len)");
  CLI11_PARSE(app, argc, argv);
  g_watchdog = std::chrono::seconds(watchdog_s);

  if (model.empty()) {
    model = ".brigade/models/default-llama-100m";
    if (!std::filesystem::exists(model + "/model.safetensors")) {
      std::fprintf(stderr, "writing the default synthetic model to %s\n", model.c_str());
      Status st = write_synthetic_model(SyntheticModelSpec{}, model);
      if (!st.is_ok()) {
        std::fprintf(stderr, "%s\n", st.to_string().c_str());
        return 1;
      }
    }
  }

  nlohmann::json out;
  if (turns > 0 && g_no_prefix_cache) {
    std::fprintf(stderr, "--turns compares the prefix cache on and off itself: leave out --no-prefix-cache\n");
    return 2;
  }
  if (turns > 0) {
    const int first_prompt = app.count("--prompt-len") > 0 ? prompt_len : 512;
    const int answer = app.count("--decode-tokens") > 0 ? decode_tokens : 32;
    out["turns"] = compare_turns(model, threads, turns, first_prompt, turn_tokens, answer);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  if (beam_width > 0) {
    const int beam_prompt = app.count("--prompt-len") > 0 ? prompt_len : 64;
    out["beam_search"] = compare_beam_search(model, threads, beam_width, beam_prompt, decode_tokens, kv_repeats);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  if (n_stations > 0) {
    out["stations"] = compare_stations(model, threads, n_stations, kv_repeats);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  if (prompt_logprobs >= 0) {
    out["prompt_logprobs"] = compare_prompt_logprobs(model, threads, prompt_len, prompt_logprobs, kv_repeats);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  if (spec_tokens > 0) {
    out["speculation"] = compare_speculation(model, threads, spec_tokens, decode_tokens, kv_repeats, draft_model);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  if (kv_context > 0) {
    out["kv_dtypes"] = compare_kv_dtypes(model, threads, kv_context, decode_tokens, kv_repeats);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  if (!orchestration_only) {
  ThreadPool pool(threads);
  const double bw_gbps = measure_read_bandwidth_gbps(pool);
  const double f32_gflops = measure_f32_gemm_gflops(pool);
  const double int8_gops = measure_int8_gops(pool, 10);
  out["machine"] = {{"threads", pool.size()}, {"read_bandwidth_gbps", bw_gbps}, {"f32_gemm_gflops", f32_gflops},
                    {"int8_gops", int8_gops}};
  std::printf("machine: %d threads, read bandwidth %.2f GB/s, f32 GEMM %.1f GFLOP/s (OpenBLAS %s kernels), int8 dot %.1f GOP/s\n",
              pool.size(), bw_gbps, f32_gflops, cpu::openblas_core().c_str(), int8_gops);

  auto engine = make_engine(model, threads, false, 64);
  const ModelSummary& m = engine->model();
  const double weight_gb = static_cast<double>(m.weight_bytes) / 1e9;
  // Block-quantized weights (under 1.5 bytes a parameter: q8_0 is 1.06, the 4-bit types ~0.56)
  // multiply in int8: their compute ceiling is the int8 dot rate, float weights' the f32 GEMM.
  const bool int8 = int8_gops > 0.0 && static_cast<double>(m.weight_bytes) < 1.5 * static_cast<double>(m.n_params);
  const double gemm_gflops = int8 ? int8_gops : f32_gflops;
  std::printf("model: %s, %.1fM parameters, %.1f MB of weights; compute ceiling: %s\n\n", model.c_str(),
              m.n_params / 1e6, weight_gb * 1e3, int8 ? "int8 dot (block-quantized weights)" : "f32 GEMM");
  out["model"]["compute_ceiling"] = int8 ? "int8" : "f32";
  out["model"]["path"] = model;
  out["model"]["n_params"] = m.n_params;
  out["model"]["weight_bytes"] = m.weight_bytes;

  // What the measured steps cost by the engine's roofline model (Model::step_cost: the weights a
  // step reads, for a mixture of experts those of the experts its tokens can reach, plus KV; its
  // flops, the active experts' only), per step on average over a run.
  struct Cost {
    double bytes = 0, flops = 0, steps = 0;  // bytes and flops summed over the run's steps
  };
  auto measured = [&](auto&& run) {
    const EngineStats before = engine->stats();
    RunStats s = run();
    const EngineStats after = engine->stats();
    return std::pair{s, Cost{static_cast<double>(after.step_bytes - before.step_bytes),
                             static_cast<double>(after.step_flops - before.step_flops),
                             std::max<double>(1.0, static_cast<double>(after.steps - before.steps))}};
  };
  std::printf("%-22s %12s %14s %12s\n", "decode", "tokens/s", "roofline tok/s", "fraction");
  for (int batch : {1, 8, 32}) {
    run_batch(*engine, batch, 16, 4);  // warm-up: page faults, thread start
    const auto [s, cost] = measured([&] { return run_batch(*engine, batch, 16, decode_tokens); });
    // A step decodes batch tokens: its bound is the larger of the read time and the compute time
    // (the prompts' prefill steps, one per sequence, are in the average: at 16 tokens they read
    // what a decode step reads).
    const double step_bound_s =
        std::max(cost.bytes / cost.steps / (bw_gbps * 1e9), cost.flops / cost.steps / (gemm_gflops * 1e9));
    const double roofline = batch / step_bound_s;
    if (s.decode_tok_s == 0.0) {  // the last first token came after the first finish
      std::printf("batch %-16d %12s %14.1f   (the %d never decoded together: max_running, or a recurrent model's "
                  "state slots in kv.memory_mb, --kv-memory-mb)\n", batch, "-", roofline, batch);
      continue;
    }
    std::printf("batch %-16d %12.1f %14.1f %11.1f%%\n", batch, s.decode_tok_s, roofline, 100 * s.decode_tok_s / roofline);
    out["decode"].push_back({{"batch", batch}, {"tokens_per_s", s.decode_tok_s}, {"roofline_tokens_per_s", roofline},
                             {"fraction", s.decode_tok_s / roofline}});
  }

  {
    const auto [s, cost] = measured([&] { return run_batch(*engine, 1, prefill_len, 1); });
    const double tok_s = prefill_len / s.ttft_s;
    // The run's steps: the prompt's (max_step_tokens 512 per step), with its tokens' flops.
    const double roofline = gemm_gflops * 1e9 * prefill_len / cost.flops;
    const std::string label = std::to_string(prefill_len) + "-token prompt";
    std::printf("\n%-22s %12s %14s %12s\n", "prefill", "tokens/s", "roofline tok/s", "fraction");
    std::printf("%-22s %12.1f %14.1f %11.1f%%\n", label.c_str(), tok_s, roofline, 100 * tok_s / roofline);
    out["prefill"] = {{"prompt_tokens", prefill_len}, {"ttft_s", s.ttft_s}, {"tokens_per_s", tok_s},
                      {"roofline_tokens_per_s", roofline}, {"fraction", tok_s / roofline}};
  }
  }

  std::printf("\n%-22s %12s %14s %14s\n", "orchestration", "us/step", "executor us", "actors us");
  auto null_engine = make_engine(model, threads, true, 64, "auto", 0, "", true, 0, /*optional=*/true);
  if (!null_engine) std::printf("not measured: the no-op backend does not run this model (above)\n");
  for (int batch : {1, 32}) {
    if (!null_engine) break;
    run_batch(*null_engine, batch, 4, 8);
    const int tokens = 512;
    const EngineStats before = null_engine->stats();
    RunStats s = run_batch(*null_engine, batch, 4, tokens);
    const EngineStats after = null_engine->stats();
    // The step period minus the executor's own time (no-op forward, host sampling) is what the
    // actors add: planning, messages, scheduling wake-ups, events to the frontend.
    const double steps = static_cast<double>(after.steps - before.steps);
    const double us = s.wall_s * 1e6 / steps;
    const double exec_us = static_cast<double>(after.executor_us - before.executor_us) / steps;
    std::printf("batch %-16d %12.1f %14.1f %14.1f\n", batch, us, exec_us, us - exec_us);
    out["orchestration"].push_back({{"batch", batch}, {"us_per_step", us}, {"executor_us_per_step", exec_us},
                                    {"actor_us_per_step", us - exec_us}, {"steps", steps}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
