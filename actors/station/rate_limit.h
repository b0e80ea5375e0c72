// The `rate_limit` station: per-client request and token rates (token buckets), refusing (HTTP
// 429) or queueing what is over the limit.
//
//   stations:
//     - type: rate_limit
//       options: {key: user, requests_per_minute: 60, tokens_per_minute: 20000, mode: queue, max_queue: 32}
//
// A client is the value of the request's label `key` (the server sets `user` from OpenAI's
// `user` field; requests without it share the client ""). Each client has a bucket per limit
// that holds at most burst_s seconds of allowance (default 60: one minute's) and refills
// continuously. A request costs one
// request and prompt + max_tokens tokens, taken when it is admitted; what it did not generate
// (max_tokens - completion tokens) is given back when it ends, so the token limit counts tokens
// really processed while never letting a burst overrun it (OpenAI's rule). mode reject answers a
// request over the limit with out_of_resources and the seconds until it would fit; mode queue
// holds it (first come first served per client, at most max_queue per client) until it fits.
// A request that could never fit (its tokens above a full bucket) is always refused.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>

#include "brigade/station.h"

namespace brigade {

struct RateLimitConfig {
  std::string key = "user";
  double requests_per_minute = 0;  // 0: no request limit
  double tokens_per_minute = 0;    // 0: no token limit
  double burst_s = 60;             // a bucket holds this many seconds of allowance (the burst)
  bool queue = false;              // mode queue (true) or reject (false)
  int max_queue = 64;              // per client, mode queue
};

// The buckets of every client (a plain class: times are seconds on any monotonic clock).
class RateLimiter {
 public:
  explicit RateLimiter(const RateLimitConfig& config) : config_(config) {}

  // Seconds from `now` until `client` can be admitted at a cost of `tokens` (0: now), or a
  // negative value when it never can (tokens above a full bucket). Const: a check.
  // With n_requests > 1: until that many requests costing `tokens` together could be admitted
  // one after another (the wait of the last of a queue), ignoring the bucket size.
  double wait_s(const std::string& client, int64_t tokens, double now, int n_requests = 1) const;
  // Takes one request and `tokens` from the client's buckets (which may go below zero only if
  // the caller skipped wait_s).
  void admit(const std::string& client, int64_t tokens, double now);
  // Gives back tokens a request reserved and did not use.
  void refund(const std::string& client, int64_t tokens, double now);
  // Clients with a bucket now (full buckets of idle clients are forgotten once there are more
  // than 4096, and then each time the count doubles).
  size_t n_clients() const { return buckets_.size(); }

 private:
  struct Bucket {
    double requests = 0, tokens = 0;  // allowance left
    double at = 0;                    // when they were last brought up to date
  };
  Bucket current(const std::string& client, double now) const;
  double cap_requests() const { return config_.requests_per_minute * config_.burst_s / 60.0; }
  double cap_tokens() const { return config_.tokens_per_minute * config_.burst_s / 60.0; }
  void store(const std::string& client, const Bucket& b);

  static constexpr size_t kMinSweep = 4096;
  RateLimitConfig config_;
  std::unordered_map<std::string, Bucket> buckets_;
  size_t sweep_at_ = kMinSweep;
};

Expected<RateLimitConfig> parse_rate_limit(const StationSpec& spec);
Expected<std::unique_ptr<Station>> make_rate_limit_station(const StationSpec& spec);

}  // namespace brigade
