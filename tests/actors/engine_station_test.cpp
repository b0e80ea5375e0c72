// Stations in a running engine (include/brigade/station.h): an application's station changes,
// holds, rejects and cancels requests and sees their events; brigade's rate_limit and
// request_log stations do their jobs; a bad station stops Engine::create with the reason.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>

#include "tests/engine_test_util.h"

namespace brigade {
namespace {

using testing::create_engine;
using testing::greedy_ids;
using testing::test_engine_options;

// What a probe station saw, read by the test thread (stations run on engine threads).
struct Seen {
  std::mutex mu;
  std::vector<std::string> log;            // "<station> request|event|cancel <id>", in order
  std::map<uint64_t, int> tokens;          // ids seen in events, per request
  std::map<uint64_t, int> finals;          // final events, per request
  std::map<uint64_t, std::string> labels;  // the `tenant` label, per request
  std::map<uint64_t, int> max_tokens_in;   // max_tokens as the request reached the probe
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(line);
  }
};

// Records everything; with `max_tokens` > 0 lowers each request's max_tokens to it; holds
// requests labelled hold=timer and releases them `delay` later; holds hold=forever until the
// client cancels; rejects tenant=blocked; cancels a request labelled cut=1 after its first event.
class Probe final : public Station {
 public:
  Probe(std::string name, std::shared_ptr<Seen> seen, int max_tokens = 0)
      : name_(std::move(name)), seen_(std::move(seen)), max_tokens_(max_tokens) {}

  StationVerdict on_request(StationRequest& r, StationContext& ctx) override {
    seen_->add(name_ + " request " + std::to_string(r.id));
    {
      std::lock_guard<std::mutex> lock(seen_->mu);
      seen_->labels[r.id] = r.label("tenant");
      seen_->max_tokens_in[r.id] = r.max_tokens;
    }
    if (max_tokens_ > 0) r.max_tokens = max_tokens_;
    r.priority = 5;
    if (r.label("tenant") == "blocked")
      return StationVerdict::reject(StatusCode::out_of_resources, "tenant blocked by " + name_);
    if (r.label("cut") == "1") to_cut_.insert(r.id);
    if (r.label("hold") == "timer") {
      const uint64_t id = r.id;
      ctx.after(std::chrono::milliseconds(30), [id, &ctx] { ctx.release(id); });
      return StationVerdict::hold();
    }
    if (r.label("hold") == "forever") return StationVerdict::hold();
    return StationVerdict::pass();
  }
  void on_event(const StationEvent& ev, StationContext& ctx) override {
    seen_->add(name_ + " event " + std::to_string(ev.id));
    {
      std::lock_guard<std::mutex> lock(seen_->mu);
      seen_->tokens[ev.id] += ev.n_new_tokens;
      if (ev.finish != StationFinish::none) seen_->finals[ev.id]++;
    }
    if (to_cut_.erase(ev.id) > 0 && ev.finish == StationFinish::none) ctx.cancel(ev.id);
  }
  void on_cancel(uint64_t id, bool was_held, StationContext&) override {
    seen_->add(name_ + " cancel " + std::to_string(id) + (was_held ? " held" : " passed"));
  }

 private:
  std::string name_;
  std::shared_ptr<Seen> seen_;
  int max_tokens_;
  std::set<uint64_t> to_cut_;
};

class EngineStations : public testing::TinyModelTest {
 protected:
  EngineStations() : TinyModelTest("stations", 77) {}

  // Test options with `stations` of type probe (named as given) plus any built-in entries.
  EngineOptions options(std::vector<StationConfig> stations, int max_tokens = 0) {
    EngineOptions o = test_engine_options(model(), 1);
    o.topology.stations = std::move(stations);
    o.station_types["probe"] = [seen = seen_, max_tokens](const StationSpec& s) -> Expected<std::unique_ptr<Station>> {
      return std::unique_ptr<Station>(std::make_unique<Probe>(s.name, seen, max_tokens));
    };
    return o;
  }
  static StationConfig probe(const std::string& name) { return {name, "probe", false, {}}; }
  static GenerateOptions labelled(GenerateOptions r, std::vector<std::pair<std::string, std::string>> labels) {
    r.labels = std::move(labels);
    return r;
  }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(seen_->mu);
    return seen_->log;
  }

  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
};

TEST_F(EngineStations, AStationLowersMaxTokensAndSeesEveryEvent) {
  auto engine = create_engine(options({probe("p")}, /*max_tokens=*/3));
  ASSERT_TRUE(engine);
  auto c = engine->generate(labelled(greedy_ids(prompt(1, 9), 12), {{"tenant", "t1"}}));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 3u);
  EXPECT_EQ(c->finish, FinishReason::length);
  std::lock_guard<std::mutex> lock(seen_->mu);
  ASSERT_EQ(seen_->labels.size(), 1u);
  const uint64_t id = seen_->labels.begin()->first;
  EXPECT_EQ(seen_->labels[id], "t1");
  EXPECT_EQ(seen_->tokens[id], 3);
  EXPECT_EQ(seen_->finals[id], 1);
}

