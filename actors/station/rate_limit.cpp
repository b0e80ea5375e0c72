#include "actors/station/rate_limit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_set>

namespace brigade {

RateLimiter::Bucket RateLimiter::current(const std::string& client, double now) const {
  Bucket b{cap_requests(), cap_tokens(), now};
  auto it = buckets_.find(client);
  if (it == buckets_.end()) return b;
  const double minutes = std::max(0.0, now - it->second.at) / 60.0;
  b.requests = std::min(cap_requests(), it->second.requests + minutes * config_.requests_per_minute);
  b.tokens = std::min(cap_tokens(), it->second.tokens + minutes * config_.tokens_per_minute);
  return b;
}

double RateLimiter::wait_s(const std::string& client, int64_t tokens, double now, int n_requests) const {
  const bool limit_requests = config_.requests_per_minute > 0, limit_tokens = config_.tokens_per_minute > 0;
  if (n_requests == 1 && limit_tokens && static_cast<double>(tokens) > cap_tokens()) return -1.0;
  const Bucket b = current(client, now);
  double wait = 0.0;
  if (limit_requests && b.requests < n_requests)
    wait = std::max(wait, (n_requests - b.requests) * 60.0 / config_.requests_per_minute);
  if (limit_tokens && b.tokens < static_cast<double>(tokens))
    wait = std::max(wait, (static_cast<double>(tokens) - b.tokens) * 60.0 / config_.tokens_per_minute);
  return wait;
}

void RateLimiter::admit(const std::string& client, int64_t tokens, double now) {
  Bucket b = current(client, now);
  b.requests -= 1.0;
  b.tokens -= static_cast<double>(tokens);
  store(client, b);
}

void RateLimiter::refund(const std::string& client, int64_t tokens, double now) {
  Bucket b = current(client, now);
  b.tokens = std::min(cap_tokens(), b.tokens + static_cast<double>(tokens));
  store(client, b);
}

void RateLimiter::store(const std::string& client, const Bucket& b) {
  buckets_[client] = b;
  if (buckets_.size() <= sweep_at_) return;
  // A full bucket is what an unknown client gets: forgetting it changes nothing. The next sweep
  // waits for the map to double, so sweeps cost O(1) per admission over time.
  std::erase_if(buckets_, [&](const auto& kv) {
    const Bucket now = current(kv.first, b.at);
    return now.requests >= cap_requests() && now.tokens >= cap_tokens();
  });
  sweep_at_ = std::max<size_t>(kMinSweep, 2 * buckets_.size());
}

Expected<RateLimitConfig> parse_rate_limit(const StationSpec& spec) {
  BRIGADE_RETURN_IF_ERROR(
      spec.check_options({"key", "requests_per_minute", "tokens_per_minute", "burst_s", "mode", "max_queue"}));
  RateLimitConfig c;
  BRIGADE_ASSIGN_OR_RETURN(c.key, spec.get_string("key", c.key));
  BRIGADE_ASSIGN_OR_RETURN(c.requests_per_minute, spec.get_number("requests_per_minute", 0));
  BRIGADE_ASSIGN_OR_RETURN(c.tokens_per_minute, spec.get_number("tokens_per_minute", 0));
  BRIGADE_ASSIGN_OR_RETURN(c.burst_s, spec.get_number("burst_s", c.burst_s));
  BRIGADE_ASSIGN_OR_RETURN(const std::string mode, spec.get_string("mode", "reject"));
  BRIGADE_ASSIGN_OR_RETURN(const double max_queue, spec.get_number("max_queue", c.max_queue));
  if (c.requests_per_minute < 0 || c.tokens_per_minute < 0)
    return invalid_argument("requests_per_minute and tokens_per_minute must be >= 0 (0 = no limit)");
  if (c.requests_per_minute == 0 && c.tokens_per_minute == 0)
    return invalid_argument("set requests_per_minute or tokens_per_minute (or both): without either it limits nothing");
  if (c.key.empty()) return invalid_argument("key must name a label (e.g. user)");
  if (!(c.burst_s > 0)) return invalid_argument("burst_s must be > 0 (seconds of allowance a bucket holds)");
  if (c.requests_per_minute > 0 && c.requests_per_minute * c.burst_s / 60.0 < 1.0)
    return invalid_argument("requests_per_minute * burst_s / 60 must be >= 1: a bucket must hold one request");
  if (mode != "reject" && mode != "queue") return invalid_argument("mode '" + mode + "' is not one of: queue, reject");
  c.queue = mode == "queue";
  if (!(max_queue >= 1 && max_queue <= 1e6 && max_queue == std::floor(max_queue)))
    return invalid_argument("max_queue must be a whole number in [1, 1000000]");
  c.max_queue = static_cast<int>(max_queue);
  return c;
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::max(0.1, s));
  return buf;
}

class RateLimitStation final : public Station {
 public:
  explicit RateLimitStation(const RateLimitConfig& c) : config_(c), limiter_(c) {}

