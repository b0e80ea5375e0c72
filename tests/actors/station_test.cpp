// The plain parts of stations: the rate limiter's buckets, option parsing, the request log's
// line, and how a topology's station types are found (actors/station/).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "actors/station/rate_limit.h"
#include "actors/station/request_log.h"
#include "actors/station/station_actor.h"

namespace brigade {
namespace {

RateLimitConfig limits(double rpm, double tpm, double burst_s = 60) {
  RateLimitConfig c;
  c.requests_per_minute = rpm;
  c.tokens_per_minute = tpm;
  c.burst_s = burst_s;
  return c;
}

TEST(RateLimiter, ABucketHoldsOneMinuteAndRefillsAtTheRate) {
  RateLimiter rl(limits(/*rpm=*/3, /*tpm=*/0));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rl.wait_s("a", 0, 10.0), 0.0);
    rl.admit("a", 0, 10.0);
  }
  // Empty: one request comes back every 20 s.
  EXPECT_DOUBLE_EQ(rl.wait_s("a", 0, 10.0), 20.0);
  EXPECT_DOUBLE_EQ(rl.wait_s("a", 0, 25.0), 5.0);
  EXPECT_EQ(rl.wait_s("a", 0, 30.0), 0.0);
  // Another client has a bucket of its own.
  EXPECT_EQ(rl.wait_s("b", 0, 10.0), 0.0);
  // Refilling stops at a full bucket: after an hour, three at once again, not more.
  for (int i = 0; i < 3; ++i) rl.admit("a", 0, 4000.0);
  EXPECT_GT(rl.wait_s("a", 0, 4000.0), 0.0);
}

TEST(RateLimiter, TokensAreTakenAtAdmissionAndTheUnusedPartComesBack) {
  RateLimiter rl(limits(0, /*tpm=*/600));  // 10 tokens per second
  EXPECT_EQ(rl.wait_s("a", 500, 0.0), 0.0);
  rl.admit("a", 500, 0.0);
  EXPECT_DOUBLE_EQ(rl.wait_s("a", 200, 0.0), 10.0);  // 100 left, 100 more needed at 10/s
  rl.refund("a", 100, 0.0);                         // the request generated less than it reserved
  EXPECT_EQ(rl.wait_s("a", 200, 0.0), 0.0);
  EXPECT_LT(rl.wait_s("a", 601, 0.0), 0.0);  // above a full bucket: never
}