// A request without a limit (the server's chat default) reaches the stations with what the
// context leaves it, for token-id prompts and text prompts alike; an explicit smaller one as given.
TEST_F(EngineStations, UnlimitedMaxTokensReachStationsCappedToTheContext) {
  auto engine = create_engine(options({probe("p")}, /*max_tokens=*/2));
  ASSERT_TRUE(engine);
  const int context = engine->model().max_context;
  ASSERT_GT(context, 100);
  constexpr int kUnlimited = std::numeric_limits<int32_t>::max();
  ASSERT_TRUE(engine->generate(greedy_ids(prompt(2, 9), kUnlimited)).has_value());
  GenerateOptions text = greedy_ids({}, kUnlimited);
  text.prompt = "Once upon a time";
  ASSERT_TRUE(engine->generate(text).has_value());
  auto n_text = engine->tokenize(text.prompt, /*add_bos=*/true);
  ASSERT_TRUE(n_text.has_value());
  ASSERT_TRUE(engine->generate(greedy_ids(prompt(3, 9), 7)).has_value());
  std::lock_guard<std::mutex> lock(seen_->mu);
  ASSERT_EQ(seen_->max_tokens_in.size(), 3u);
  auto it = seen_->max_tokens_in.begin();
  EXPECT_EQ(it->second, context - 9) << "token ids";
  EXPECT_EQ((++it)->second, context - static_cast<int>(n_text->size())) << "text";
  EXPECT_EQ((++it)->second, 7) << "an explicit limit within the context";
}

TEST_F(EngineStations, RequestsPassStationsInOrderAndEventsInReverse) {
  auto engine = create_engine(options({probe("a"), probe("b")}));
  ASSERT_TRUE(engine);
  auto c = engine->generate(greedy_ids(prompt(2, 5), 4));
  ASSERT_TRUE(c.has_value());
  const auto l = log();
  ASSERT_GE(l.size(), 4u);
  const std::string id = l[0].substr(l[0].rfind(' ') + 1);
  EXPECT_EQ(l[0], "a request " + id);
  EXPECT_EQ(l[1], "b request " + id);
  // The k-th event reaches b before a (each station logs an event before passing it on).
  std::vector<size_t> at_a, at_b;
  for (size_t i = 2; i < l.size(); ++i) {
    if (l[i] == "a event " + id) at_a.push_back(i);
    else if (l[i] == "b event " + id) at_b.push_back(i);
    else ADD_FAILURE() << "unexpected: " << l[i];
  }
  ASSERT_EQ(at_a.size(), at_b.size());
  for (size_t k = 0; k < at_a.size(); ++k) EXPECT_LT(at_b[k], at_a[k]);
}

TEST_F(EngineStations, HeldRequestsRunWhenReleasedWithTheSameTokens) {
  const std::vector<GenerateOptions> reqs = {greedy_ids(prompt(3, 11), 8), greedy_ids(prompt(4, 7), 8)};
  std::vector<std::vector<int32_t>> plain;
  {
    auto engine = create_engine(test_engine_options(model(), 1));
    ASSERT_TRUE(engine);
    plain = testing::generate_all(*engine, reqs);
  }
  auto engine = create_engine(options({probe("p")}));
  ASSERT_TRUE(engine);
  std::vector<GenerateOptions> held;
  for (const auto& r : reqs) held.push_back(labelled(r, {{"hold", "timer"}}));
  EXPECT_EQ(testing::generate_all(*engine, held), plain);
}

// Before a router of two instances: the router's events come back through the station, and
// requests the station held and released are routed as any other.
TEST_F(EngineStations, StationsStandBeforeTheRouterOfSeveralInstances) {
  EngineOptions o = options({probe("p")});
  o.topology.instances.front().kv.memory_mb = 16;
  o.topology.instances.push_back(o.topology.instances.front());
  o.topology.instances[0].name = "i0";
  o.topology.instances[1].name = "i1";
  o.topology.router.policy = "round_robin";
  auto engine = create_engine(o);
  ASSERT_TRUE(engine);
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 4; ++i)
    reqs.push_back(labelled(greedy_ids(prompt(20 + i, 6), 5), {{"hold", i % 2 ? "timer" : ""}}));
  const auto tokens = testing::generate_all(*engine, reqs);
  for (const auto& t : tokens) EXPECT_EQ(t.size(), 5u);
  const auto per = engine->instance_stats();
  ASSERT_EQ(per.size(), 2u);
  EXPECT_EQ(per[0].stats.requests_done + per[1].stats.requests_done, 4u);
  EXPECT_GT(per[0].stats.requests_done, 0u);
  EXPECT_GT(per[1].stats.requests_done, 0u);
  std::lock_guard<std::mutex> lock(seen_->mu);
  for (const auto& [id, n] : seen_->tokens) EXPECT_EQ(n, 5) << id;
  EXPECT_EQ(seen_->finals.size(), 4u);
  const auto stats = engine->station_stats();
  EXPECT_EQ(stats[0].passed, 2u);
  EXPECT_EQ(stats[0].released, 2u);
}

