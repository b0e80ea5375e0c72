// The whole actor path: Engine → frontend → tokenizer → scheduler → executor (+ KV manager).
#include "brigade/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/engine/instance.h"
#include "models/make_model.h"
#include "models/synthetic_tokenizer.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

const std::vector<int32_t> kStoriesReference = {
    461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299, 362, 409, 283, 264, 283, 452, 288, 13, 431, 431,
    431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 431, 293, 430, 417, 363, 416, 315, 342, 418, 424, 400, 442,
    402, 303, 266, 299, 374, 466, 396, 303, 271, 362, 390, 469, 306, 469, 423, 314, 347, 305, 356, 333};

std::string stories_path() { return std::string(BRIGADE_TESTDATA) + "/models/stories260K.bin"; }

EngineOptions small_options(const std::string& model) {
  EngineOptions o = testing::test_engine_options(model, 2);
  o.topology.instances.front().kv.memory_mb = 64;
  return o;
}

using testing::greedy_ids;

using testing::run_concurrently;

// Submits every request from this thread before waiting for any, so all of them reach the
// scheduler within a step or two. run_concurrently's threads may start late on a loaded machine
// or under a sanitizer, and then the requests barely overlap.
std::vector<Completion> submit_together(Engine& engine, const std::vector<GenerateOptions>& reqs) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Completion> out;
    size_t n_done = 0;
  } sh;
  sh.out.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = engine.submit(reqs[i], [&sh, i](const Event& ev) {
      std::lock_guard<std::mutex> lock(sh.mu);
      Completion& c = sh.out[i];
      c.token_ids.insert(c.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finish != FinishReason::none) {
        c.finish = ev.finish;
        ++sh.n_done;
        sh.cv.notify_all();
      }
    });
    EXPECT_TRUE(id.has_value()) << id.status().to_string();
    if (!id) {
      std::lock_guard<std::mutex> lock(sh.mu);
      ++sh.n_done;
    }
  }
  std::unique_lock<std::mutex> lock(sh.mu);
  sh.cv.wait(lock, [&] { return sh.n_done == reqs.size(); });
  return std::move(sh.out);
}

class Stories260K : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(stories_path())) GTEST_SKIP() << "shared testdata not found at " << stories_path();
  }
};

TEST_F(Stories260K, GreedyMatchesLlama2cThroughActors) {
  auto engine = Engine::create(small_options(stories_path()));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  auto c = (*engine)->generate(greedy_ids({1}, 64));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids, kStoriesReference);
  EXPECT_EQ(c->finish, FinishReason::length);
}

TEST_F(Stories260K, EightConcurrentEqualTheSingleRequest) {
  auto engine = Engine::create(small_options(stories_path()));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::vector<GenerateOptions> reqs(8, greedy_ids({1}, 64));
  for (const auto& c : run_concurrently(**engine, reqs)) EXPECT_EQ(c.token_ids, kStoriesReference);
}

// int8 KV through the whole engine: batching and prefix-cache hits on a request's own prompt
// pages give the same greedy tokens as the request alone (the synthetic model's
// Int8KvPrefixCacheGivesTheOutputsOfNoCache adds eviction and preemption).
TEST_F(Stories260K, Int8KvIsExactUnderBatchingAndTheCache) {
  EngineOptions o = small_options(stories_path());
  o.topology.instances.front().kv.dtype = "int8";
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::vector<int32_t> prompt = {1};
  prompt.insert(prompt.end(), kStoriesReference.begin(), kStoriesReference.begin() + 20);
  const GenerateOptions req = greedy_ids(prompt, 48);
  auto alone = (*engine)->generate(req);
  ASSERT_TRUE(alone.has_value()) << alone.status().to_string();
  ASSERT_EQ(alone->token_ids.size(), 48u);
  const uint64_t hits_before = (*engine)->stats().cache_hit_tokens;
  for (const auto& c : submit_together(**engine, std::vector<GenerateOptions>(8, req)))
    EXPECT_EQ(c.token_ids, alone->token_ids);
  EXPECT_GE((*engine)->stats().cache_hit_tokens - hits_before, 8u * 16) << "the copies reused the prompt's page";
}

