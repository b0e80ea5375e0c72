// The online load generator behind `brigade bench` and `brigade demo`: clients streaming
// completions from a running server (fixed concurrency or Poisson arrivals), timed at the client.
#pragma once

#include <string>

#include "core/status.h"
#include "tools/bench_load.h"

namespace brigade::tools {

struct OnlineLoad {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  int concurrency = 8;
  double rate = 0;  // > 0: Poisson arrivals per second instead of fixed concurrency
  float temperature = 0.0f;
  Workload workload;
};

// Runs the workload against the server; an error only when no server answers /health.
Expected<BenchSummary> run_online_load(const OnlineLoad& load);

}  // namespace brigade::tools
