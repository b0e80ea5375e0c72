// EAGLE-3 speculative decoding (`method: eagle3`, `model: <head dir>`), over the fixtures of
// scripts/make_eagle3_fixtures.py: the executor's pass (StepRunner, as for MTP) drafts what the
// reference chain (transformers' Llama modules composed as vLLM's llama_eagle3.py) drafts, and
// after a verify step with a rejected draft its drafts are those of a fresh runner over the
// accepted sequence. Through the engine: no token changes, greedy or seeded, at depths 1 and 2
// and over prefix-cache hits; with the edited pair the greedy text is transformers' and the
// drafts are accepted in fewer steps; the same over Qwen3 / Qwen3-MoE targets and a head in the
// speculators layout; setups that cannot run are refused at create.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "brigade/topology.h"
#include "cpu/cpu_backend.h"
#include "models/mapped_file.h"
#include "models/model.h"
#include "tests/actors/draft_pass_runner.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

using testing::create_engine;
using testing::expect_same_tokens;
using testing::run_concurrently;

std::string path(const std::string& sub) { return std::string(BRIGADE_FIXTURES) + "/eagle3/" + sub; }

nlohmann::json expected() { return nlohmann::json::parse(read_text_file(path("expected.json")).value()); }

// The runner over the random target and head.
class Eagle3Runner : public testing::DraftPassRunner {
 public:
  Eagle3Runner() : DraftPassRunner(path("target"), options()) {}

 private:
  static LoadOptions options() {
    LoadOptions lo;
    lo.eagle3 = path("head");
    return lo;
  }
};

TEST(Eagle3, APromptStepDraftsTheReferenceChain) {
  const auto e = expected();
  ASSERT_EQ(e.at("cases").size(), 2u);
  for (const auto& c : e.at("cases")) {
    const auto tokens = c.at("tokens").get<std::vector<int32_t>>();
    Eagle3Runner r;
    const auto [got, drafts] = r.step(std::vector<int32_t>(tokens.begin(), tokens.end() - 1), 0, 0, 3);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], tokens.back()) << "the target's greedy token";
    EXPECT_EQ(drafts, c.at("chain_drafts").get<std::vector<int32_t>>());
  }
}

// Prompt, then a verify step whose first two drafts are the target's greedy tokens and the third
// is not: the drafts made after the three accepted tokens are a fresh runner's over them.
TEST(Eagle3, AfterARejectedDraftTheDraftsAreThoseOfTheAcceptedSequence) {
  const auto e = expected();
  ASSERT_FALSE(e.at("cases").empty());
  const auto c = e.at("cases").back();
  const auto t = c.at("tokens").get<std::vector<int32_t>>();
  const int p = c.at("target_greedy_from").get<int>();
  ASSERT_GE(static_cast<int>(t.size()), p + 5);
  const auto at = [&](int i) { return t[static_cast<size_t>(i)]; };
  Eagle3Runner a;
  const auto [first, d0] = a.step(std::vector<int32_t>(t.begin(), t.begin() + p), 0, 0, 3);
  ASSERT_EQ(first, std::vector<int32_t>{at(p)});
  EXPECT_EQ(d0.size(), 3u);
  const int32_t wrong = (at(p + 3) + 1) % 256;
  const auto [verified, d1] = a.step({at(p), at(p + 1), at(p + 2), wrong}, p, 3, 3);
  ASSERT_EQ(verified, (std::vector<int32_t>{at(p + 1), at(p + 2), at(p + 3)}));
  Eagle3Runner fresh;
  const auto [again, want] = fresh.step(std::vector<int32_t>(t.begin(), t.begin() + p + 3), 0, 0, 3);
  ASSERT_EQ(again, std::vector<int32_t>{at(p + 3)});
  EXPECT_EQ(d1, want);
  EXPECT_EQ(d1.size(), 3u);
}

// ---- the engine ----

EngineOptions eagle3_options(const std::string& target, const std::string& head, bool on, int depth = 1, int k = 3) {
  EngineOptions o = testing::draft_engine_options(target, depth);
  auto& inst = o.topology.instances.front();
  if (on) {
    SpeculativeConfig& sp = inst.scheduler.speculative;
    EXPECT_TRUE(parse_speculative_json(R"({"method": "eagle3", "num_speculative_tokens": )" + std::to_string(k) +
                                           R"(, "model": ")" + head + R"("})", sp).is_ok());
    sp.min_acceptance = 0.0;  // keep drafting: the tests compare tokens
  }
  return o;
}

std::vector<GenerateOptions> requests(bool sampled) { return testing::draft_engine_requests(sampled, 250); }

TEST(Eagle3, EngineChangesNoTokenGreedyOrSeeded) {
  auto off = create_engine(eagle3_options(path("target"), "", false));
  ASSERT_TRUE(off);
  const auto want = run_concurrently(*off, requests(true));
  for (int depth : {1, 2}) {
    auto on = create_engine(eagle3_options(path("target"), path("head"), true, depth));
    ASSERT_TRUE(on);
    expect_same_tokens(run_concurrently(*on, requests(true)), want, "depth " + std::to_string(depth));
    // Again: the prompts now hit the prefix cache (its pages hold the head's entries too).
    expect_same_tokens(run_concurrently(*on, requests(true)), want, "cached, depth " + std::to_string(depth));
    const EngineStats st = on->stats();
    EXPECT_GT(st.spec_draft_tokens, 0u) << "EAGLE-3 drafts were verified";
    EXPECT_GT(st.cache_hit_tokens, 0u);
  }
}