TEST_F(Stories260K, LogprobsAndPenaltiesReachTheSampler) {
  auto engine = Engine::create(small_options(stories_path()));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  GenerateOptions r = greedy_ids({1}, 64);
  r.logprobs = 3;
  auto c = (*engine)->generate(r);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids, kStoriesReference) << "asking for logprobs changes nothing";
  ASSERT_EQ(c->logprobs.size(), 64u);

  // The greedy reference repeats token 431 thirteen times in a row; a frequency penalty breaks
  // the run (the penalty grows with every repeat in the output).
  auto count = [](const std::vector<int32_t>& ids, int32_t t) { return std::count(ids.begin(), ids.end(), t); };
  r.logprobs = -1;
  r.sampling.frequency_penalty = 2.0f;
  auto p = (*engine)->generate(r);
  ASSERT_TRUE(p.has_value());
  EXPECT_LT(count(p->token_ids, 431), count(kStoriesReference, 431));
  r.sampling.frequency_penalty = 0.0f;
  r.sampling.repetition_penalty = 0.5f;  // < 1 rewards repeats
  EXPECT_FALSE((*engine)->generate(r)->token_ids == p->token_ids);
}

TEST_F(Stories260K, TopLogprobsRankTheSampledTokenFirstUnderGreedy) {
  auto engine = Engine::create(small_options(stories_path()));
  ASSERT_TRUE(engine.has_value());
  std::vector<Event> events;
  std::promise<void> done;
  GenerateOptions r = greedy_ids({1}, 8);
  r.logprobs = 4;
  auto id = (*engine)->submit(r, [&](const Event& ev) {
    events.push_back(ev);
    if (ev.finish != FinishReason::none) done.set_value();
  });
  ASSERT_TRUE(id.has_value());
  done.get_future().wait();
  int n = 0;
  for (const auto& ev : events) {
    ASSERT_EQ(ev.top_logprobs.size(), ev.token_ids.size());
    for (size_t i = 0; i < ev.token_ids.size(); ++i, ++n) {
      const auto& top = ev.top_logprobs[i];
      ASSERT_EQ(top.size(), 4u);
      EXPECT_EQ(top[0].first, ev.token_ids[i]);
      EXPECT_FLOAT_EQ(top[0].second, ev.logprobs[i]);
      EXPECT_LT(ev.logprobs[i], 0.0f);
      for (size_t k = 1; k < top.size(); ++k) EXPECT_LE(top[k].second, top[k - 1].second);
    }
  }
  EXPECT_EQ(n, 8);
}

class SyntheticEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("brigade_engine_test_" + std::to_string(::getpid()));
    Status st = write_synthetic_model(testing::tiny_llama(512, 256, 7), dir_.string());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path SyntheticEngine::dir_;

TEST_F(SyntheticEngine, BatchedEqualsAlone) {
  EngineOptions o = small_options(dir_.string());
  o.topology.instances.front().scheduler.max_step_tokens = 48;  // forces chunked prefill beside decodes
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::vector<GenerateOptions> reqs;
  for (int n : {1, 5, 17, 40, 90, 3}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back((i * 37 + n) % 500 + 3);
    reqs.push_back(greedy_ids(prompt, 12 + n % 7));
  }
  std::vector<Completion> alone;
  for (const auto& r : reqs) {
    auto c = (*engine)->generate(r);
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    alone.push_back(*c);
  }
  auto together = run_concurrently(**engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
    EXPECT_EQ(static_cast<int>(alone[i].token_ids.size()), reqs[i].max_tokens);
  }
}

// The roofline per step (DESIGN.md §9) through the engine's counters, against the arithmetic of
// testing::tiny_llama's shape (f32, tied, hidden 64, 2 layers, 4 heads of 16 over 2 KV heads, MLP
// 128, vocabulary 512): a 10-token prompt and 5 greedy tokens are one prefill step (10 rows, 55
// (query, key) pairs) and 4 decode steps at contexts 11..14.
TEST_F(SyntheticEngine, StepsReportTheirRooflineCost) {
  EngineOptions o = small_options(dir_.string());
  o.topology.instances.front().scheduler.max_inflight_steps = 1;
  o.topology.instances.front().executors.front().roofline = true;
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 10; ++i) prompt.push_back(i * 41 % 500 + 3);
  auto c = (*engine)->generate(greedy_ids(prompt, 5));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  const EngineStats s = (*engine)->stats();
  ASSERT_EQ(s.steps, 5u);
  const double linear = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64, table = 512 * 64;
  const double pairs = 55 + 11 + 12 + 13 + 14;
  EXPECT_EQ(s.step_flops, static_cast<uint64_t>(2 * linear * 14 + 2 * table * 5 + 4 * 16 * 4 * 2 * pairs));
  // Per step the linear weights and, for its logits row, the tied table (f32); 14 embedding rows
  // in all; KV (2 layers x 2 heads x 16 x K and V x 4 bytes = 512 per token): the prefill reads
  // 10 and writes 10, decode i reads 10 + i and writes 1.
  const double kv_positions = 20 + 12 + 13 + 14 + 15;
  EXPECT_EQ(s.step_bytes, static_cast<uint64_t>(5 * 4 * (linear + table) + 14 * 4 * 64 + 512 * kv_positions));
  // Ceilings measured at start; every step is put under the one that bound it.
  EXPECT_GT(s.peak_bytes_per_s, 1e8);
  EXPECT_GT(s.peak_flops_per_s, 1e8);
  EXPECT_EQ(s.memory_bound_steps + s.compute_bound_steps, s.steps);
  EXPECT_GT(s.memory_bound_roofline_us + s.compute_bound_roofline_us, 0.0);
  EXPECT_EQ(s.memory_bound_executor_us + s.compute_bound_executor_us, s.executor_us);
}