TEST_F(EngineStations, RejectedRequestsEndWithTheStationsErrorAndOthersServe) {
  auto engine = create_engine(options({probe("gate")}));
  ASSERT_TRUE(engine);
  const auto events = testing::collect_events(
      *engine, {labelled(greedy_ids(prompt(5, 6), 4), {{"tenant", "blocked"}}), greedy_ids(prompt(6, 6), 4)});
  ASSERT_EQ(events[0].size(), 1u);
  EXPECT_EQ(events[0][0].finish, FinishReason::error);
  EXPECT_EQ(events[0][0].error_code, StatusCode::out_of_resources);
  EXPECT_EQ(events[0][0].error, "tenant blocked by gate");
  EXPECT_EQ(events[1].back().finish, FinishReason::length);
}

TEST_F(EngineStations, AClientCancelOfAHeldRequestEndsItThere) {
  auto engine = create_engine(options({probe("p")}));
  ASSERT_TRUE(engine);
  testing::Outcomes out;
  auto id = engine->submit(labelled(greedy_ids(prompt(7, 6), 4), {{"hold", "forever"}}), out.callback());
  ASSERT_TRUE(id.has_value());
  // The hold is seen before the cancel: both go through the tokenizer, in order.
  engine->cancel(*id);
  ASSERT_TRUE(out.wait(1));
  EXPECT_EQ(out.get(*id).finish, FinishReason::abort);
  EXPECT_EQ(out.n_final(*id), 1);
  const auto l = log();
  EXPECT_EQ(l.back(), "p cancel " + std::to_string(*id) + " held");
}

TEST_F(EngineStations, AStationCancelsARunningRequest) {
  auto engine = create_engine(options({probe("p")}));
  ASSERT_TRUE(engine);
  GenerateOptions r = labelled(greedy_ids(prompt(8, 6), 200), {{"cut", "1"}});
  auto c = engine->generate(r);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->finish, FinishReason::abort);
  EXPECT_LT(c->token_ids.size(), 200u);
}

TEST_F(EngineStations, UnknownTypesAndBadOptionsStopCreateWithTheReason) {
  auto unknown = Engine::create(options({{"q", "quota", false, {}}}));
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.status().message(), "station 'q': unknown type 'quota' (known types: probe, rate_limit, request_log)");
  auto bad = Engine::create(options({{"rl", "rate_limit", false, {{"requests_per_minute", "-1"}}}}));
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("station 'rl': requests_per_minute"), std::string::npos);
  // Labels are checked at submit.
  auto engine = create_engine(options({}));
  ASSERT_TRUE(engine);
  EXPECT_FALSE(engine->submit(labelled(greedy_ids(prompt(1, 3), 2), {{"", "x"}}), {}).has_value());
  EXPECT_FALSE(engine->submit(labelled(greedy_ids(prompt(1, 3), 2), {{"k", "1"}, {"k", "2"}}), {}).has_value());
}

TEST_F(EngineStations, RateLimitRefusesWhatIsOverAClientsRate) {
  auto engine = create_engine(options({{"rl", "rate_limit", false, {{"requests_per_minute", "2"}}}}));
  ASSERT_TRUE(engine);
  const auto as = [&](const std::string& user) { return labelled(greedy_ids(prompt(9, 5), 2), {{"user", user}}); };
  const auto events = testing::collect_events(*engine, {as("ann"), as("ann"), as("ann"), as("bob")});
  EXPECT_EQ(events[0].back().finish, FinishReason::length);
  EXPECT_EQ(events[1].back().finish, FinishReason::length);
  ASSERT_EQ(events[2].size(), 1u);
  EXPECT_EQ(events[2][0].error_code, StatusCode::out_of_resources);
  EXPECT_NE(events[2][0].error.find("rate limit for user 'ann' reached (2 requests per minute); retry in"),
            std::string::npos);
  EXPECT_GT(events[2][0].retry_after_ms, 29000);  // a request comes back every 30 s
  EXPECT_LE(events[2][0].retry_after_ms, 30000);
  EXPECT_EQ(events[3].back().finish, FinishReason::length);  // another client's bucket
}

