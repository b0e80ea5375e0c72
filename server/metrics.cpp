#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace brigade::server {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// `labels`: the series' labels ("a=\"x\",b=\"y\"") or empty.
void metric(std::string& out, const char* name, const char* type, const char* help, double value,
            const std::string& labels = "") {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name +
         (labels.empty() ? "" : "{" + labels + "}") + " " + number(value) + "\n";
}

void labelled(std::string& out, const char* name, const char* type, const char* help, const char* label,
              std::initializer_list<std::pair<const char*, double>> values) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  for (const auto& [v, x] : values) out += std::string(name) + "{" + label + "=\"" + v + "\"} " + number(x) + "\n";
}

// One gauge or counter family with a series per instance (names are label-safe: the topology
// allows letters, digits, '_', '-' and '.').
template <class Value>
void per_instance(std::string& out, const char* name, const char* type, const char* help,
                  const std::vector<InstanceStats>& instances, Value value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  for (const auto& inst : instances)
    out += std::string(name) + "{instance=\"" + inst.name + "\"} " + number(static_cast<double>(value(inst))) + "\n";
}

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// vLLM's 1-2-5 buckets (build_1_2_5_buckets) up to `max`.
std::vector<double> buckets_1_2_5(double max) {
  std::vector<double> b;
  for (double e = 1; e <= max; e *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (m * e <= max) b.push_back(m * e);
  return b;
}

void render_instances(std::string& out, const std::vector<InstanceStats>& instances) {
  per_instance(out, "brigade_instance_up", "gauge", "1 while the instance serves; 0 once its actors stopped.", instances,
               [](const InstanceStats& i) { return i.serving ? 1 : 0; });
  per_instance(out, "brigade_instance_requests_running", "gauge", "Sequences in the instance's running set.", instances,
               [](const InstanceStats& i) { return i.stats.n_running; });
  per_instance(out, "brigade_instance_requests_waiting", "gauge", "Requests in the instance's waiting queue.", instances,
               [](const InstanceStats& i) { return i.stats.n_waiting; });
  per_instance(out, "brigade_instance_kv_pages_used", "gauge", "KV cache pages the instance's sequences and prefix cache hold.",
               instances, [](const InstanceStats& i) { return i.stats.kv_pages_used; });
  per_instance(out, "brigade_instance_kv_pages_total", "gauge", "KV cache pages in the instance's pool.", instances,
               [](const InstanceStats& i) { return i.stats.kv_pages_total; });
  per_instance(out, "brigade_instance_prompt_tokens_total", "counter", "Prompt tokens of requests the instance admitted.",
               instances, [](const InstanceStats& i) { return i.stats.prompt_tokens; });
  per_instance(out, "brigade_instance_generation_tokens_total", "counter", "Tokens the instance sampled.", instances,
               [](const InstanceStats& i) { return i.stats.generated_tokens; });
  per_instance(out, "brigade_instance_requests_finished_total", "counter", "Requests that ended on the instance.", instances,
               [](const InstanceStats& i) { return i.stats.requests_done; });
  per_instance(out, "brigade_instance_prefix_cache_hit_tokens_total", "counter",
               "Prompt tokens the instance served from its prefix cache.", instances,
               [](const InstanceStats& i) { return i.stats.cache_hit_tokens; });
  if (instances.size() < 2) return;  // one instance has no router
  // PD separation: each instance's role, and what moved between prefill and decode instances.
  out += "# HELP brigade_instance_role The instance's role (both, prefill, decode): always 1.\n"
         "# TYPE brigade_instance_role gauge\n";
  for (const auto& inst : instances)
    out += "brigade_instance_role{instance=\"" + inst.name + "\",role=\"" + inst.role + "\"} 1\n";
  per_instance(out, "brigade_pd_transfers_out_total", "counter", "Sequences a prefill instance handed off.", instances,
               [](const InstanceStats& i) { return i.stats.pd_transfers_out; });
  per_instance(out, "brigade_pd_transfers_in_total", "counter", "Hand-offs whose KV pages a decode instance wrote.",
               instances, [](const InstanceStats& i) { return i.stats.pd_transfers_in; });
  per_instance(out, "brigade_pd_bytes_out_total", "counter", "KV bytes a prefill instance handed off.", instances,
               [](const InstanceStats& i) { return i.stats.pd_bytes_out; });
  per_instance(out, "brigade_pd_bytes_in_total", "counter", "KV bytes a decode instance received.", instances,
               [](const InstanceStats& i) { return i.stats.pd_bytes_in; });
  per_instance(out, "brigade_pd_shm_transfers_in_total", "counter",
               "Of the hand-offs a decode instance wrote, those whose KV bytes came in a shared-memory segment.",
               instances, [](const InstanceStats& i) { return i.stats.pd_shm_transfers_in; });
  per_instance(out, "brigade_pd_transfer_seconds_total", "counter",
               "Summed seconds from a first token at the prefill scheduler to its pages written on the decode "
               "instance (mean = this / brigade_pd_transfers_in_total).",
               instances, [](const InstanceStats& i) { return static_cast<double>(i.stats.pd_transfer_us) / 1e6; });
  per_instance(out, "brigade_pd_import_failures_total", "counter",
               "Hand-offs whose pages could not be written (the sequence recomputed on the decode instance).",
               instances, [](const InstanceStats& i) { return i.stats.pd_import_failures; });
  out += "# HELP brigade_router_requests_total Requests the router sent to each instance, by why it chose it.\n"
         "# TYPE brigade_router_requests_total counter\n";
  for (const auto& inst : instances) {
    for (const auto& [reason, n] : {std::pair{"cache", inst.routed_cache}, std::pair{"load", inst.routed_load},
                                    std::pair{"round_robin", inst.routed_round_robin}})
      out += "brigade_router_requests_total{instance=\"" + inst.name + "\",reason=\"" + reason + "\"} " +
             std::to_string(n) + "\n";
  }
}

// The stations' outcomes (names are label-safe: the topology allows letters, digits, '_-.').
void render_stations(std::string& out, const std::vector<StationStats>& stations) {
  if (stations.empty()) return;
  out += "# HELP brigade_station_requests_total Requests each station of the request path passed at once, released "
         "after holding, rejected, or had cancelled while holding.\n"
         "# TYPE brigade_station_requests_total counter\n";
  for (const auto& st : stations) {
    for (const auto& [outcome, n] : {std::pair{"passed", st.passed}, std::pair{"released", st.released},
                                     std::pair{"rejected", st.rejected}, std::pair{"cancelled", st.cancelled}})
      out += "brigade_station_requests_total{station=\"" + st.name + "\",outcome=\"" + outcome + "\"} " +
             std::to_string(n) + "\n";
  }
  out += "# HELP brigade_station_requests_held Requests each station holds now.\n"
         "# TYPE brigade_station_requests_held gauge\n";
  for (const auto& st : stations)
    out += "brigade_station_requests_held{station=\"" + st.name + "\"} " + std::to_string(st.held) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  ++counts_[i];
  sum_ += seconds;
  ++n_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out,
                       const std::string& labels) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  const std::string pre = labels.empty() ? "" : labels + ",";
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + pre + "le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name + "_bucket{" + pre + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum" + own + " " + number(sum_) + "\n" + name + "_count" + own + " " + std::to_string(n_) + "\n";
}

ServerMetrics::ServerMetrics(std::string model_name)
    : vllm_labels_("model_name=\"" + label_value(model_name) + "\",engine=\"0\""),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5}),
      // vLLM's inter-token buckets, with CPU-sized ones below 10 ms.
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
            20, 40, 80}),
      e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      prompt_tokens_(buckets_1_2_5(1e6)),
      generation_tokens_(buckets_1_2_5(1e6)) {}