// r alone, then four copies of r at once (the second with another seed): the copies with r's
// seed repeat its tokens, the other seed draws others. Returns r's tokens.
std::vector<int32_t> expect_seed_repeats_batched(Engine& engine, const GenerateOptions& r) {
  auto a = engine.generate(r);
  EXPECT_TRUE(a.has_value()) << a.status().to_string();
  if (!a) return {};
  std::vector<GenerateOptions> reqs(4, r);
  reqs[1].sampling.seed = 99;
  auto batch = run_concurrently(engine, reqs);
  EXPECT_EQ(batch[0].token_ids, a->token_ids);
  EXPECT_EQ(batch[2].token_ids, a->token_ids);
  EXPECT_NE(batch[1].token_ids, a->token_ids) << "another seed gives another stream";
  return a->token_ids;
}

std::vector<GenerateOptions> mixed_requests() {
  std::vector<GenerateOptions> reqs;
  for (int n : {1, 5, 17, 40, 90, 3, 60, 8}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back((i * 37 + n) % 500 + 3);
    GenerateOptions r = greedy_ids(prompt, 10 + n % 9);
    if (n % 2) {  // half of them sample with a seed and penalties
      r.sampling.temperature = 0.8f;
      r.sampling.seed = static_cast<uint64_t>(n);
      r.sampling.frequency_penalty = 0.5f;
    }
    reqs.push_back(r);
  }
  return reqs;
}

TEST_F(SyntheticEngine, InflightDepthDoesNotChangeOutputs) {
  std::vector<std::vector<Completion>> by_depth;
  for (int depth : {1, 2, 3}) {
    EngineOptions o = small_options(dir_.string());
    o.topology.instances.front().scheduler.max_inflight_steps = depth;
    o.topology.instances.front().scheduler.max_step_tokens = 32;
    auto engine = Engine::create(o);
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    by_depth.push_back(run_concurrently(**engine, mixed_requests()));
  }
  for (size_t i = 0; i < by_depth[0].size(); ++i) {
    EXPECT_FALSE(by_depth[0][i].token_ids.empty());
    EXPECT_EQ(by_depth[1][i].token_ids, by_depth[0][i].token_ids) << "depth 2, request " << i;
    EXPECT_EQ(by_depth[2][i].token_ids, by_depth[0][i].token_ids) << "depth 3, request " << i;
  }
}

// The executor's device path (tokens sampled and fed on the backend, decode steps padded to
// buckets) forced on the CPU backend: the host path's tokens at every in-flight depth. The
// seeded requests of mixed_requests use penalties, so both paths sample them on the host.
TEST_F(SyntheticEngine, DevicePathGivesTheHostPathsTokensAtEveryDepth) {
  EngineOptions host_o = small_options(dir_.string());
  host_o.topology.instances.front().scheduler.max_step_tokens = 32;
  auto host = Engine::create(host_o);
  ASSERT_TRUE(host.has_value()) << host.status().to_string();
  const auto want = run_concurrently(**host, mixed_requests());
  for (int depth : {1, 2, 3}) {
    EngineOptions o = host_o;
    o.topology.instances.front().scheduler.max_inflight_steps = depth;
    o.topology.instances.front().executors.front().step_path = "device";
    auto engine = Engine::create(o);
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    const auto got = run_concurrently(**engine, mixed_requests());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_FALSE(want[i].token_ids.empty());
      EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "depth " << depth << ", request " << i;
    }
  }
}

// Seeded sampling on the device sampler (no penalties): the same tokens alone or batched, at
// depth 1 and 3.
TEST_F(SyntheticEngine, DeviceSamplerRepeatsBatchedOrAlone) {
  GenerateOptions r = greedy_ids({5, 6, 7}, 20);
  r.sampling.temperature = 0.9f;
  r.sampling.top_p = 0.95f;
  r.sampling.top_k = 40;
  r.sampling.seed = 1234;
  std::vector<int32_t> first;
  for (int depth : {1, 3}) {
    EngineOptions o = small_options(dir_.string());
    o.topology.instances.front().scheduler.max_inflight_steps = depth;
    o.topology.instances.front().executors.front().step_path = "device";
    auto engine = Engine::create(o);
    ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
    const auto alone = expect_seed_repeats_batched(**engine, r);
    if (first.empty()) first = alone;
    EXPECT_EQ(alone, first) << "depth " << depth;
  }
}

