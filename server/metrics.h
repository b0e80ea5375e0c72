// Server-side metrics: latency histograms the server measures itself (TTFT, TPOT, end-to-end),
// response counts per HTTP status, and the Prometheus text rendering that joins them with the
// engine's own counters and gauges (Engine::stats()).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "brigade/engine.h"

namespace brigade::server {

// A cumulative Prometheus histogram over fixed upper bounds (seconds). Not thread-safe by itself.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // Appends `# TYPE`, the _bucket lines (cumulative, with le="+Inf"), _sum and _count.
  void render(const std::string& name, const std::string& help, std::string& out) const;
  uint64_t count() const { return n_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

// Thread-safe: observed from the server's I/O threads, rendered for GET /metrics.
class ServerMetrics {
 public:
  ServerMetrics();
  // One finished choice: seconds from the HTTP request's arrival to its first token, the mean
  // seconds between its later tokens (only when it had >= 2 tokens), and the total.
  void observe_request(double ttft_s, double tpot_s, bool has_tpot, double e2e_s);
  void count_response(int http_status);
  void count_disconnect();
  // Prometheus text exposition (version 0.0.4) of these and the engine's stats: the unlabelled
  // families are the engine's totals (summed over its instances); the brigade_instance_* families
  // repeat the per-instance ones with an instance="name" label, and brigade_router_requests_total
  // {instance, reason} counts the router's decisions (only with two or more instances);
  // brigade_station_requests_total{station, outcome} and brigade_station_requests_held{station}
  // are the topology's stations' (only with stations).
  std::string render(const EngineStats& engine, const std::vector<InstanceStats>& instances = {},
                     const std::vector<StationStats>& stations = {}) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, e2e_;
  std::map<int, uint64_t> responses_;  // by HTTP status
  uint64_t disconnects_ = 0;
};

}  // namespace brigade::server
