// Speculative decoding through the whole engine: greedy and seeded outputs with drafts equal the
// outputs without (the acceptance rule is the plain sampler's coupling, core/sampling.h
// verify_drafts), at in-flight depths 1 and 2, on both executor paths; stops, max_tokens and
// logprobs with several tokens per step; drafts accepted on stories260K.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <mutex>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using testing::greedy_ids;
using testing::create_engine;
using testing::run_concurrently;

EngineOptions spec_options(const std::string& model, int depth, bool spec, const std::string& step_path = "auto") {
  EngineOptions o = testing::test_engine_options(model, 2);
  o.topology.instances.front().kv.memory_mb = 64;
  o.topology.instances.front().scheduler.max_inflight_steps = depth;
  o.topology.instances.front().scheduler.max_step_tokens = 32;
  o.topology.instances.front().executors.front().step_path = step_path;
  if (spec) {
    auto& sp = o.topology.instances.front().scheduler.speculative;
    sp.method = "ngram";
    sp.num_tokens = 4;
    sp.min_acceptance = 0.0;  // keep drafting whatever the acceptance: the tests compare tokens
  }
  return o;
}

// Prompts that repeat themselves (so the drafter finds n-grams from the first decode) and ones
// that do not; greedy, seeded, seeded with penalties.
std::vector<GenerateOptions> spec_requests() {
  std::vector<GenerateOptions> reqs;
  for (int n : {3, 8, 20, 41}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back(n % 2 ? (i % 5) * 11 + 7 : (i * 37 + n) % 500 + 3);
    for (const GenerateOptions& r : testing::greedy_and_seeded(prompt, 24 + n % 7, 3, static_cast<uint64_t>(n * 10)))
      reqs.push_back(r);
  }
  return reqs;
}

class SpecEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("brigade_spec_test_" + std::to_string(::getpid()));
    Status st = write_synthetic_model(testing::tiny_llama(512, 256, 11), dir_.string());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path SpecEngine::dir_;

TEST_F(SpecEngine, OutputsEqualDecodingWithoutDraftsAtDepthOneAndTwo) {
  auto off = create_engine(spec_options(dir_.string(), 1, false));
  ASSERT_TRUE(off);
  const auto want = run_concurrently(*off, spec_requests());
  for (const std::string path : {"host", "device"}) {
    for (int depth : {1, 2}) {
      auto on = create_engine(spec_options(dir_.string(), depth, true, path));
      ASSERT_TRUE(on);
      const auto got = run_concurrently(*on, spec_requests());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_FALSE(want[i].token_ids.empty());
        EXPECT_EQ(got[i].token_ids, want[i].token_ids) << path << " path, depth " << depth << ", request " << i;
      }
      const EngineStats st = on->stats();
      EXPECT_GT(st.spec_accepted_tokens, 0u) << "the repeating prompts gave drafts, and some were accepted";
      EXPECT_LE(st.spec_accepted_tokens, st.spec_draft_tokens);
      EXPECT_EQ(st.kv_pages_used, st.cache_pages) << "only the prefix cache holds pages after the requests";
    }
  }
}

TEST_F(SpecEngine, SeededSamplingRepeats) {
  auto on = create_engine(spec_options(dir_.string(), 2, true));
  ASSERT_TRUE(on);
  GenerateOptions r = greedy_ids({7, 18, 29, 7, 18, 29, 7, 18}, 40);
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 77;
  auto a = on->generate(r);
  auto b = on->generate(r);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->token_ids, b->token_ids);
  r.sampling.seed = 78;
  EXPECT_NE(on->generate(r)->token_ids, a->token_ids) << "another seed, other tokens";
}

TEST_F(SpecEngine, StopsMaxTokensAndLogprobsWithSeveralTokensPerStep) {
  auto off = create_engine(spec_options(dir_.string(), 1, false));
  auto on = create_engine(spec_options(dir_.string(), 2, true));
  ASSERT_TRUE(off && on);
  GenerateOptions r = greedy_ids({7, 18, 29, 7, 18, 29, 7, 18}, 30);
  r.logprobs = 2;
  auto want = off->generate(r);
  auto got = on->generate(r);
  ASSERT_TRUE(want.has_value() && got.has_value());
  EXPECT_EQ(got->token_ids, want->token_ids);
  ASSERT_EQ(got->logprobs.size(), got->token_ids.size()) << "a logprob for every accepted token";
  for (size_t i = 0; i < want->logprobs.size(); ++i) EXPECT_FLOAT_EQ(got->logprobs[i], want->logprobs[i]) << i;
  EXPECT_EQ(got->finish, FinishReason::length);
  ASSERT_GE(want->token_ids.size(), 12u);

  // A stop token that first appears late in the output: both stop right after it.
  r.logprobs = -1;
  r.stop_ids = {want->token_ids[10]};
  const auto first = std::find(want->token_ids.begin(), want->token_ids.end(), want->token_ids[10]);
  const std::vector<int32_t> cut(want->token_ids.begin(), first + 1);
  auto stopped = on->generate(r);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->token_ids, cut);
  EXPECT_EQ(stopped->finish, FinishReason::stop);

  r.stop_ids.clear();
  r.max_tokens = 7;
  auto shorter = on->generate(r);
  ASSERT_TRUE(shorter.has_value());
  EXPECT_EQ(shorter->token_ids, std::vector<int32_t>(want->token_ids.begin(), want->token_ids.begin() + 7));
  EXPECT_EQ(shorter->finish, FinishReason::length);
}