void ServerMetrics::observe_choice(const ChoiceEnd& c) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[c.finish];
  if (c.finish == FinishReason::error) return;
  prompt_tokens_.observe(c.prompt_tokens);
  generation_tokens_.observe(c.completion_tokens);
  if (!c.timed) return;
  ttft_.observe(c.ttft_s);
  if (c.has_tpot) tpot_.observe(c.tpot_s);
  e2e_.observe(c.e2e_s);
}

// vLLM's names for what it has too (vllm/v1/metrics/loggers.py), each series labelled with the
// served model and engine 0, so vLLM's Grafana dashboards, KEDA/HPA rules on
// vllm:num_requests_waiting and the gateways that route by queue and KV usage (the Gateway API
// inference extension, vLLM's production-stack router) read brigade as they read vLLM.
void ServerMetrics::render_vllm(const EngineStats& s, std::string& out) const {
  const std::string& l = vllm_labels_;
  auto one = [&](const char* name, const char* type, const char* help, double v) { metric(out, name, type, help, v, l); };
  one("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", s.n_running);
  one("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", s.n_waiting);
  // As vLLM counts blocks: a cached page no request uses is free (evictable at once).
  const double busy = s.kv_pages_total > 0 ? static_cast<double>(s.kv_pages_used - s.cache_idle_pages) / s.kv_pages_total : 0.0;
  one("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", busy);
  one("vllm:gpu_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage (vLLM's older name).", busy);
  one("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
      static_cast<double>(s.preemptions));
  one("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", static_cast<double>(s.prompt_tokens));
  one("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
      static_cast<double>(s.generated_tokens));
  one("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
      static_cast<double>(s.cache_lookup_tokens));
  one("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
      static_cast<double>(s.cache_hit_tokens + s.cache_loaded_tokens));
  out += "# HELP vllm:request_success_total Count of successfully processed requests.\n"
         "# TYPE vllm:request_success_total counter\n";
  for (FinishReason r : {FinishReason::stop, FinishReason::length, FinishReason::abort, FinishReason::error}) {
    const auto it = finished_.find(r);
    out += "vllm:request_success_total{" + l + ",finished_reason=\"" + finish_reason_name(r) + "\"} " +
           std::to_string(it == finished_.end() ? 0 : it->second) + "\n";
  }
  ttft_.render("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", out, l);
  tpot_.render("vllm:request_time_per_output_token_seconds",
               "Histogram of time_per_output_token_seconds per request.", out, l);
  itl_.render("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", out, l);
  e2e_.render("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", out, l);
  prompt_tokens_.render("vllm:request_prompt_tokens", "Number of prefill tokens processed.", out, l);
  generation_tokens_.render("vllm:request_generation_tokens", "Number of generation tokens processed.", out, l);
}