TEST(EngineCreate, AMissingGpuIsAClearError) {
  EngineOptions o;
  o.model_path = "unused";
  o.progress = false;
  o.topology.instances.front().executors.front().device = "cuda:99";
  auto e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.status().code(), StatusCode::unsupported) << e.status().to_string();
  EXPECT_NE(e.status().message().find("cuda:99"), std::string::npos) << e.status().to_string();
  o.topology.instances.front().executors.front().device = "gpu";
  e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("cpu, cuda, cuda:N"), std::string::npos) << e.status().to_string();
}

// Requests together under a pool too small for all of them (preempted ones are recomputed)
// give the outputs each gets alone in a roomy pool, for the KV dtype `kv_dtype` ("" = default).
void expect_preemption_keeps_outputs(const std::string& dir, const std::string& kv_dtype) {
  auto reqs = mixed_requests();
  EngineOptions roomy_options = small_options(dir);
  if (!kv_dtype.empty()) roomy_options.topology.instances.front().kv.dtype = kv_dtype;
  auto roomy = Engine::create(roomy_options);
  ASSERT_TRUE(roomy.has_value());
  std::vector<Completion> alone;
  for (const auto& r : reqs) alone.push_back(*(*roomy)->generate(r));

  EngineOptions o = roomy_options;
  o.topology.instances.front().kv.pages = 12;  // 192 token slots for 8 requests of up to 108
  auto tight = Engine::create(o);
  ASSERT_TRUE(tight.has_value()) << tight.status().to_string();
  auto together = submit_together(**tight, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
  EXPECT_GT((*tight)->stats().preemptions, 0u) << "the pool was too small to hold every sequence at once";
  EXPECT_EQ((*tight)->stats().kv_pages_used, (*tight)->stats().cache_pages) << "only cached prefixes hold pages";
}

TEST_F(SyntheticEngine, PreemptionUnderASmallKvPoolKeepsOutputs) { expect_preemption_keeps_outputs(dir_.string(), ""); }

// int8 rows are quantized alone, so a recompute after a preemption (other chunks, other
// page-mates) writes and reads the same values.
TEST_F(SyntheticEngine, Int8KvPreemptionUnderASmallKvPoolKeepsOutputs) {
  expect_preemption_keeps_outputs(dir_.string(), "int8");
}

TEST_F(SyntheticEngine, SeededSamplingRepeatsBatchedOrAlone) {
  auto engine = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(engine.has_value());
  GenerateOptions r = greedy_ids({5, 6, 7}, 20);
  r.sampling.temperature = 0.9f;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = 1234;
  expect_seed_repeats_batched(**engine, r);
}

// EngineOptions::seed (vLLM's --seed) seeds the draw of the seeds of requests that give none:
// two engines started with one seed sample the same tokens for the same unseeded requests in
// the same order; another seed samples others (20 tokens at temperature 1.5 over 512 tokens).
TEST_F(SyntheticEngine, EngineSeedRepeatsUnseededRequestsAcrossStarts) {
  const auto run = [&](std::optional<uint64_t> seed) {
    EngineOptions o = small_options(dir_.string());
    o.seed = seed;
    auto engine = Engine::create(o);
    EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
    std::vector<std::vector<int32_t>> out;
    if (!engine) return out;
    for (int i = 0; i < 3; ++i) {
      GenerateOptions r = greedy_ids({5, 6, 7}, 20);
      r.sampling.temperature = 1.5f;
      r.ignore_eos = true;
      auto c = (*engine)->generate(r);
      EXPECT_TRUE(c.has_value()) << c.status().to_string();
      out.push_back(c ? c->token_ids : std::vector<int32_t>{});
    }
    return out;
  };
  const auto a = run(7), b = run(7), other = run(8);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b) << "the same seed, the same requests in the same order";
  EXPECT_NE(a[0], a[1]) << "each request still draws its own seed";
  EXPECT_NE(a, other);
}

