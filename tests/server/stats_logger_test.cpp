// vLLM's serving logs (server/stats_logger.h): the periodic stats line over an interval's counters,
// the request line of --enable-log-requests, and both from a running server.
#include "server/stats_logger.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "models/make_model.h"
#include "server/http_client.h"
#include "server/http_server.h"
#include "tests/engine_test_util.h"

namespace brigade::server {
namespace {

TEST(StatsLine, AnIdleServerPrintsNothing) {
  EngineStats s;
  s.kv_pages_total = 100;
  EXPECT_FALSE(stats_line(s, s, 10.0).has_value());
}

// 10 s in which 1200 prompt tokens were admitted (400 of the 800 looked up in the prefix cache
// found there) and 350 tokens sampled; 3 run, 1 waits; 30 of 200 pages held, 10 more idle in
// the cache (evictable, so free as vLLM counts them).
TEST(StatsLine, ThroughputAndUseOverTheInterval) {
  EngineStats a, b;
  a.prompt_tokens = 100;
  a.generated_tokens = 50;
  a.cache_lookup_tokens = 200;
  a.cache_hit_tokens = 20;
  b = a;
  b.prompt_tokens += 1200;
  b.generated_tokens += 350;
  b.steps = 40;
  b.cache_lookup_tokens += 800;
  b.cache_hit_tokens += 400;
  b.n_running = 3;
  b.n_waiting = 1;
  b.kv_pages_total = 200;
  b.kv_pages_used = 40;
  b.cache_idle_pages = 10;
  auto line = stats_line(a, b, 10.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "stats: prompt throughput 120.0 tokens/s, generation throughput 35.0 tokens/s, running 3 reqs, waiting 1 "
            "reqs, KV cache usage 15.0% of 200 pages, prefix cache hit rate 50.0%");
  // Drafts and preemptions in the interval join the line.
  b.spec_draft_tokens = 40;
  b.spec_accepted_tokens = 30;
  b.preemptions = 2;
  line = stats_line(a, b, 10.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find(", draft acceptance 75.0% (30 of 40 tokens), 2 preempted"), std::string::npos) << *line;
  // Requests still waiting, nothing ran: a line (the operator sees the queue).
  EngineStats waiting = a;
  waiting.n_waiting = 5;
  line = stats_line(a, waiting, 10.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find("prompt throughput 0.0 tokens/s"), std::string::npos) << *line;
  EXPECT_NE(line->find("waiting 5 reqs"), std::string::npos) << *line;
}

TEST(DescribeRequest, PromptAndSamplingSettings) {
  auto r = parse_completion_body(
      R"({"model": "m", "prompt": "Say \"hi\"\nnow", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 4,
          "seed": 11, "stop": ["x", "y"], "logprobs": 2, "stream": true, "n": 2})",
      Endpoint::completions);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(describe_request(*r, "cmpl-5", 0),
            "request cmpl-5: completion, 2 choices, prompt \"Say \\\"hi\\\"\\nnow\", max_tokens 7, temperature 0.5, "
            "top_p 0.9, top_k 4, min_p 0, seed 11, 2 stop strings, logprobs 2, streamed");
  // --max-log-len cuts the text (and says how long it was) or the ids.
  EXPECT_NE(describe_request(*r, "cmpl-5", 3).find("prompt \"Say\" (12 bytes),"), std::string::npos);
  auto ids = parse_completion_body(R"({"prompt": [1, 2, 3, 4, 5], "max_tokens": 1, "frequency_penalty": 0.5})",
                                   Endpoint::completions);
  ASSERT_TRUE(ids.has_value());
  const std::string line = describe_request(*ids, "cmpl-6", 2);
  EXPECT_NE(line.find("prompt ids [1,2, ...] (5 ids)"), std::string::npos) << line;
  EXPECT_NE(line.find("penalties repetition 1 presence 0 frequency 0.5"), std::string::npos) << line;
  EXPECT_NE(describe_request(*ids, "cmpl-6", 0).find("prompt ids [1,2,3,4,5]"), std::string::npos);
}

// A server with both logs on: the request line names the response's id, and a stats line follows
// the request within a few intervals of 50 ms (polled; no time is asserted).
TEST(ServingLogs, RequestAndStatsLinesFromARunningServer) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("brigade_stats_log_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(512, 256, 5), dir.string()).is_ok());
  EngineOptions eo = testing::test_engine_options(dir.string(), 1);
  eo.topology.instances.front().kv.memory_mb = 16;
  auto engine = Engine::create(eo);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::mutex mu;
  std::vector<std::string> requests, stats;
  ServerOptions so;
  so.port = 0;
  so.model_name = "tiny";
  so.request_log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(line);
  };
  auto server = HttpServer::start(**engine, so);
  ASSERT_TRUE(server.has_value()) << server.status().to_string();
  auto logger = StatsLogger::start(**engine, 0.05, [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    stats.push_back(line);
  });
  const nlohmann::json body = {{"model", "tiny"}, {"prompt", "Once upon"}, {"max_tokens", 4}, {"temperature", 0},
                               {"ignore_eos", true}};
  auto response = http_request("127.0.0.1", (*server)->port(), {"POST", "/v1/completions", body.dump(), "", {{"X-Request-Id", "req-42"}}});
  ASSERT_TRUE(response.has_value());
  ASSERT_EQ(response->status, 200) << response->body;
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!stats.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  logger.reset();
  (*server)->stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].rfind("request cmpl-req-42: completion, 1 choice, prompt \"Once upon\", max_tokens 4, temperature 0,", 0),
            0u)
      << requests[0];
  ASSERT_FALSE(stats.empty());
  EXPECT_EQ(stats[0].rfind("stats: prompt throughput ", 0), 0u) << stats[0];
  EXPECT_NE(stats[0].find("KV cache usage"), std::string::npos) << stats[0];
  server->reset();
  engine->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade::server