void ServerMetrics::observe_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}

void ServerMetrics::count_response(int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[http_status];
}

void ServerMetrics::count_disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
}

std::string ServerMetrics::render(const EngineStats& s, const std::vector<InstanceStats>& instances,
                                  const std::vector<StationStats>& stations) const {
  std::string out;
  metric(out, "brigade_requests_running", "gauge", "Sequences in the scheduler's running set.", s.n_running);
  metric(out, "brigade_requests_waiting", "gauge", "Requests in the scheduler's waiting queue.", s.n_waiting);
  metric(out, "brigade_kv_pages_used", "gauge", "KV cache pages held by sequences.", s.kv_pages_used);
  metric(out, "brigade_kv_pages_total", "gauge", "KV cache pages in the pool.", s.kv_pages_total);
  metric(out, "brigade_kv_usage_ratio", "gauge", "Fraction of KV cache pages in use.",
         s.kv_pages_total > 0 ? static_cast<double>(s.kv_pages_used) / s.kv_pages_total : 0.0);
  metric(out, "brigade_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         static_cast<double>(s.prompt_tokens));
  metric(out, "brigade_generation_tokens_total", "counter", "Tokens sampled.", static_cast<double>(s.generated_tokens));
  metric(out, "brigade_requests_finished_total", "counter", "Engine requests that ended (any reason).",
         static_cast<double>(s.requests_done));
  metric(out, "brigade_preemptions_total", "counter", "Sequences preempted to free KV pages.",
         static_cast<double>(s.preemptions));
  metric(out, "brigade_prefix_cache_lookups_total", "counter", "Admissions that consulted the prefix cache.",
         static_cast<double>(s.cache_lookups));
  metric(out, "brigade_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens served from cached KV pages (prefill tokens saved).", static_cast<double>(s.cache_hit_tokens));
  metric(out, "brigade_prefix_cache_partial_hit_tokens_total", "counter",
         "Of the hit tokens, those whose KV rows were copied from a partly used cached page.",
         static_cast<double>(s.cache_partial_hit_tokens));
  metric(out, "brigade_prefix_cache_in_batch_waits_total", "counter",
         "Admissions that waited for another request's prefill of a prefix they share, to take it from the cache.",
         static_cast<double>(s.cache_in_batch_waits));
  metric(out, "brigade_prefix_cache_loaded_tokens_total", "counter",
         "Prompt tokens whose KV pages were loaded from a lower cache tier.", static_cast<double>(s.cache_loaded_tokens));
  metric(out, "brigade_prefix_cache_evicted_pages_total", "counter", "Pages evicted from the prefix cache.",
         static_cast<double>(s.cache_evicted_pages));
  metric(out, "brigade_prefix_cache_pages", "gauge", "KV pages the prefix cache holds (part of kv_pages_used).",
         s.cache_pages);
  if (s.cache_state_saves > 0 || s.cache_state_snapshots > 0) {  // a recurrent model's
    metric(out, "brigade_prefix_cache_state_saves_total", "counter",
           "Recurrent-state snapshots at page boundaries that joined the prefix cache.",
           static_cast<double>(s.cache_state_saves));
    metric(out, "brigade_prefix_cache_state_restores_total", "counter",
           "Admissions that started from a cached recurrent-state snapshot.", static_cast<double>(s.cache_state_restores));
    metric(out, "brigade_prefix_cache_state_snapshots", "gauge", "Recurrent-state snapshots the prefix cache holds.",
           s.cache_state_snapshots);
  }
  if (s.tiers) {
    metric(out, "brigade_tier_saved_pages_total", "counter", "KV pages saved from the device to the HiCache tiers.",
           static_cast<double>(s.tier_saved_pages));
    labelled(out, "brigade_tier_hit_pages_total", "counter", "KV pages loaded back to the device, by tier.", "tier",
             {{"host", static_cast<double>(s.tier_host_hit_pages)}, {"disk", static_cast<double>(s.tier_disk_hit_pages)}});
    labelled(out, "brigade_tier_bytes_in_total", "counter", "Bytes stored into each tier.", "tier",
             {{"host", static_cast<double>(s.tier_host_bytes_in)}, {"disk", static_cast<double>(s.tier_disk_bytes_in)}});
    labelled(out, "brigade_tier_bytes_out_total", "counter", "Bytes served from each tier.", "tier",
             {{"host", static_cast<double>(s.tier_host_bytes_out)}, {"disk", static_cast<double>(s.tier_disk_bytes_out)}});
    labelled(out, "brigade_tier_bytes_used", "gauge", "Bytes each tier holds.", "tier",
             {{"host", static_cast<double>(s.tier_host_bytes_used)}, {"disk", static_cast<double>(s.tier_disk_bytes_used)}});
    metric(out, "brigade_tier_disk_corrupt_total", "counter",
           "Disk-tier entries that failed their checksum (dropped and recomputed).", static_cast<double>(s.tier_disk_corrupt));
    metric(out, "brigade_tier_disk_degraded", "gauge", "1 when an I/O error turned the disk tier off.",
           s.tier_disk_degraded ? 1.0 : 0.0);
  }
  metric(out, "brigade_steps_total", "counter", "Executor steps.", static_cast<double>(s.steps));
  metric(out, "brigade_step_tokens_total", "counter", "Tokens computed in executor steps.",
         static_cast<double>(s.step_tokens));
  metric(out, "brigade_executor_seconds_total", "counter", "Executor time inside steps.",
         static_cast<double>(s.executor_us) / 1e6);
  // The roofline per step (DESIGN.md §9).
  metric(out, "brigade_step_flops_total", "counter",
         "Floating-point operations executor steps must do (weights, lm_head, attention).", static_cast<double>(s.step_flops));
  metric(out, "brigade_step_bytes_total", "counter",
         "Bytes executor steps must move (weights once per step, KV read and written).", static_cast<double>(s.step_bytes));
  if (s.peak_bytes_per_s > 0) {
    metric(out, "brigade_device_peak_bytes_per_second", "gauge", "Memory bandwidth measured at start.", s.peak_bytes_per_s);
    metric(out, "brigade_device_peak_flops_per_second", "gauge", "GEMM rate measured at start.", s.peak_flops_per_s);
    labelled(out, "brigade_roofline_steps_total", "counter",
             "Steps by the ceiling that allowed them the least time (the roofline's bound).", "bound",
             {{"memory", static_cast<double>(s.memory_bound_steps)}, {"compute", static_cast<double>(s.compute_bound_steps)}});
    labelled(out, "brigade_roofline_step_seconds_total", "counter", "Executor time of those steps.", "bound",
             {{"memory", static_cast<double>(s.memory_bound_executor_us) / 1e6},
              {"compute", static_cast<double>(s.compute_bound_executor_us) / 1e6}});
    labelled(out, "brigade_roofline_allowed_seconds_total", "counter",
             "Time the ceilings allow those steps (max of bytes / bandwidth and flops / GEMM rate); "
             "divided by the step seconds: the fraction of the roofline reached.",
             "bound",
             {{"memory", static_cast<double>(s.memory_bound_roofline_us) / 1e6},
              {"compute", static_cast<double>(s.compute_bound_roofline_us) / 1e6}});
  }
  // Speculative decoding (scheduler.speculative).
  metric(out, "brigade_spec_draft_tokens_total", "counter", "Draft tokens sent to the target for verification.",
         static_cast<double>(s.spec_draft_tokens));
  metric(out, "brigade_spec_accepted_tokens_total", "counter", "Draft tokens the target accepted.",
         static_cast<double>(s.spec_accepted_tokens));
  metric(out, "brigade_spec_verify_sequences_total", "counter", "Sequence steps that verified drafts.",
         static_cast<double>(s.spec_verify_seqs));
  metric(out, "brigade_spec_draft_misses_total", "counter", "Drafting attempts where the drafter proposed nothing.",
         static_cast<double>(s.spec_misses));
  labelled(out, "brigade_spec_off_steps_total", "counter", "Steps planned without drafts by the load rule.", "reason",
           {{"compute_bound", static_cast<double>(s.spec_off_compute_bound_steps)},
            {"batch_size", static_cast<double>(s.spec_off_batch_steps)}});
  metric(out, "brigade_spec_sequences_turned_off_total", "counter",
         "Times a sequence stopped drafting for a while: its acceptance was below min_acceptance.",
         static_cast<double>(s.spec_seqs_turned_off));
  metric(out, "brigade_spec_draft_forwards_total", "counter", "Draft model forwards (method draft_model).",
         static_cast<double>(s.spec_draft_forwards));
  metric(out, "brigade_spec_draft_forward_seconds_total", "counter", "Seconds spent in draft model forwards.",
         static_cast<double>(s.spec_draft_forward_us) / 1e6);
  metric(out, "brigade_spec_draft_fed_tokens_total", "counter",
         "Tokens whose K/V the draft model computed (drafts, prefill after a rollback or first sight).",
         static_cast<double>(s.spec_draft_fed_tokens));
  render_instances(out, instances);
  render_stations(out, stations);
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.render("brigade_time_to_first_token_seconds", "Seconds from HTTP request arrival to the first token.", out);
  tpot_.render("brigade_time_per_output_token_seconds", "Mean seconds between output tokens after the first.", out);
  itl_.render("brigade_inter_token_latency_seconds",
              "Seconds between successive deliveries of a choice's tokens (a delivery may carry several).", out);
  e2e_.render("brigade_request_latency_seconds", "Seconds from HTTP request arrival to the last token.", out);
  out += "# HELP brigade_http_responses_total HTTP responses by status.\n# TYPE brigade_http_responses_total counter\n";
  for (const auto& [code, n] : responses_) {
    out += "brigade_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  }
  metric(out, "brigade_client_disconnects_total", "counter", "Streams whose client went away; their requests were cancelled.",
         static_cast<double>(disconnects_));
  render_vllm(s, out);
  return out;
}

}  // namespace brigade::server