// EngineOptions::max_logprobs (vLLM's --max-logprobs) bounds logprobs and prompt_logprobs; -1
// lets a request rank the whole vocabulary (512 here).
TEST_F(SyntheticEngine, MaxLogprobsBoundsTopLogprobs) {
  EngineOptions o = small_options(dir_.string());
  o.max_logprobs = 3;
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  EXPECT_EQ((*engine)->model().max_logprobs, 3);
  GenerateOptions r = greedy_ids({5, 6, 7}, 2);
  r.logprobs = 4;
  auto refused = (*engine)->generate(r);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("logprobs must be at most 3"), std::string::npos) << refused.status().message();
  r.logprobs = -1;
  r.prompt_logprobs = 4;
  EXPECT_FALSE((*engine)->generate(r).has_value());
  r.prompt_logprobs = 3;
  EXPECT_TRUE((*engine)->generate(r).has_value());
  engine->reset();

  o.max_logprobs = -1;
  engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  EXPECT_EQ((*engine)->model().max_logprobs, 512);
  std::vector<Event> events;
  std::promise<void> done;
  r = greedy_ids({5, 6, 7}, 2);
  r.logprobs = 512;
  ASSERT_TRUE((*engine)->submit(r, [&](const Event& ev) {
    events.push_back(ev);
    if (ev.finish != FinishReason::none) done.set_value();
  }).has_value());
  done.get_future().wait();
  int n = 0;
  for (const Event& ev : events) {
    for (const auto& top : ev.top_logprobs) {
      ++n;
      ASSERT_EQ(top.size(), 512u);
      double total = 0.0;
      for (const auto& [id, lp] : top) total += std::exp(static_cast<double>(lp));
      EXPECT_NEAR(total, 1.0, 1e-3) << "the whole distribution";
    }
  }
  EXPECT_EQ(n, 2);
  r.logprobs = 513;
  EXPECT_FALSE((*engine)->generate(r).has_value());

  o.max_logprobs = -2;
  auto bad = Engine::create(o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("max_logprobs must be >= 0, or -1"), std::string::npos);
}

// kv.memory_fraction (--gpu-memory-utilization): the fraction of the device less what the load
// left in use less the reserve (1% of the device, at least 256 MiB); nothing left is refused naming
// the numbers.
TEST(KvBudget, FractionOfTheDeviceLessWhatIsUsedAndAReserve) {
  constexpr int64_t GiB = int64_t{1} << 30, MiB = int64_t{1} << 20;
  auto h100 = kv_budget_from_fraction(0.9, 60 * GiB, 80 * GiB);  // 20 GiB of weights and buffers
  ASSERT_TRUE(h100.has_value()) << h100.status().to_string();
  EXPECT_EQ(*h100, static_cast<int64_t>(0.9 * 80 * GiB) - 20 * GiB - 80 * GiB / 100);
  auto small = kv_budget_from_fraction(0.5, 7 * GiB, 8 * GiB);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(*small, 4 * GiB - GiB - 256 * MiB) << "the reserve is at least 256 MiB";
  auto none = kv_budget_from_fraction(0.2, 60 * GiB, 80 * GiB);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("kv.memory_fraction 0.20 (--gpu-memory-utilization) leaves no room for KV "
                                         "pages: 20.00 of the device's 80.00 GiB are in use"),
            std::string::npos)
      << none.status().message();
}

// On the CPU kv.memory_fraction sizes nothing: the pool stays kv.memory_mb's (a warning says so).
TEST_F(SyntheticEngine, MemoryFractionLeavesTheCpuPoolToMemoryMb) {
  EngineOptions plain = small_options(dir_.string()), fraction = plain;
  fraction.topology.instances.front().kv.memory_fraction = 0.5;
  auto a = Engine::create(plain);
  ASSERT_TRUE(a.has_value());
  const int pages = (*a)->stats().kv_pages_total;
  a->reset();
  auto b = Engine::create(fraction);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ((*b)->stats().kv_pages_total, pages);
}

TEST_F(SyntheticEngine, TextPromptStreamsCompleteText) {
  auto engine = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(engine.has_value());
  ASSERT_TRUE((*engine)->model().has_tokenizer);
  GenerateOptions r;
  r.prompt = "Hello, wörld! 12345";
  r.max_tokens = 24;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  auto c = (*engine)->generate(r);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 24u);
  EXPECT_GT(c->prompt_tokens, 1);
}

