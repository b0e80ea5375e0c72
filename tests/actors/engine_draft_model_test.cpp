// Speculative decoding with a draft model (`method: draft_model`) through the whole engine: the
// target itself as its draft (every draft accepted under greedy), a smaller draft of the same
// vocabulary (some accepted), and in both cases the tokens of decoding without drafts, greedy
// and seeded, on both executor paths at depths 1 and 2, under preemption and after aborts;
// the load-time errors; stories260K drafting for itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using testing::greedy_ids;
using testing::create_engine;
using testing::expect_same_tokens;
using testing::run_concurrently;

EngineOptions draft_options(const std::string& model, const std::string& draft, int depth,
                            const std::string& step_path = "auto") {
  EngineOptions o = testing::test_engine_options(model, 2);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 64;
  inst.scheduler.max_inflight_steps = depth;
  inst.scheduler.max_step_tokens = 32;
  inst.executors.front().step_path = step_path;
  if (!draft.empty()) {
    auto& sp = inst.scheduler.speculative;
    sp.method = "draft_model";
    sp.model = draft;
    sp.num_tokens = 4;
    sp.min_acceptance = 0.0;  // keep drafting whatever the acceptance: the tests compare tokens
  }
  return o;
}

// Greedy, seeded, and seeded with penalties, over prompts of several lengths.
std::vector<GenerateOptions> requests(bool sampled) {
  std::vector<GenerateOptions> reqs;
  for (int n : {3, 8, 20, 41}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back((i * 37 + n) % 500 + 3);
    for (const GenerateOptions& r : testing::greedy_and_seeded(prompt, 24 + n % 7, sampled ? 3 : 1, static_cast<uint64_t>(n * 10)))
      reqs.push_back(r);
  }
  return reqs;
}

class DraftModelEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("brigade_draft_engine_test_" + std::to_string(::getpid()));
    ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(512, 256, 11), target()).is_ok());
    // The target's first layer, embedding and head (make-model seeds each tensor by its name):
    // a cheaper model whose greedy tokens agree with the target's some of the time.
    SyntheticModelSpec small = testing::tiny_llama(512, 256, 11);
    small.n_layers = 1;
    ASSERT_TRUE(write_synthetic_model(small, draft()).is_ok());
    ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(400, 256, 11), (dir_ / "other_vocab").string()).is_ok());
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string target() { return (dir_ / "target").string(); }
  static std::string draft() { return (dir_ / "draft").string(); }
  static fs::path dir_;
};
fs::path DraftModelEngine::dir_;

TEST_F(DraftModelEngine, TheTargetAsItsOwnDraftHasEveryDraftAcceptedUnderGreedy) {
  auto off = create_engine(draft_options(target(), "", 1));
  ASSERT_TRUE(off);
  const auto want = run_concurrently(*off, requests(false));
  for (const std::string path : {"host", "device"}) {
    for (int depth : {1, 2}) {
      auto on = create_engine(draft_options(target(), target(), depth, path));
      ASSERT_TRUE(on);
      expect_same_tokens(run_concurrently(*on, requests(false)), want, path + " path, depth " + std::to_string(depth));
      const EngineStats st = on->stats();
      EXPECT_GT(st.spec_draft_tokens, 0u);
      EXPECT_EQ(st.spec_accepted_tokens, st.spec_draft_tokens) << path << " path, depth " << depth;
      EXPECT_LT(st.steps, off->stats().steps) << "accepted drafts save target steps";
      EXPECT_GT(st.spec_draft_forwards, 0u);
      EXPECT_EQ(st.kv_pages_used, st.cache_pages) << "only the prefix cache holds pages after the requests";
    }
  }
}

TEST_F(DraftModelEngine, ASmallerDraftChangesNoTokenGreedyOrSeeded) {
  auto off = create_engine(draft_options(target(), "", 1));
  ASSERT_TRUE(off);
  const auto want = run_concurrently(*off, requests(true));
  for (const std::string path : {"host", "device"}) {
    for (int depth : {1, 2}) {
      auto on = create_engine(draft_options(target(), draft(), depth, path));
      ASSERT_TRUE(on);
      expect_same_tokens(run_concurrently(*on, requests(true)), want, path + " path, depth " + std::to_string(depth));
      const EngineStats st = on->stats();
      EXPECT_GT(st.spec_accepted_tokens, 0u) << "the one-layer draft agrees with the target sometimes";
      EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens) << "... and not always";
    }
  }
}

// A pool of 10 pages of 16 tokens for 6 sequences of up to 80 tokens: sequences are preempted
// and recomputed (the draft's K/V of their tokens stays valid, or is prefilled again).
TEST_F(DraftModelEngine, PreemptionUnderATightPoolChangesNoToken) {
  std::vector<GenerateOptions> reqs;
  for (int n = 0; n < 6; ++n) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 30 + n; ++i) prompt.push_back((i * 53 + n * 7) % 500 + 3);
    GenerateOptions r = greedy_ids(prompt, 48);
    if (n % 2) {
      r.sampling.temperature = 0.7f;
      r.sampling.seed = static_cast<uint64_t>(n);
    }
    reqs.push_back(r);
  }
  EngineOptions o = draft_options(target(), "", 2);
  o.topology.instances.front().kv.pages = 10;
  auto off = create_engine(o);
  ASSERT_TRUE(off);
  const auto want = run_concurrently(*off, reqs);
  for (const std::string& d : {target(), draft()}) {
    EngineOptions od = draft_options(target(), d, 2);
    od.topology.instances.front().kv.pages = 10;
    auto on = create_engine(od);
    ASSERT_TRUE(on);
    expect_same_tokens(run_concurrently(*on, reqs), want, "draft " + d);
    EXPECT_GT(on->stats().preemptions, 0u) << "the pool is tight enough to preempt";
    EXPECT_GT(on->stats().spec_draft_tokens, 0u);
  }
}