TEST_F(EngineStations, RateLimitQueuesAndRefusesPastMaxQueue) {
  // A bucket of one request refilled after a second: the second waits, the third finds the
  // queue (max_queue 1) full.
  auto engine = create_engine(options({{"rl", "rate_limit", false,
                                        {{"requests_per_minute", "60"}, {"burst_s", "1"}, {"mode", "queue"},
                                         {"max_queue", "1"}}}}));
  ASSERT_TRUE(engine);
  const auto events = testing::collect_events(
      *engine, {greedy_ids(prompt(10, 5), 2), greedy_ids(prompt(11, 5), 2), greedy_ids(prompt(12, 5), 2)});
  EXPECT_EQ(events[0].back().finish, FinishReason::length);
  EXPECT_EQ(events[1].back().finish, FinishReason::length);
  ASSERT_EQ(events[2].size(), 1u);
  EXPECT_NE(events[2][0].error.find("1 requests already wait (max_queue); retry in"), std::string::npos);
  // The one waiting and this one: two more requests, one a second.
  EXPECT_GT(events[2][0].retry_after_ms, 1000);
  EXPECT_LE(events[2][0].retry_after_ms, 2000);
  const auto stats = engine->station_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].name, "rl");
  EXPECT_EQ(stats[0].type, "rate_limit");
  EXPECT_EQ(stats[0].requests, 3u);
  EXPECT_EQ(stats[0].passed, 1u);
  EXPECT_EQ(stats[0].released, 1u);
  EXPECT_EQ(stats[0].rejected, 1u);
  EXPECT_EQ(stats[0].held, 0);
}

TEST_F(EngineStations, StatsCountEveryOutcome) {
  auto engine = create_engine(options({probe("p")}));
  ASSERT_TRUE(engine);
  EXPECT_TRUE(create_engine(test_engine_options(model(), 1))->station_stats().empty());
  testing::Outcomes out;
  auto held = engine->submit(labelled(greedy_ids(prompt(1, 4), 2), {{"hold", "forever"}}), out.callback());
  ASSERT_TRUE(held.has_value());
  testing::collect_events(*engine, {greedy_ids(prompt(2, 4), 2), labelled(greedy_ids(prompt(3, 4), 2), {{"hold", "timer"}}),
                                    labelled(greedy_ids(prompt(4, 4), 2), {{"tenant", "blocked"}})});
  auto stats = engine->station_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].requests, 4u);
  EXPECT_EQ(stats[0].passed, 1u);
  EXPECT_EQ(stats[0].released, 1u);
  EXPECT_EQ(stats[0].rejected, 1u);
  EXPECT_EQ(stats[0].held, 1);
  engine->cancel(*held);
  ASSERT_TRUE(out.wait(1));
  stats = engine->station_stats();
  EXPECT_EQ(stats[0].cancelled, 1u);
  EXPECT_EQ(stats[0].held, 0);
}

TEST_F(EngineStations, RateLimitRefusesARequestThatCanNeverFit) {
  auto engine = create_engine(options({{"rl", "rate_limit", false, {{"tokens_per_minute", "100"}}}}));
  ASSERT_TRUE(engine);
  auto c = engine->generate(greedy_ids(prompt(13, 10), 200));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(c.status().message().find("(210 tokens) exceeds the 100 tokens a client may use at once"),
            std::string::npos);
}

TEST_F(EngineStations, RequestLogWritesALinePerFinishedRequest) {
  const std::string path = model() + "_requests.jsonl";
  {
    auto engine = create_engine(options({{"log", "request_log", false, {{"path", path}}}, probe("p")}, 3));
    ASSERT_TRUE(engine);
    testing::collect_events(*engine, {labelled(greedy_ids(prompt(14, 6), 8), {{"user", "ann"}}),
                                      labelled(greedy_ids(prompt(15, 4), 8), {{"tenant", "blocked"}})});
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  std::filesystem::remove(path);
  ASSERT_EQ(lines.size(), 2u);
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a["id"] < b["id"]; });
  EXPECT_EQ(lines[0]["labels"]["user"], "ann");
  EXPECT_EQ(lines[0]["prompt_tokens"], 6);
  EXPECT_EQ(lines[0]["max_tokens"], 8);  // as it came: the probe after the log lowered it to 3
  EXPECT_EQ(lines[0]["completion_tokens"], 3);
  EXPECT_EQ(lines[0]["finish"], "length");
  EXPECT_TRUE(lines[0].contains("first_token_ms"));
  EXPECT_EQ(lines[1]["finish"], "error");
  EXPECT_EQ(lines[1]["error"], "tenant blocked by p");
  EXPECT_FALSE(lines[1].contains("first_token_ms"));
}

}  // namespace
}  // namespace brigade