// EngineOptions::tokenizer_path (vLLM's --tokenizer): a copy of the model without its tokenizer
// files has no tokenizer (text prompts and chat refused); given the original directory's, it
// tokenizes, templates chats and generates what the original does; a path without a tokenizer
// fails the start naming it.
TEST_F(SyntheticEngine, TokenizerFromAnotherDirectory) {
  const fs::path bare = fs::temp_directory_path() / ("brigade_engine_bare_" + std::to_string(::getpid()));
  fs::remove_all(bare);
  fs::create_directories(bare);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(dir_ / f, bare / f);
  GenerateOptions r;
  r.prompt = "Hello, world";
  r.max_tokens = 6;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  {
    auto none = Engine::create(small_options(bare.string()));
    ASSERT_TRUE(none.has_value()) << none.status().to_string();
    EXPECT_FALSE((*none)->model().has_tokenizer);
    EXPECT_FALSE((*none)->generate(r).has_value());
  }
  auto original = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(original.has_value());
  auto want = (*original)->generate(r);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  const auto want_chat = (*original)->format_chat({{"user", "hi"}}, {}, true);
  ASSERT_TRUE(want_chat.has_value()) << want_chat.status().to_string();
  original->reset();

  EngineOptions o = small_options(bare.string());
  o.tokenizer_path = dir_.string();
  auto borrowed = Engine::create(o);
  ASSERT_TRUE(borrowed.has_value()) << borrowed.status().to_string();
  EXPECT_TRUE((*borrowed)->model().has_tokenizer);
  auto got = (*borrowed)->generate(r);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  EXPECT_EQ(got->token_ids, want->token_ids);
  EXPECT_EQ(got->prompt_tokens, want->prompt_tokens);
  auto chat = (*borrowed)->format_chat({{"user", "hi"}}, {}, true);
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_EQ(*chat, *want_chat) << "the chat template from the tokenizer's tokenizer_config.json";
  borrowed->reset();

  o.tokenizer_path = bare.string();
  auto missing = Engine::create(o);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("tokenizer " + bare.string()), std::string::npos) << missing.status().message();
  fs::remove_all(bare);
}

// A text prompt that is not UTF-8 is refused saying so (by the tokenizer actor), and serving goes on.
TEST_F(SyntheticEngine, InvalidUtf8PromptIsRefused) {
  auto engine = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(engine.has_value());
  GenerateOptions r;
  r.prompt = "ok \xff\xfe \xc3";
  r.max_tokens = 4;
  r.sampling.temperature = 0.0f;
  auto bad = (*engine)->generate(r);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("UTF-8"), std::string::npos) << bad.status().to_string();
  r.prompt = "ok";
  auto ok = (*engine)->generate(r);
  EXPECT_TRUE(ok.has_value()) << ok.status().to_string();
}

TEST_F(SyntheticEngine, StopStringEndsTheRequestWithoutStreamingIt) {
  auto engine = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(engine.has_value());
  GenerateOptions r;
  r.prompt = "abc";
  r.max_tokens = 40;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  auto full = (*engine)->generate(r);
  ASSERT_TRUE(full.has_value());
  ASSERT_GE(full->text.size(), 6u);
  // Stop on a piece of the text the model is known to produce.
  const std::string stop = full->text.substr(3, 2);
  r.stop = {stop};
  auto cut = (*engine)->generate(r);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->finish, FinishReason::stop);
  EXPECT_EQ(cut->text, full->text.substr(0, full->text.find(stop)));
}

TEST_F(SyntheticEngine, BadRequestsAreRefusedAndServingGoesOn) {
  auto engine = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(engine.has_value());
  Engine& e = **engine;
  auto nop = [](const Event&) {};
  GenerateOptions r = greedy_ids({5, 6}, 4);
  r.max_tokens = 0;
  EXPECT_EQ(e.submit(r, nop).status().code(), StatusCode::invalid_argument);
  r = greedy_ids({5, 6}, 4);
  r.sampling.temperature = -1.0f;
  EXPECT_EQ(e.submit(r, nop).status().code(), StatusCode::invalid_argument);
  r = greedy_ids({5, 512}, 4);
  auto bad_id = e.submit(r, nop);
  ASSERT_FALSE(bad_id.has_value());
  EXPECT_NE(bad_id.status().message().find("512"), std::string::npos);
  r = greedy_ids({}, 4);
  EXPECT_FALSE(e.submit(r, nop).has_value());
  // Too long for the context (256): refused with an error event.
  auto too_long = e.generate(greedy_ids(std::vector<int32_t>(300, 7), 4));
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.status().message().find("context"), std::string::npos) << too_long.status().message();
  // Still serving.
  auto ok = e.generate(greedy_ids({5, 6, 7}, 5));
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->token_ids.size(), 5u);
}