// Requests aborted while they draft and verify end cleanly; the engine goes on giving the tokens
// of decoding without drafts, and every page comes back.
TEST_F(DraftModelEngine, AbortsWhileDraftingLeaveTheEngineCorrect) {
  auto on = create_engine(draft_options(target(), draft(), 2));
  auto off = create_engine(draft_options(target(), "", 1));
  ASSERT_TRUE(on && off);
  // Each request cancels itself once it has a few tokens: drafts are then being verified.
  std::vector<std::promise<FinishReason>> ends(4);
  std::vector<int> n_tokens(4, 0);
  std::vector<std::promise<uint64_t>> ids(4);
  std::vector<std::shared_future<uint64_t>> id_of;
  for (auto& p : ids) id_of.push_back(p.get_future().share());
  for (size_t i = 0; i < 4; ++i) {
    GenerateOptions r = greedy_ids({static_cast<int32_t>(10 + i), 20, 30, 40}, 200);
    auto id = on->submit(r, [&, i](const Event& ev) {
      n_tokens[i] += static_cast<int>(ev.token_ids.size());
      if (ev.finish != FinishReason::none) {
        ends[i].set_value(ev.finish);
      } else if (n_tokens[i] >= 6 && n_tokens[i] - static_cast<int>(ev.token_ids.size()) < 6) {
        on->cancel(id_of[i].get());
      }
    });
    ASSERT_TRUE(id.has_value());
    ids[i].set_value(*id);
  }
  for (auto& e : ends) EXPECT_EQ(e.get_future().get(), FinishReason::abort);
  const GenerateOptions r = greedy_ids({10, 20, 30, 40}, 40);
  auto got = on->generate(r);
  auto want = off->generate(r);
  ASSERT_TRUE(got.has_value() && want.has_value());
  EXPECT_EQ(got->token_ids, want->token_ids);
  const EngineStats st = on->stats();
  EXPECT_EQ(st.kv_pages_used, st.cache_pages);
  EXPECT_EQ(st.n_running, 0);
}

// PD separation: the decode instance drafts for sequences it received with their KV; its draft
// has seen none of their tokens and prefills them.
TEST_F(DraftModelEngine, HandedOffSequencesArePrefilledByTheDecodeInstancesDraft) {
  EngineOptions o = draft_options(target(), "", 2);
  const InstanceConfig plain = o.topology.instances.front();
  InstanceConfig prefill = plain, decode = draft_options(target(), target(), 2).topology.instances.front();
  prefill.role = "prefill";
  prefill.name = "p0";
  decode.role = "decode";
  decode.name = "d0";
  o.topology.instances = {prefill, decode};
  auto pd = create_engine(o);
  auto off = create_engine(draft_options(target(), "", 2));
  ASSERT_TRUE(pd && off);
  expect_same_tokens(run_concurrently(*pd, requests(false)), run_concurrently(*off, requests(false)), "PD");
  const auto per = pd->instance_stats();
  ASSERT_EQ(per.size(), 2u);
  EXPECT_GT(per[1].stats.pd_transfers_in, 0u);
  EXPECT_GT(per[1].stats.spec_draft_tokens, 0u);
  EXPECT_EQ(per[1].stats.spec_accepted_tokens, per[1].stats.spec_draft_tokens) << "the target drafting for itself";
  EXPECT_GE(per[1].stats.spec_draft_fed_tokens, 3u + 8 + 20 + 41) << "every prompt was prefilled by the draft";
}

TEST_F(DraftModelEngine, ADraftThatDoesNotLoadOrHasAnotherVocabularyIsRefused) {
  auto missing = Engine::create(draft_options(target(), (dir_ / "missing").string(), 1));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("the draft model '" + (dir_ / "missing").string() + "'"), std::string::npos)
      << missing.status().to_string();
  auto other = Engine::create(draft_options(target(), (dir_ / "other_vocab").string(), 1));
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.status().message().find("vocabulary of 400 tokens and the target 512"), std::string::npos)
      << other.status().to_string();
  EngineOptions no_model = draft_options(target(), target(), 1);
  no_model.topology.instances.front().scheduler.speculative.model.clear();
  auto none = Engine::create(no_model);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("model must name the draft checkpoint"), std::string::npos)
      << none.status().to_string();
}

std::string stories_path() { return std::string(BRIGADE_TESTDATA) + "/models/stories260K.bin"; }

TEST(DraftModelStories260K, DraftingForItselfAcceptsEveryGreedyDraftAndChangesNoToken) {
  if (!fs::exists(stories_path())) GTEST_SKIP() << "shared testdata not found at " << stories_path();
  auto off = create_engine(draft_options(stories_path(), "", 1));
  auto on = create_engine(draft_options(stories_path(), stories_path(), 2));
  ASSERT_TRUE(off && on);
  const std::vector<GenerateOptions> greedy = {greedy_ids({1}, 200), greedy_ids({1, 403, 407}, 150)};
  expect_same_tokens(run_concurrently(*on, greedy), run_concurrently(*off, greedy), "stories260K greedy");
  const EngineStats st = on->stats();
  EXPECT_GT(st.spec_draft_tokens, 0u);
  EXPECT_EQ(st.spec_accepted_tokens, st.spec_draft_tokens) << "a model agrees with its own greedy drafts";
  EXPECT_LT(st.steps, off->stats().steps);

  GenerateOptions seeded = greedy_ids({1}, 120);
  seeded.sampling.temperature = 0.5f;
  seeded.sampling.seed = 3;
  expect_same_tokens(run_concurrently(*on, {seeded}), run_concurrently(*off, {seeded}), "stories260K seeded");
}

}  // namespace
}  // namespace brigade
