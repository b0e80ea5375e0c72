#include "server/stats_logger.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace brigade::server {
namespace {

// out += printf(format, ...), however long.
[[gnu::format(printf, 2, 3)]] void append_format(std::string& out, const char* format, ...) {
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, format, again);
    out.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

}  // namespace

std::optional<std::string> stats_line(const EngineStats& before, const EngineStats& now, double seconds) {
  const uint64_t prompt = now.prompt_tokens - before.prompt_tokens;
  const uint64_t generated = now.generated_tokens - before.generated_tokens;
  const uint64_t steps = now.steps - before.steps;
  if (prompt == 0 && generated == 0 && steps == 0 && now.n_running == 0 && now.n_waiting == 0) return std::nullopt;
  const double s = seconds > 0.0 ? seconds : 1.0;
  const auto pct = [](double part, double whole) { return whole > 0.0 ? 100.0 * part / whole : 0.0; };
  const int held = now.kv_pages_used - now.cache_idle_pages;  // idle cached pages are evictable: free
  std::string line;
  append_format(line,
                "stats: prompt throughput %.1f tokens/s, generation throughput %.1f tokens/s, running %d reqs, waiting "
                "%d reqs, KV cache usage %.1f%% of %d pages, prefix cache hit rate %.1f%%",
                static_cast<double>(prompt) / s, static_cast<double>(generated) / s, now.n_running, now.n_waiting,
                pct(held, now.kv_pages_total), now.kv_pages_total,
                pct(static_cast<double>(now.cache_hit_tokens - before.cache_hit_tokens),
                    static_cast<double>(now.cache_lookup_tokens - before.cache_lookup_tokens)));
  if (const uint64_t drafted = now.spec_draft_tokens - before.spec_draft_tokens; drafted > 0) {
    const uint64_t accepted = now.spec_accepted_tokens - before.spec_accepted_tokens;
    append_format(line, ", draft acceptance %.1f%% (%llu of %llu tokens)",
                  pct(static_cast<double>(accepted), static_cast<double>(drafted)),
                  static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(drafted));
  }
  if (const uint64_t preempted = now.preemptions - before.preemptions; preempted > 0)
    append_format(line, ", %llu preempted", static_cast<unsigned long long>(preempted));
  return line;
}

std::string describe_request(const CompletionRequest& r, const std::string& id, int max_log_len) {
  const GenerateOptions& g = r.gen;
  // (Built with += throughout: GCC 12's -Wrestrict misreads chains of literal + std::string.)
  std::string s = "request ";
  s += id;
  s += r.responses ? ": responses" : r.endpoint == Endpoint::chat ? ": chat completion" : ": completion";
  s += ", ";
  s += std::to_string(r.n_choices());
  s += r.n_choices() == 1 ? " choice" : " choices";
  if (r.use_beam_search) s += " (beam search)";
  const size_t limit = max_log_len > 0 ? static_cast<size_t>(max_log_len) : std::string::npos;
  if (!g.prompt.empty() || g.prompt_ids.empty()) {
    // The text as a JSON string (quotes, newlines and control bytes escaped), cut first.
    s += ", prompt ";
    s += nlohmann::json(g.prompt.substr(0, limit)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (g.prompt.size() > limit) append_format(s, " (%zu bytes)", g.prompt.size());
  } else {
    s += ", prompt ids [";
    for (size_t i = 0; i < std::min(limit, g.prompt_ids.size()); ++i) {
      if (i > 0) s += ',';
      s += std::to_string(g.prompt_ids[i]);
    }
    if (g.prompt_ids.size() > limit) append_format(s, ", ...] (%zu ids)", g.prompt_ids.size());
    else s += ']';
  }
  const SamplingOptions& p = g.sampling;
  append_format(s, ", max_tokens %d, temperature %g, top_p %g, top_k %d, min_p %g", g.max_tokens,
                static_cast<double>(p.temperature), static_cast<double>(p.top_p), p.top_k, static_cast<double>(p.min_p));
  if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    append_format(s, ", penalties repetition %g presence %g frequency %g",
                  static_cast<double>(p.repetition_penalty), static_cast<double>(p.presence_penalty),
                  static_cast<double>(p.frequency_penalty));
  }
  if (p.seed) {
    s += ", seed ";
    s += std::to_string(*p.seed);
  }
  if (!g.stop.empty()) {
    s += ", ";
    s += std::to_string(g.stop.size());
    s += " stop strings";
  }
  if (g.logprobs >= 0) {
    s += ", logprobs ";
    s += std::to_string(g.logprobs);
  }
  if (!g.lora.empty()) {
    s += ", adapter ";
    s += g.lora;
  }
  if (r.stream) s += ", streamed";
  return s;
}

namespace {

class ThreadStatsLogger final : public StatsLogger {
 public:
  ThreadStatsLogger(Engine& engine, double interval_s, std::function<void(const std::string&)> sink)
      : engine_(engine),
        interval_(std::chrono::duration<double>(interval_s)),
        sink_(std::move(sink)),
        last_(engine.stats()),
        last_at_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this] { run(); });
  }
  ~ThreadStatsLogger() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
      lock.unlock();
      const EngineStats now = engine_.stats();
      const auto at = std::chrono::steady_clock::now();
      if (auto line = stats_line(last_, now, std::chrono::duration<double>(at - last_at_).count())) sink_(*line);
      last_ = now;
      last_at_ = at;
      lock.lock();
    }
  }

  Engine& engine_;
  const std::chrono::duration<double> interval_;
  const std::function<void(const std::string&)> sink_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  // The counters at the previous line (at start: taken by the constructor, not by the thread, so
  // requests served before the thread first runs still count in its first interval). The
  // thread's alone once it runs.
  EngineStats last_;
  std::chrono::steady_clock::time_point last_at_;
  std::thread thread_;  // last: started once the members it reads are
};

}  // namespace

std::unique_ptr<StatsLogger> StatsLogger::start(Engine& engine, double interval_s,
                                                std::function<void(const std::string&)> sink) {
  return std::make_unique<ThreadStatsLogger>(engine, interval_s > 0.0 ? interval_s : 10.0, std::move(sink));
}

}  // namespace brigade::server