// scheduler.max_model_len (vLLM's --max-model-len) is the context in place of the model's 256
// positions: the summary says it, a prompt that fills it is refused, a request's max_tokens is cut
// to what it leaves (finish length at the limit); more than the positions is refused at start.
TEST_F(SyntheticEngine, MaxModelLenIsTheContext) {
  EngineOptions o = small_options(dir_.string());
  o.topology.instances.front().scheduler.max_model_len = 40;
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  Engine& e = **engine;
  EXPECT_EQ(e.model().max_context, 40);
  auto full = e.generate(greedy_ids(std::vector<int32_t>(40, 7), 4));
  ASSERT_FALSE(full.has_value());
  EXPECT_NE(full.status().message().find("the model's context is 40 tokens"), std::string::npos) << full.status().message();
  GenerateOptions r = greedy_ids(std::vector<int32_t>(30, 7), 100);
  r.ignore_eos = true;
  auto cut = e.generate(r);
  ASSERT_TRUE(cut.has_value()) << cut.status().to_string();
  EXPECT_EQ(cut->token_ids.size(), 10u) << "30 prompt tokens + 10 fill the 40";
  EXPECT_EQ(cut->finish, FinishReason::length);

  o.topology.instances.front().scheduler.max_model_len = 257;
  auto refused = Engine::create(o);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("scheduler.max_model_len 257 exceeds the model's 256 positions"),
            std::string::npos)
      << refused.status().message();
}

TEST_F(SyntheticEngine, CancelEndsWithAbort) {
  auto engine = Engine::create(small_options(dir_.string()));
  ASSERT_TRUE(engine.has_value());
  std::promise<Event> last;
  auto id = (*engine)->submit(greedy_ids({5, 6, 7}, 200), [&](const Event& ev) {
    if (ev.finish != FinishReason::none) last.set_value(ev);
  });
  ASSERT_TRUE(id.has_value());
  (*engine)->cancel(*id);
  auto ev = last.get_future().get();
  EXPECT_EQ(ev.finish, FinishReason::abort);
  EXPECT_LT(ev.completion_tokens, 200);
  auto ok = (*engine)->generate(greedy_ids({5}, 3));
  ASSERT_TRUE(ok.has_value()) << "the pages of the aborted request came back";
}