// Each request alone, one after the other: the step counts then do not depend on when the
// requests' threads reached the engine.
std::vector<Completion> run_one_by_one(Engine& engine, const std::vector<GenerateOptions>& reqs) {
  std::vector<Completion> out;
  for (const GenerateOptions& r : reqs) {
    auto c = engine.generate(r);
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    out.push_back(c ? *c : Completion{});
  }
  return out;
}

// The edited pair: the greedy text is transformers' (expected.json), and the head's first draft
// is always the target's next token: with one draft per step every draft is accepted; with three,
// the first of each run is.
void expect_drafts_accepted(const std::string& prefix) {
  SCOPED_TRACE(prefix);
  const std::string target = path(prefix + "_target"), head = path(prefix + "_head");
  std::vector<GenerateOptions> reqs;
  std::vector<std::vector<int32_t>> want;
  const auto e = expected();  // alive across the loop
  ASSERT_EQ(e.at(prefix + "_cases").size(), 2u);
  for (const auto& c : e.at(prefix + "_cases")) {
    reqs.push_back(testing::greedy_ids(c.at("prompt").get<std::vector<int32_t>>(), 8));
    want.push_back(c.at("greedy").get<std::vector<int32_t>>());
  }
  auto off = create_engine(eagle3_options(target, "", false));
  ASSERT_TRUE(off);
  const auto plain = run_one_by_one(*off, reqs);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(plain[i].token_ids, want[i]) << "transformers' greedy";
  for (int k : {1, 3}) {
    auto on = create_engine(eagle3_options(target, head, true, 1, k));
    ASSERT_TRUE(on);
    const auto out = run_one_by_one(*on, reqs);
    ASSERT_EQ(out.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out[i].token_ids, want[i]) << "transformers' greedy, k " << k;
    const EngineStats st = on->stats();
    EXPECT_GT(st.spec_draft_tokens, 0u);
    ::testing::Test::RecordProperty(prefix + "_k" + std::to_string(k) + "_accepted_of_drafted",
                                    std::to_string(st.spec_accepted_tokens) + "/" + std::to_string(st.spec_draft_tokens));
    if (k == 1) {
      EXPECT_EQ(st.spec_accepted_tokens, st.spec_draft_tokens);
    }
    EXPECT_GE(st.spec_accepted_tokens, st.spec_verify_seqs) << "the first draft of each run is accepted, k " << k;
    EXPECT_LT(st.steps, off->stats().steps) << "accepted drafts save target steps, k " << k;
  }
  // Longer and more requests: the same tokens with drafts as without.
  auto on = create_engine(eagle3_options(target, head, true, 2));
  ASSERT_TRUE(on);
  expect_same_tokens(run_concurrently(*on, requests(false)), run_concurrently(*off, requests(false)), "bigram, depth 2");
}

TEST(Eagle3, AHeadThatKnowsTheNextTokenHasItsDraftsAccepted) { expect_drafts_accepted("bigram"); }

// The same over a Qwen3 target with the head in the speculators layout (Eagle3Speculator,
// norm_before_residual), named by a path holding "eagle3" and no method: vLLM's inference.
TEST(Eagle3, ASpeculatorsHeadOnAQwen3TargetHasItsDraftsAccepted) {
  SpeculativeConfig sp;
  ASSERT_TRUE(parse_speculative_json(R"({"num_speculative_tokens": 2, "model": ")" + path("qwen3_bigram_head") + R"("})",
                                     sp).is_ok());
  EXPECT_EQ(sp.method, "eagle3") << "the path names eagle3";
  expect_drafts_accepted("qwen3_bigram");
}

// Random heads beside a Qwen3 target (LlamaForCausalLMEagle3 layout) and a Qwen3-MoE target (the
// speculators layout): no token changes, greedy or seeded, at depths 1 and 2.
TEST(Eagle3, QwenTargetsChangeNoTokenGreedyOrSeeded) {
  for (const std::string name : {"qwen3", "qwen3_moe"}) {
    const std::string target = path(name + "_target");
    auto off = create_engine(eagle3_options(target, "", false));
    ASSERT_TRUE(off);
    const auto want = run_concurrently(*off, requests(true));
    for (int depth : {1, 2}) {
      auto on = create_engine(eagle3_options(target, path(name + "_head"), true, depth));
      ASSERT_TRUE(on) << name;
      expect_same_tokens(run_concurrently(*on, requests(true)), want, name + ", depth " + std::to_string(depth));
      const EngineStats st = on->stats();
      EXPECT_GT(st.spec_draft_tokens, 0u) << name;
      RecordProperty(name + "_depth" + std::to_string(depth) + "_accepted_of_drafted",
                     std::to_string(st.spec_accepted_tokens) + "/" + std::to_string(st.spec_draft_tokens));
    }
  }
}

TEST(Eagle3, SetupsThatCannotRunAreRefused) {
  const auto refused = [](const EngineOptions& o, const std::string& says) {
    auto e = Engine::create(o);
    ASSERT_FALSE(e.has_value()) << says;
    EXPECT_NE(e.status().message().find(says), std::string::npos) << e.status().message();
  };
  refused(eagle3_options(std::string(BRIGADE_FIXTURES) + "/gpt_oss", path("head"), true),
          "runs on a llama, qwen2, qwen3 or qwen3_moe target");
  refused(eagle3_options(path("bigram_target"), path("head"), true), "needs the target's kv heads");
  EngineOptions no_model = eagle3_options(path("target"), path("head"), true);
  no_model.topology.instances.front().scheduler.speculative.model.clear();
  refused(no_model, "model must name the EAGLE-3 head's directory");
  EngineOptions tp = eagle3_options(path("target"), path("head"), true);
  tp.topology.instances.front().executors.front().tp = 2;
  refused(tp, "tp 1");
}

}  // namespace
}  // namespace brigade