// The events of one request: token ids and text of each.
std::vector<Event> collect_events(Engine& engine, const GenerateOptions& r) {
  std::mutex mu;
  std::vector<Event> events;
  std::promise<void> done;
  auto id = engine.submit(r, [&](const Event& ev) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(ev);
    }
    // After the unlock: once the waiter wakes, `mu` leaves scope with this frame.
    if (ev.finish != FinishReason::none) done.set_value();
  });
  EXPECT_TRUE(id.has_value()) << id.status().to_string();
  if (id) done.get_future().wait();
  return events;
}

// A stop string that completes at a token in the middle of an event's accepted run ends the
// output at that token: text, ids and usage stop there (the tokenizer cuts the event).
TEST_F(SpecEngine, AStopStringInsideAnAcceptedRunCutsTheIdsThere) {
  auto off = create_engine(spec_options(dir_.string(), 1, false));
  auto on = create_engine(spec_options(dir_.string(), 2, true));
  ASSERT_TRUE(off && on);
  GenerateOptions r;
  r.prompt = "abcabcabcabcabcabc";
  r.max_tokens = 80;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  // Without drafts every event is one token, so its text is what streaming shows after it.
  std::vector<int32_t> ids;
  std::vector<std::string> streamed;  // the text streamed up to and including token i
  for (const Event& ev : collect_events(*off, r)) {
    ASSERT_LE(ev.token_ids.size(), 1u);
    for (int32_t t : ev.token_ids) {
      ids.push_back(t);
      streamed.push_back((streamed.empty() ? "" : streamed.back()) + ev.text);
    }
  }
  std::vector<size_t> inside;  // tokens that are not the last of their event with drafts
  size_t n = 0;
  for (const Event& ev : collect_events(*on, r)) {
    for (size_t j = 0; j < ev.token_ids.size(); ++j, ++n) {
      ASSERT_LT(n, ids.size());
      ASSERT_EQ(ev.token_ids[j], ids[n]) << "the same tokens as without drafts";
      if (j + 1 < ev.token_ids.size()) inside.push_back(n);
    }
  }
  ASSERT_FALSE(inside.empty()) << "no event carried several tokens: drafts were never accepted";
  // The stop string is everything streamed up to a token inside a run (the output repeats
  // itself, so a shorter piece would first occur earlier): it completes exactly at that token.
  for (size_t i : inside) {
    if (i == 0 || streamed[i].size() == streamed[i - 1].size()) continue;  // the token added no text yet
    r.stop = {streamed[i]};
    auto cut = on->generate(r);
    ASSERT_TRUE(cut.has_value());
    EXPECT_EQ(cut->finish, FinishReason::stop);
    EXPECT_EQ(cut->text, "") << "the stop string is never streamed";
    EXPECT_EQ(cut->token_ids, std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i) + 1))
        << "the ids end at the token that completed the stop string, not at the end of its run";
    return;
  }
  GTEST_SKIP() << "no token inside a run added text";
}

TEST(SpecEngineConfig, BadSpeculativeKeysAreRefused) {
  EngineOptions o = spec_options("unused", 1, true);
  o.topology.instances.front().scheduler.speculative.num_tokens = 0;
  auto e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("num_tokens"), std::string::npos) << e.status().to_string();
  o.topology.instances.front().scheduler.speculative = {};
  o.topology.instances.front().scheduler.speculative.method = "eagle";
  e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("ngram, none"), std::string::npos) << e.status().to_string();
}

std::string stories_path() { return std::string(BRIGADE_TESTDATA) + "/models/stories260K.bin"; }

// stories260K's greedy output repeats itself (431 x 13 in llama2.c's reference), so the n-gram
// drafter's proposals get accepted.
TEST(SpecStories260K, GreedyOutputEqualsDecodingWithoutDraftsAndDraftsAreAccepted) {
  if (!fs::exists(stories_path())) GTEST_SKIP() << "shared testdata not found at " << stories_path();
  auto off = create_engine(spec_options(stories_path(), 1, false));
  ASSERT_TRUE(off);
  auto want = off->generate(greedy_ids({1}, 200));
  ASSERT_TRUE(want.has_value());
  for (int depth : {1, 2}) {
    auto on = create_engine(spec_options(stories_path(), depth, true));
    ASSERT_TRUE(on);
    auto got = on->generate(greedy_ids({1}, 200));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->token_ids, want->token_ids) << "depth " << depth;
    const EngineStats st = on->stats();
    EXPECT_GT(st.spec_accepted_tokens, 0u) << "depth " << depth;
    EXPECT_LT(st.steps, off->stats().steps) << "accepted drafts save steps";
  }
}

// Seeded sampling where drafts do get accepted (stories260K at a low temperature): the tokens of
// decoding without drafts, which checks that row j of a verified run draws from stream step
// n_generated + j.
TEST(SpecStories260K, SeededSamplingEqualsDecodingWithoutDrafts) {
  if (!fs::exists(stories_path())) GTEST_SKIP() << "shared testdata not found at " << stories_path();
  std::vector<GenerateOptions> reqs;
  for (uint64_t seed : {1, 2, 3, 4}) {
    GenerateOptions r = greedy_ids({1}, 120);
    r.sampling.temperature = 0.5f;
    r.sampling.seed = seed;
    if (seed % 2) r.sampling.repetition_penalty = 1.1f;
    reqs.push_back(r);
  }
  auto off = create_engine(spec_options(stories_path(), 1, false));
  auto on = create_engine(spec_options(stories_path(), 2, true));
  ASSERT_TRUE(off && on);
  const auto want = run_concurrently(*off, reqs);
  const auto got = run_concurrently(*on, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "request " << i;
  EXPECT_GT(on->stats().spec_accepted_tokens, 0u);
}

}  // namespace
}  // namespace brigade
