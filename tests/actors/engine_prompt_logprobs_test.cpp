// Prompt logprobs (GenerateOptions::prompt_logprobs) through the whole engine, against
// references that are not brigade's: transformers' logits of every prompt position in the
// committed fixtures (llama, qwen3, qwen3_moe; log_softmax of the logits before each token), and
// for the real stories260K a plain forward's logits. Every executor path: host, device at
// in-flight depth 2, chunked prefill over a small token budget, preemption by recompute, a radix
// cache hit (which must not skip positions), tensor parallelism, n-gram speculation and PD
// separation. Each checks that the positions come once, in order, in the request's first event.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "brigade/engine.h"
#include "brigade/station.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

// log_softmax of a transformers logits row differs from ours by at most twice the logit
// tolerance (the logit itself, and the log-sum-exp).
constexpr float kLogprobTol = 2 * testing::kLogitTol;

std::vector<double> log_softmax(const std::vector<float>& logits) {
  double mx = -INFINITY, sum = 0.0;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  std::vector<double> out;
  out.reserve(logits.size());
  for (float v : logits) out.push_back(static_cast<double>(v) - mx - std::log(sum));
  return out;
}

// The prompt logprobs of one request: all in its first event, none in any other.
std::vector<PromptLogprob> prompt_logprobs_of(const std::vector<Event>& events, const std::string& what) {
  if (events.empty()) return {};
  for (size_t i = 1; i < events.size(); ++i)
    EXPECT_TRUE(events[i].prompt_logprobs.empty()) << what << ": prompt logprobs in event " << i;
  EXPECT_NE(events.back().finish, FinishReason::error) << what << ": " << events.back().error;
  return events.front().prompt_logprobs;
}

// got against the reference rows: logits[q - 1] scores prompt[q].
void expect_matches(const std::vector<PromptLogprob>& got, const std::vector<int32_t>& prompt,
                    const std::vector<std::vector<float>>& logits, int k, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), prompt.size()) << what << ": one entry per prompt token";
  EXPECT_EQ(got[0].token, prompt[0]) << what;
  EXPECT_FALSE(got[0].logprob.has_value()) << what << ": the first prompt token has no logprob";
  EXPECT_EQ(got[0].rank, 0) << what;
  for (size_t q = 1; q < prompt.size(); ++q) {
    const std::string at = what + " position " + std::to_string(q);
    ASSERT_EQ(got[q].token, prompt[q]) << at << ": positions in prompt order";
    ASSERT_TRUE(got[q].logprob.has_value()) << at;
    const std::vector<double> ref = log_softmax(logits[q - 1]);
    const double want = ref[static_cast<size_t>(prompt[q])];
    EXPECT_NEAR(*got[q].logprob, want, tol) << at;
    int lo = 1, hi = 1;  // the rank, up to reference rows within the tolerance of the token's
    for (double v : ref) {
      lo += v > want + tol ? 1 : 0;
      hi += v > want - tol ? 1 : 0;
    }
    EXPECT_GE(got[q].rank, lo) << at;
    EXPECT_LE(got[q].rank, hi) << at;
    ASSERT_EQ(got[q].top.size(), static_cast<size_t>(k)) << at;
    for (size_t j = 0; j < got[q].top.size(); ++j) {
      const auto& t = got[q].top[j];
      EXPECT_NEAR(t.logprob, ref[static_cast<size_t>(t.token)], tol) << at << " top " << j;
      if (j > 0) {
        EXPECT_LE(t.logprob, got[q].top[j - 1].logprob) << at << ": best first";
      }
    }
    const double best = *std::max_element(ref.begin(), ref.end());
    if (k > 0) {
      EXPECT_NEAR(got[q].top[0].logprob, best, tol) << at;
    }
  }
}

GenerateOptions scoring(const std::vector<int32_t>& prompt, int max_tokens, int k) {
  GenerateOptions r = testing::greedy_ids(prompt, max_tokens);
  r.prompt_logprobs = k;
  return r;
}