TEST(EngineCreate, BadModelsAreClearErrors) {
  auto missing = Engine::create(small_options("/nonexistent/model"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("/nonexistent/model"), std::string::npos) << missing.status().message();

  const fs::path bad = fs::temp_directory_path() / ("brigade_bad_" + std::to_string(::getpid()) + ".bin");
  { std::ofstream(bad) << "not a model"; }
  auto corrupt = Engine::create(small_options(bad.string()));
  EXPECT_FALSE(corrupt.has_value());
  fs::remove(bad);

  // A tokenizer with more tokens than the model's embedding has rows belongs to another model.
  const fs::path mismatched = fs::temp_directory_path() / ("brigade_vocab_" + std::to_string(::getpid()));
  SyntheticModelSpec spec;
  spec.hidden_size = 16;
  spec.n_layers = 1;
  spec.n_heads = 2;
  spec.n_kv_heads = 1;
  spec.intermediate_size = 32;
  spec.vocab_size = 300;
  spec.max_position = 32;
  spec.dtype = DType::f32;
  ASSERT_TRUE(write_synthetic_model(spec, mismatched.string()).is_ok());
  auto bigger = synthetic_tokenizer_json(400);
  ASSERT_TRUE(bigger.has_value());
  { std::ofstream(mismatched / "tokenizer.json") << *bigger; }
  auto wrong_vocab = Engine::create(small_options(mismatched.string()));
  fs::remove_all(mismatched);
  ASSERT_FALSE(wrong_vocab.has_value());
  EXPECT_NE(wrong_vocab.status().message().find("400 tokens"), std::string::npos) << wrong_vocab.status().to_string();

  EngineOptions o = small_options(stories_path());
  o.topology.instances.front().kv.dtype = "f8";
  auto bad_kv = Engine::create(o);
  EXPECT_FALSE(bad_kv.has_value());
}

// Requests sharing prefixes (a 40-token "system prompt", a few tails, one repeated prompt), half
// sampled with a seed and penalties.
std::vector<GenerateOptions> shared_prefix_requests() {
  std::vector<int32_t> system;
  for (int i = 0; i < 40; ++i) system.push_back((i * 53 + 11) % 500 + 3);
  std::vector<GenerateOptions> reqs;
  for (int n : {7, 25, 3, 25, 60, 1}) {
    std::vector<int32_t> prompt = system;
    for (int i = 0; i < n; ++i) prompt.push_back((i * 29 + n) % 500 + 3);
    GenerateOptions r = greedy_ids(prompt, 12);
    if (n % 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = static_cast<uint64_t>(n);
      r.sampling.repetition_penalty = 1.2f;
      r.sampling.presence_penalty = 0.4f;
    }
    reqs.push_back(r);
  }
  return reqs;
}

EngineOptions cache_options(const std::string& model, bool radix, int pages = 0, const std::string& kv_dtype = "") {
  EngineOptions o = small_options(model);
  if (!kv_dtype.empty()) o.topology.instances.front().kv.dtype = kv_dtype;
  o.topology.instances.front().cache.radix = radix;
  o.topology.instances.front().scheduler.max_step_tokens = 32;  // prompts run in chunks
  if (pages > 0) o.topology.instances.front().kv.pages = pages;
  return o;
}

// The cache-on outputs equal the cache-off ones for the KV dtype `kv_dtype` ("" = the default).
void expect_cache_gives_outputs_of_no_cache(const std::string& dir, const std::string& kv_dtype) {
  auto off = Engine::create(cache_options(dir, false, 0, kv_dtype));
  auto on = Engine::create(cache_options(dir, true, 0, kv_dtype));
  ASSERT_TRUE(off.has_value() && on.has_value());
  const auto reqs = shared_prefix_requests();
  for (size_t i = 0; i < reqs.size(); ++i) {  // one at a time: each later one finds the prefix cached
    auto want = (*off)->generate(reqs[i]);
    auto got = (*on)->generate(reqs[i]);
    ASSERT_TRUE(want.has_value() && got.has_value());
    EXPECT_EQ(got->token_ids, want->token_ids) << "request " << i;
  }
  // The scheduler answers prefix queries from its cache (the repeated prompt: all its whole pages).
  auto cached = (*on)->cached_prefix_tokens(reqs[1].prompt_ids);
  ASSERT_TRUE(cached.has_value()) << cached.status().to_string();
  EXPECT_EQ(*cached, static_cast<int>(reqs[1].prompt_ids.size()) / 16 * 16);
  EXPECT_EQ(*(*off)->cached_prefix_tokens(reqs[1].prompt_ids), 0);
  const EngineStats st = (*on)->stats();
  // Every request after the first reuses the two whole pages of the system prompt at least; the
  // repeated prompt reuses all its whole pages but the one holding its last token.
  EXPECT_GE(st.cache_hit_tokens, 5u * 32u);
  EXPECT_EQ((*off)->stats().cache_hit_tokens, 0u);
  EXPECT_EQ(st.kv_pages_used, st.cache_pages);
  // Together (prompts complete while others share them) and under a pool too small for all: the
  // cache evicts, sequences get preempted, outputs stay the same.
  auto tight = Engine::create(cache_options(dir, true, 14, kv_dtype));
  ASSERT_TRUE(tight.has_value());
  auto together = submit_together(**tight, reqs);
  auto again = submit_together(**on, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto want = (*off)->generate(reqs[i]);
    ASSERT_TRUE(want.has_value());
    EXPECT_EQ(together[i].token_ids, want->token_ids) << "tight pool, request " << i;
    EXPECT_EQ(again[i].token_ids, want->token_ids) << "warm cache, request " << i;
  }
  EXPECT_GT((*tight)->stats().cache_evicted_pages, 0u);
}

TEST_F(SyntheticEngine, PrefixCacheGivesTheOutputsOfNoCache) { expect_cache_gives_outputs_of_no_cache(dir_.string(), ""); }

// int8 KV quantizes each token's rows alone (cpu/kv_int8.h), so a page written by a chunk, by
// decode steps, by another request or by a recompute after a preemption reads back the same.
TEST_F(SyntheticEngine, Int8KvPrefixCacheGivesTheOutputsOfNoCache) {
  expect_cache_gives_outputs_of_no_cache(dir_.string(), "int8");
}

TEST_F(SyntheticEngine, AMultiTurnChatReusesTheGeneratedTokensOfEarlierTurns) {
  auto engine = Engine::create(cache_options(dir_.string(), true));
  ASSERT_TRUE(engine.has_value());
  std::vector<int32_t> history;
  for (int i = 0; i < 21; ++i) history.push_back((i * 17 + 5) % 500 + 3);
  for (int turn = 0; turn < 3; ++turn) {
    const uint64_t hits_before = (*engine)->stats().cache_hit_tokens;
    auto reply = (*engine)->generate(greedy_ids(history, 20));
    ASSERT_TRUE(reply.has_value());
    if (turn > 0) {
      // The previous turn's prompt and answer (all but the last answer token, whose KV was never
      // computed) are cached, in whole pages of 16.
      const uint64_t reused = (*engine)->stats().cache_hit_tokens - hits_before;
      EXPECT_GE(reused, static_cast<uint64_t>((history.size() - 1 - 9) / 16 * 16)) << "turn " << turn;
    }
    history.insert(history.end(), reply->token_ids.begin(), reply->token_ids.end());
    for (int i = 0; i < 9; ++i) history.push_back((turn * 31 + i * 7) % 500 + 3);  // the next user message
  }
}

}  // namespace
}  // namespace brigade