  StationVerdict on_request(StationRequest& r, StationContext& ctx) override {
    const std::string client = r.label(config_.key);
    const int64_t tokens = cost(r);
    const double now = now_s(), wait = limiter_.wait_s(client, tokens, now);
    if (wait < 0)
      return StationVerdict::reject(StatusCode::invalid_argument,
                                    "rate limit: this request's prompt + max_tokens (" + std::to_string(tokens) +
                                        " tokens) exceeds the " + describe_burst() + " a client may use at once; lower max_tokens");
    auto found = queues_.find(client);
    const Waiting w{r.id, tokens, r.max_tokens};
    if (wait == 0 && found == queues_.end()) {
      admit(w, client, now);
      return StationVerdict::pass();
    }
    if (!config_.queue)
      return StationVerdict::reject(StatusCode::out_of_resources,
                                    "rate limit for " + who(client) + " reached (" + describe() + "); retry in " +
                                        seconds_text(wait) + " s",
                                    static_cast<int64_t>(std::ceil(wait * 1000.0)));
    if (found != queues_.end() && static_cast<int>(found->second.size()) >= config_.max_queue) {
      // Retry when the queue ahead and this request could all have been admitted.
      int64_t queued_tokens = tokens;
      for (const Waiting& q : found->second) queued_tokens += q.tokens;
      const int n = static_cast<int>(found->second.size()) + 1;
      const double drained = limiter_.wait_s(client, queued_tokens, now, n);
      return StationVerdict::reject(StatusCode::out_of_resources,
                                    "rate limit for " + who(client) + ": " + std::to_string(found->second.size()) +
                                        " requests already wait (max_queue); retry in " + seconds_text(drained) + " s",
                                    static_cast<int64_t>(std::ceil(drained * 1000.0)));
    }
    queues_[client].push_back(w);
    schedule(client, wait, ctx);
    return StationVerdict::hold();
  }

  void on_event(const StationEvent& ev, StationContext&) override {
    if (ev.finish == StationFinish::none) return;
    auto it = admitted_.find(ev.id);
    if (it == admitted_.end()) return;
    if (config_.tokens_per_minute > 0)
      limiter_.refund(it->second.client, std::max<int64_t>(0, it->second.max_tokens - ev.completion_tokens), now_s());
    admitted_.erase(it);
  }

  void on_cancel(uint64_t id, bool was_held, StationContext& ctx) override {
    if (!was_held) return;
    for (auto it = queues_.begin(); it != queues_.end(); ++it) {
      auto& q = it->second;
      auto pos = std::find_if(q.begin(), q.end(), [&](const Waiting& w) { return w.id == id; });
      if (pos == q.end()) continue;
      const bool was_front = pos == q.begin();
      q.erase(pos);
      const std::string client = it->first;
      if (q.empty()) queues_.erase(it);
      else if (was_front) drain(client, ctx);  // the next one may fit now
      return;
    }
  }

 private:
  struct Waiting {
    uint64_t id;
    int64_t tokens;      // its cost in tokens (0 without a token limit)
    int64_t max_tokens;
  };
  struct Admitted {
    std::string client;
    int64_t max_tokens;
  };

  int64_t cost(const StationRequest& r) const {
    return config_.tokens_per_minute > 0 ? static_cast<int64_t>(r.prompt_ids.size()) + r.max_tokens : 0;
  }
  // Takes the request's cost; its unused max_tokens come back when it ends (on_event).
  void admit(const Waiting& w, const std::string& client, double now) {
    limiter_.admit(client, w.tokens, now);
    admitted_[w.id] = {client, config_.tokens_per_minute > 0 ? w.max_tokens : 0};
  }

  // Releases the client's queue from its front while requests fit; schedules the next check.
  void drain(const std::string& client, StationContext& ctx) {
    auto it = queues_.find(client);
    if (it == queues_.end()) return;
    auto& q = it->second;
    while (!q.empty()) {
      const double now = now_s(), wait = limiter_.wait_s(client, q.front().tokens, now);
      if (wait > 0) {
        schedule(client, wait, ctx);
        return;
      }
      const Waiting w = q.front();
      q.pop_front();
      admit(w, client, now);
      ctx.release(w.id);
    }
    queues_.erase(it);
  }
  // One timer per waiting client at most.
  void schedule(const std::string& client, double wait_s, StationContext& ctx) {
    if (!timed_.insert(client).second) return;
    ctx.after(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(wait_s * 1000.0))), [this, client, &ctx] {
      timed_.erase(client);
      drain(client, ctx);
    });
  }
  std::string who(const std::string& client) const {
    return client.empty() ? "requests without a '" + config_.key + "' label" : config_.key + " '" + client + "'";
  }
  std::string describe_tokens() const { return std::to_string(static_cast<int64_t>(config_.tokens_per_minute)) + " tokens per minute"; }
  std::string describe_burst() const {
    return std::to_string(static_cast<int64_t>(config_.tokens_per_minute * config_.burst_s / 60.0)) + " tokens";
  }
  std::string describe() const {
    std::string s;
    if (config_.requests_per_minute > 0) s = std::to_string(static_cast<int64_t>(config_.requests_per_minute)) + " requests per minute";
    if (config_.tokens_per_minute > 0) s += (s.empty() ? "" : ", ") + describe_tokens();
    return s;
  }

  RateLimitConfig config_;
  RateLimiter limiter_;
  std::unordered_map<std::string, std::deque<Waiting>> queues_;
  std::unordered_map<uint64_t, Admitted> admitted_;
  std::unordered_set<std::string> timed_;  // clients with a drain timer pending
};

}  // namespace

Expected<std::unique_ptr<Station>> make_rate_limit_station(const StationSpec& spec) {
  BRIGADE_ASSIGN_OR_RETURN(const RateLimitConfig c, parse_rate_limit(spec));
  return std::unique_ptr<Station>(std::make_unique<RateLimitStation>(c));
}

}  // namespace brigade