EngineOptions options(const std::string& model) {
  EngineOptions o = testing::test_engine_options(model, 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 8;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = 16;  // the 40-token prompt takes three chunks
  return o;
}

// Each fixture case scored, alone and with the others in the same steps, max_tokens 0 and 3.
void expect_fixture(const EngineOptions& o, const std::string& name, const std::string& what) {
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  const auto cases = testing::read_fixture_cases(name);
  ASSERT_FALSE(cases.empty());
  std::vector<GenerateOptions> reqs;
  for (const auto& fc : cases) {
    reqs.push_back(scoring(fc.prompt, 0, 3));
    reqs.push_back(scoring(fc.prompt, 3, 2));
  }
  const auto got = testing::collect_events(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& fc = cases[i / 2];
    const std::string at = what + " " + name + " case " + std::to_string(i / 2) + " max_tokens " +
                           std::to_string(reqs[i].max_tokens);
    expect_matches(prompt_logprobs_of(got[i], at), fc.prompt, fc.logits, reqs[i].prompt_logprobs, kLogprobTol, at);
    int n_tokens = 0;
    for (const Event& ev : got[i]) n_tokens += static_cast<int>(ev.token_ids.size());
    EXPECT_EQ(n_tokens, reqs[i].max_tokens) << at;
    EXPECT_EQ(got[i].back().finish, FinishReason::length) << at;
    if (reqs[i].max_tokens == 3) {
      std::vector<int32_t> tokens;
      for (const Event& ev : got[i]) tokens.insert(tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
      EXPECT_EQ(tokens, std::vector<int32_t>(fc.greedy.begin(), fc.greedy.begin() + 3)) << at << ": transformers' greedy";
    }
  }
}

TEST(PromptLogprobs, EqualTransformersLogSoftmaxOnTheHostPath) {
  for (const char* name : {"llama", "qwen3", "qwen3_moe"}) expect_fixture(options(testing::fixture_dir(name)), name, "host");
}

TEST(PromptLogprobs, EqualTransformersOnTheDevicePathWithTwoStepsInFlight) {
  EngineOptions o = options(testing::fixture_dir("llama"));
  o.topology.instances.front().executors.front().step_path = "device";
  o.topology.instances.front().scheduler.max_inflight_steps = 2;
  expect_fixture(o, "llama", "device");
}

TEST(PromptLogprobs, ChunksOfFourTokensScoreEveryPositionOnce) {
  EngineOptions o = options(testing::fixture_dir("qwen3"));
  o.topology.instances.front().scheduler.max_step_tokens = 4;
  o.topology.instances.front().kv.page_size = 4;
  expect_fixture(o, "qwen3", "budget 4");
}

TEST(PromptLogprobs, UnderTensorParallelismRankZeroScores) {
  for (const char* name : {"qwen3", "qwen3_moe"}) {
    EngineOptions o = options(testing::fixture_dir(name));
    o.topology.instances.front().executors.front().tp = 2;
    expect_fixture(o, name, "tp 2");
  }
}

TEST(PromptLogprobs, WithNgramSpeculationOn) {
  EngineOptions o = options(testing::fixture_dir("llama"));
  auto& sp = o.topology.instances.front().scheduler.speculative;
  sp.method = "ngram";
  sp.num_tokens = 3;
  sp.min_acceptance = 0.0;
  expect_fixture(o, "llama", "ngram");
}

TEST(PromptLogprobs, ThePrefillInstanceOfPdSeparationScoresThem) {
  const EngineOptions o = testing::prefill_decode(options(testing::fixture_dir("llama")));
  expect_fixture(o, "llama", "pd");
}

// The prefix cache holds the prompt (an earlier request computed it), yet the request that asks
// for prompt logprobs recomputes every position, and its pages are cached again afterwards.
TEST(PromptLogprobs, ARadixCacheHitDoesNotSkipPositions) {
  auto engine = testing::create_engine(options(testing::fixture_dir("llama")));
  ASSERT_TRUE(engine);
  const auto fc = testing::read_fixture_cases("llama").back();  // 40 tokens: 5 pages of 8
  ASSERT_TRUE(engine->generate(testing::greedy_ids(fc.prompt, 2)).has_value());
  ASSERT_GE(*engine->cached_prefix_tokens(fc.prompt), 32);
  const uint64_t hits_before = engine->stats().cache_hit_tokens;
  const auto got = testing::collect_events(*engine, {scoring(fc.prompt, 1, 4)});
  expect_matches(prompt_logprobs_of(got[0], "cached"), fc.prompt, fc.logits, 4, kLogprobTol, "cached");
  EXPECT_EQ(engine->stats().cache_hit_tokens, hits_before) << "no cached position was skipped";
  ASSERT_TRUE(engine->generate(testing::greedy_ids(fc.prompt, 1)).has_value());
  EXPECT_GT(engine->stats().cache_hit_tokens, hits_before) << "the cache still serves plain requests";
}

// Holds requests until `n` have arrived, then releases them all: they reach the scheduler
// together, however slowly the test thread submits them on a loaded machine.
class Gate final : public Station {
 public:
  explicit Gate(size_t n) : n_(n) {}
  StationVerdict on_request(StationRequest& r, StationContext& ctx) override {
    held_.push_back(r.id);
    if (held_.size() < n_) return StationVerdict::hold();
    for (size_t i = 0; i + 1 < held_.size(); ++i) ctx.release(held_[i]);
    return StationVerdict::pass();
  }

 private:
  size_t n_;
  std::vector<uint64_t> held_;
};

// A KV pool too small for the batch: sequences are preempted (some mid-prompt, some after it)
// and recomputed, yet each prompt position is reported once and equals the reference.
TEST(PromptLogprobs, PreemptedSequencesReportEachPositionOnce) {
  EngineOptions o = options(testing::fixture_dir("llama"));
  o.station_types["gate"] = [](const StationSpec&) -> Expected<std::unique_ptr<Station>> {
    return std::unique_ptr<Station>(std::make_unique<Gate>(5));
  };
  o.topology.stations.push_back({"gate", "gate", false, {}});
  auto& inst = o.topology.instances.front();
  inst.kv.page_size = 4;
  // 80 positions: the batch wants 3 x 47 + 2 x 48, and any two of its sequences run to the end
  // together need 24 pages, so admitting more than one (the gate makes them wait together)
  // forces a preemption whatever the order.
  inst.kv.pages = 20;
  inst.cache.radix = false;
  inst.scheduler.max_step_tokens = 12;
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  const auto cases = testing::read_fixture_cases("llama");
  const auto& shorter = cases[1];  // 7 tokens
  const auto& longer = cases.back();  // 40 tokens
  std::vector<GenerateOptions> reqs(3, scoring(shorter.prompt, 40, 2));
  reqs.push_back(scoring(longer.prompt, 8, 2));
  reqs.push_back(scoring(longer.prompt, 8, 2));
  const auto got = testing::collect_events(*engine, reqs);
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& fc = i < 3 ? shorter : longer;
    const std::string at = "request " + std::to_string(i);
    expect_matches(prompt_logprobs_of(got[i], at), fc.prompt, fc.logits, 2, kLogprobTol, at);
  }
  EXPECT_GT(engine->stats().preemptions, 0u) << "the pool forced preemptions";
}

TEST(PromptLogprobs, MaxTokensZeroNeedsPromptLogprobsAndAtMostTwenty) {
  auto engine = testing::create_engine(options(testing::fixture_dir("llama")));
  ASSERT_TRUE(engine);
  GenerateOptions r = testing::greedy_ids({1, 2, 3}, 0);
  auto refused = engine->submit(r, [](const Event&) {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("prompt_logprobs"), std::string::npos) << refused.status().message();
  r.prompt_logprobs = 21;
  EXPECT_FALSE(engine->submit(r, [](const Event&) {}).has_value());
  r.prompt_logprobs = 0;
  auto one = engine->generate(r);
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  EXPECT_TRUE(one->token_ids.empty());
  EXPECT_EQ(one->finish, FinishReason::length);
  ASSERT_EQ(one->prompt_logprobs.size(), 3u);
  EXPECT_TRUE(one->prompt_logprobs[1].top.empty()) << "k = 0: the token's own logprob only";
  // A one-token prompt has only the first entry, without a logprob.
  r.prompt_ids = {7};
  auto single = engine->generate(r);
  ASSERT_TRUE(single.has_value()) << single.status().to_string();
  ASSERT_EQ(single->prompt_logprobs.size(), 1u);
  EXPECT_FALSE(single->prompt_logprobs[0].logprob.has_value());
}

// Sampling settings shape the sampled tokens only: prompt logprobs are the raw distribution.
TEST(PromptLogprobs, SamplingSettingsDoNotApply) {
  auto engine = testing::create_engine(options(testing::fixture_dir("llama")));
  ASSERT_TRUE(engine);
  const auto fc = testing::read_fixture_cases("llama")[0];  // 7 tokens (case 1 has one: prompt[2] would be past its end)
  GenerateOptions r = scoring(fc.prompt, 2, 3);
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 5;
  r.sampling.repetition_penalty = 1.5f;
  r.sampling.logit_bias = {{fc.prompt[2], 50.0f}};
  const auto got = testing::collect_events(*engine, {r});
  expect_matches(prompt_logprobs_of(got[0], "shaped"), fc.prompt, fc.logits, 3, kLogprobTol, "shaped");
}

// stories260K (llama2.c's real checkpoint): the prompt logprobs of run.c's own greedy text sum
// to its log-likelihood under a plain forward of the whole text.
TEST(PromptLogprobs, Stories260KSumIsThePlainForwardLogLikelihood) {
  const std::string path = std::string(BRIGADE_TESTDATA) + "/models/stories260K.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "test data absent: " << path;
  const std::vector<int32_t> text = {1,   461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299, 362, 409, 283,
                                     264, 283, 452, 288, 13,  431, 431, 431, 293, 430, 417, 363, 416, 315, 342, 418,
                                     424, 400, 442, 402, 303, 266, 299, 374, 466, 396, 303, 271, 362, 390, 469, 306};
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions lo;
  lo.progress = false;
  auto model = Model::load(path, *backend, lo);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  constexpr int kPageSize = 16, kPages = 4;
  auto kv = KvCache::allocate(*backend, (*model)->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const std::vector<float> logits = testing::run_step(
      **model, *backend, *kv, testing::make_step({testing::SeqChunk{0, text, 0, /*all_logits=*/true}}, kPageSize, kPages));
  const size_t vocab = static_cast<size_t>((*model)->config().vocab_size);
  double want = 0.0;
  std::vector<std::vector<float>> rows;
  for (size_t q = 1; q < text.size(); ++q) {
    rows.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>((q - 1) * vocab),
                      logits.begin() + static_cast<std::ptrdiff_t>(q * vocab));
    want += log_softmax(rows.back())[static_cast<size_t>(text[q])];
  }
  EngineOptions o = options(path);
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  const auto got = testing::collect_events(*engine, {scoring(text, 0, 1)});
  const auto lps = prompt_logprobs_of(got[0], "stories260K");
  double sum = 0.0;
  for (const auto& p : lps) sum += p.logprob.value_or(0.0f);
  EXPECT_NEAR(sum, want, 1e-3 * std::fabs(want)) << "the text's log-likelihood";
  // Chunks of 16 against one 47-row forward: the rows agree to float rounding.
  expect_matches(lps, text, rows, 1, 1e-4f, "stories260K");
}

}  // namespace
}  // namespace brigade
