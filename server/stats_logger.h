// vLLM's periodic stats line for an operator watching `brigade serve` (vLLM's LoggingStatLogger,
// off with --disable-log-stats): every interval, while requests run or wait or anything ran since
// the last line, the prompt and generation throughput over the interval, the running and waiting
// requests, the KV pool's use (pages held by sequences; the prefix cache's idle pages count as
// free, as vLLM counts its evictable blocks), the prefix cache's hit rate over the interval and,
// with speculative decoding, the draft acceptance.
//
//   auto logger = StatsLogger::start(engine, 10.0, [](const std::string& line) { ... });
//   ...  // lines come from the logger's own thread; destroying it stops the thread
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "brigade/engine.h"
#include "server/openai_parse.h"

namespace brigade::server {

// The line for the interval from `before` to `now` (`seconds` long), or nullopt when nothing ran
// in it and nothing runs or waits (an idle server prints nothing).
std::optional<std::string> stats_line(const EngineStats& before, const EngineStats& now, double seconds);

// vLLM's --enable-log-requests line for a request the server starts, named by its response id:
// the endpoint, the choices, the prompt (the first prompt's text, a chat's rendered prompt, or
// token ids; cut to max_log_len characters or ids when > 0, as vLLM's --max-log-len) and the
// sampling settings.
std::string describe_request(const CompletionRequest& r, const std::string& id, int max_log_len);

class StatsLogger {
 public:
  // Reads engine.stats() every interval_s seconds (> 0) and hands each line to `sink` on the
  // logger's thread. The engine must outlive the logger.
  static std::unique_ptr<StatsLogger> start(Engine& engine, double interval_s, std::function<void(const std::string&)> sink);
  virtual ~StatsLogger() = default;  // stops the thread (at once, not at the next interval)
};

}  // namespace brigade::server