TEST(RateLimiter, TheWaitOfTheLastOfAQueue) {
  RateLimiter rl(limits(/*rpm=*/6, /*tpm=*/60));  // a request every 10 s, a token a second
  for (int i = 0; i < 6; ++i) rl.admit("a", 0, 0.0);  // the request bucket is empty
  EXPECT_DOUBLE_EQ(rl.wait_s("a", 0, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(rl.wait_s("a", 0, 0.0, /*n_requests=*/3), 30.0);
  // Tokens of the whole queue may exceed one bucket: the wait is still the refill time.
  EXPECT_DOUBLE_EQ(rl.wait_s("a", 120, 0.0, 3), 60.0);
}

TEST(RateLimiter, BurstSetsTheBucketSize) {
  RateLimiter rl(limits(/*rpm=*/1200, 0, /*burst_s=*/0.05));  // holds one request; 20 per second
  rl.admit("a", 0, 1.0);
  EXPECT_NEAR(rl.wait_s("a", 0, 1.0), 0.05, 1e-9);
  EXPECT_EQ(rl.wait_s("a", 0, 1.05), 0.0);
}

// "c42" (built by append: GCC 12 warns falsely on "c" + std::to_string(i)).
std::string client(char prefix, int i) {
  std::string s(1, prefix);
  s += std::to_string(i);
  return s;
}

TEST(RateLimiter, FullBucketsOfIdleClientsAreForgottenPastManyClients) {
  RateLimiter rl(limits(/*rpm=*/1, 0));
  for (int i = 0; i < 5000; ++i) rl.admit(client('c', i), 0, 0.0);
  // Each took its one request: no bucket is full, so none may be forgotten.
  EXPECT_EQ(rl.n_clients(), 5000u);
  EXPECT_GT(rl.wait_s("c42", 0, 0.0), 0.0);
  // Two minutes later the c buckets are full again, as an unknown client's would be: a sweep
  // (once the map has doubled past the first one) forgets them and keeps the new clients'.
  for (int i = 0; i < 5000; ++i) rl.admit(client('d', i), 0, 120.0);
  EXPECT_EQ(rl.n_clients(), 5000u);
  EXPECT_EQ(rl.wait_s("c42", 0, 120.0), 0.0);
  EXPECT_GT(rl.wait_s("d42", 0, 120.0), 0.0);
}

StationSpec spec(std::map<std::string, std::string> options, std::string type = "rate_limit") {
  return StationSpec{"s", std::move(type), std::move(options)};
}

TEST(RateLimitOptions, AreCheckedWithReasons) {
  auto c = parse_rate_limit(spec({{"requests_per_minute", "60"}, {"mode", "queue"}, {"max_queue", "3"}, {"key", "team"}}));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->requests_per_minute, 60);
  EXPECT_TRUE(c->queue);
  EXPECT_EQ(c->max_queue, 3);
  EXPECT_EQ(c->key, "team");
  const auto error_of = [](std::map<std::string, std::string> o) { return parse_rate_limit(spec(std::move(o))).status().message(); };
  EXPECT_NE(error_of({}).find("set requests_per_minute or tokens_per_minute"), std::string::npos);
  EXPECT_NE(error_of({{"requests_per_minute", "ten"}}).find("must be a number"), std::string::npos);
  EXPECT_NE(error_of({{"requests_per_minute", "10"}, {"mode", "drop"}}).find("not one of: queue, reject"), std::string::npos);
  EXPECT_NE(error_of({{"requests_per_minute", "10"}, {"rpm", "1"}}).find("valid options: key, requests_per_minute"),
            std::string::npos);
  EXPECT_NE(error_of({{"requests_per_minute", "10"}, {"max_queue", "2.5"}}).find("max_queue"), std::string::npos);
  EXPECT_NE(error_of({{"requests_per_minute", "10"}, {"burst_s", "1"}}).find("must hold one request"), std::string::npos);
}

TEST(StationSpec, ReadsTypedOptions) {
  const StationSpec s = spec({{"n", "2.5"}, {"on", "true"}, {"bad", "yes"}});
  EXPECT_EQ(*s.get_number("n", 0), 2.5);
  EXPECT_EQ(*s.get_number("absent", 7), 7);
  EXPECT_TRUE(*s.get_bool("on", false));
  EXPECT_FALSE(s.get_bool("bad", false).has_value());
  EXPECT_EQ(*s.get_string("absent", "x"), "x");
}

TEST(RequestLog, WritesOneJsonObjectPerRequest) {
  RequestRecord r;
  r.id = 7;
  r.labels = {{"user", "ann \"the\" tester"}, {"team", "a"}};
  r.prompt_tokens = 12;
  r.max_tokens = 16;
  r.completion_tokens = 16;
  r.finish = StationFinish::length;
  r.first_token_ms = 1.23456;
  r.total_ms = 9.5;
  const std::string line = request_log_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["id"], 7);
  EXPECT_EQ(j["labels"]["user"], "ann \"the\" tester");
  EXPECT_EQ(j["finish"], "length");
  EXPECT_EQ(j["completion_tokens"], 16);
  EXPECT_DOUBLE_EQ(j["first_token_ms"].get<double>(), 1.235);
  EXPECT_FALSE(j.contains("error"));
  r.finish = StationFinish::error;
  r.error = "bad \xff byte";
  r.first_token_ms = -1;
  const auto e = nlohmann::json::parse(request_log_line(r));
  EXPECT_EQ(e["error"], "bad \xEF\xBF\xBD byte");  // invalid UTF-8 replaced, not thrown
  EXPECT_FALSE(e.contains("first_token_ms"));
}

class PassAll final : public Station {
 public:
  StationVerdict on_request(StationRequest&, StationContext&) override { return StationVerdict::pass(); }
};

TEST(MakeStations, FindsTypesAndNamesWhatIsWrong) {
  std::map<std::string, StationFactory> types = {
      {"pass", [](const StationSpec&) -> Expected<std::unique_ptr<Station>> { return std::unique_ptr<Station>(std::make_unique<PassAll>()); }},
      {"broken", [](const StationSpec&) -> Expected<std::unique_ptr<Station>> { return invalid_argument("needs a key"); }},
  };
  auto ok = make_stations({{"p", "pass", false, {}}, {"log", "request_log", false, {}}}, types);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(ok->size(), 2u);
  auto unknown = make_stations({{"q", "quota", false, {}}}, types);
  EXPECT_EQ(unknown.status().message(),
            "station 'q': unknown type 'quota' (known types: broken, pass, rate_limit, request_log)");
  EXPECT_EQ(make_stations({{"b", "broken", false, {}}}, types).status().message(), "station 'b': needs a key");
  EXPECT_NE(make_stations({{"r", "rate_limit", false, {}}}, {}).status().message().find("station 'r': set"),
            std::string::npos);
  EXPECT_NE(make_stations({{"l", "request_log", false, {{"path", "/nonexistent/dir/x.jsonl"}}}}, {})
                .status()
                .message()
                .find("cannot open '/nonexistent/dir/x.jsonl'"),
            std::string::npos);
}

}  // namespace
}  // namespace brigade
