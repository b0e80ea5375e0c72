// Server-side metrics: latency histograms the server measures itself (TTFT, TPOT, end-to-end),
// response counts per HTTP status, and the Prometheus text rendering that joins them with the
// engine's own counters and gauges (Engine::stats()). Besides brigade's own families, the
// rendering repeats the ones vLLM's dashboards, autoscalers and load-aware routers read under
// vLLM's names and labels (`vllm:num_requests_waiting{model_name="..",engine="0"}`, ...; the
// list is in docs/architecture.md "Metrics").
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
  // `labels`: extra labels of every series ("a=\"x\",b=\"y\"", or empty).
  void render(const std::string& name, const std::string& help, std::string& out,
              const std::string& labels = "") const;
  uint64_t count() const { return n_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

// One choice of a request that ended (ServerMetrics::observe_choice).
struct ChoiceEnd {
  FinishReason finish = FinishReason::stop;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  // When it produced a token: seconds from the HTTP request's arrival to its first token and to
  // its last, and (with two or more tokens) the mean seconds between its later tokens.
  bool timed = false;
  double ttft_s = 0.0, e2e_s = 0.0;
  bool has_tpot = false;
  double tpot_s = 0.0;
};

// Thread-safe: observed from the server's I/O threads, rendered for GET /metrics.
class ServerMetrics {
 public:
  // `model_name`: the served name, vLLM's model_name label.
  explicit ServerMetrics(std::string model_name = "");
  // One ended choice: its latencies (timed ones that did not fail), its token counts and its
  // finish reason (every one).
  void observe_choice(const ChoiceEnd& c);
  // The seconds between two successive deliveries of tokens to one choice (vLLM's inter-token
  // latency: one observation per delivery after the first, however many tokens it carried).
  void observe_inter_token(double seconds);
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
  void render_vllm(const EngineStats& s, std::string& out) const;  // mu_ held

  const std::string vllm_labels_;  // model_name="..",engine="0"
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, itl_, e2e_, prompt_tokens_, generation_tokens_;
  std::map<FinishReason, uint64_t> finished_;  // choices by finish reason
  std::map<int, uint64_t> responses_;  // by HTTP status
  uint64_t disconnects_ = 0;
};

}  // namespace brigade::server
