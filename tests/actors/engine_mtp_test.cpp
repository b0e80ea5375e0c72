// MTP speculative decoding (`method: mtp`), for DeepSeek-V3's module and GLM-4.5's (each test runs
// on both fixtures): the executor's MTP pass (StepRunner) drafts what the reference chain of
// scripts/make_fixtures.py deepseek_v3_mtp / glm4_moe_mtp drafts, and after a verify step
// with a rejected draft its drafts are those of a fresh runner over the accepted sequence (the
// module's entries at rejected positions are overwritten, its cached ones reused). Through the
// whole engine: no token changes with MTP on, greedy or seeded, with prefix-cache hits and
// under preemption; a model whose MTP module predicts exactly what the target will say (a
// "bigram" edit of the fixture) has every draft accepted in fewer steps; setups that cannot run
// are refused at create. Also on the glm4_moe_lite_mtp, deepseek_v32_mtp and glm_moe_dsa_mtp fixtures.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "actors/executor/step_runner.h"
#include "brigade/engine.h"
#include "cpu/cpu_backend.h"
#include "models/mapped_file.h"
#include "models/model.h"
#include "tests/actors/draft_pass_runner.h"
#include "tests/engine_test_util.h"
#include "tests/models/mtp_cases.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using testing::create_engine;
using testing::expect_same_tokens;
using testing::run_concurrently;

std::string fixture_path(const std::string& name) { return std::string(BRIGADE_FIXTURES) + "/" + name; }

// The fixtures' target has 2 layers: the module is model.layers.2.
class Mtp : public ::testing::TestWithParam<std::string> {
 protected:
  std::string fixture() const { return fixture_path(GetParam()); }
};

using testing::MtpCase;
using testing::read_mtp_cases;

std::vector<MtpCase> read_cases(const std::string& fixture) { return read_mtp_cases(fixture + "/expected.json"); }

// The runner over a fixture loaded with its MTP module.
class MtpRunner : public testing::DraftPassRunner {
 public:
  explicit MtpRunner(const std::string& fixture) : DraftPassRunner(fixture, options()) {}

 private:
  static LoadOptions options() {
    LoadOptions lo;
    lo.mtp = true;
    return lo;
  }
};

TEST_P(Mtp, APromptStepDraftsTheReferenceChain) {
  const std::vector<MtpCase> cases = read_cases(fixture());
  ASSERT_EQ(cases.size(), 2u);
  for (const MtpCase& c : cases) {
    MtpRunner r(fixture());
    const int n = static_cast<int>(c.tokens.size());
    const auto [got, drafts] = r.step(std::vector<int32_t>(c.tokens.begin(), c.tokens.end() - 1), 0, 0, 3);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], c.tokens.back()) << "the target's greedy token";
    EXPECT_EQ(drafts, c.chain_drafts) << n << " tokens";
  }
}

// Prompt, then a verify step whose first two drafts are the target's own greedy tokens and the
// third is not: three tokens come back, and the drafts made after them equal those of a fresh
// runner given the accepted sequence as one prompt.
TEST_P(Mtp, AfterARejectedDraftTheDraftsAreThoseOfTheAcceptedSequence) {
  const std::vector<MtpCase> cases = read_cases(fixture());
  ASSERT_FALSE(cases.empty());
  const MtpCase c = cases.back();
  const int p = c.target_greedy_from;
  ASSERT_GE(static_cast<int>(c.tokens.size()), p + 5);
  MtpRunner a(fixture());
  const auto [first, d0] = a.step(std::vector<int32_t>(c.tokens.begin(), c.tokens.begin() + p), 0, 0, 3);
  ASSERT_EQ(first, std::vector<int32_t>{c.tokens[static_cast<size_t>(p)]});
  EXPECT_EQ(d0.size(), 3u);
  const int32_t wrong = (c.tokens[static_cast<size_t>(p + 3)] + 1) % 128;
  const auto [verified, d1] = a.step({c.tokens[static_cast<size_t>(p)], c.tokens[static_cast<size_t>(p + 1)],
                                      c.tokens[static_cast<size_t>(p + 2)], wrong}, p, 3, 3);
  ASSERT_EQ(verified, (std::vector<int32_t>{c.tokens[static_cast<size_t>(p + 1)], c.tokens[static_cast<size_t>(p + 2)],
                                            c.tokens[static_cast<size_t>(p + 3)]}));
  MtpRunner fresh(fixture());
  const auto [again, want] = fresh.step(std::vector<int32_t>(c.tokens.begin(), c.tokens.begin() + p + 3), 0, 0, 3);
  ASSERT_EQ(again, std::vector<int32_t>{c.tokens[static_cast<size_t>(p + 3)]});
  EXPECT_EQ(d1, want);
  EXPECT_EQ(d1.size(), 3u);
}

// ---- the engine ----

EngineOptions mtp_options(const std::string& model, bool on, int depth = 1) {
  EngineOptions o = testing::draft_engine_options(model, depth);
  auto& inst = o.topology.instances.front();
  if (on) {
    auto& sp = inst.scheduler.speculative;
    sp.method = "mtp";
    sp.num_tokens = 3;
    sp.min_acceptance = 0.0;  // keep drafting: the tests compare tokens
  }
  return o;
}

std::vector<GenerateOptions> requests(bool sampled) { return testing::draft_engine_requests(sampled, 120); }

TEST_P(Mtp, EngineChangesNoTokenGreedyOrSeeded) {
  auto off = create_engine(mtp_options(fixture(), false));
  ASSERT_TRUE(off);
  const auto want = run_concurrently(*off, requests(true));
  for (int depth : {1, 2}) {
    auto on = create_engine(mtp_options(fixture(), true, depth));
    ASSERT_TRUE(on);
    expect_same_tokens(run_concurrently(*on, requests(true)), want, "depth " + std::to_string(depth));
    // Again: the prompts now hit the prefix cache (its pages hold the module's entries too).
    expect_same_tokens(run_concurrently(*on, requests(true)), want, "cached, depth " + std::to_string(depth));
    const EngineStats st = on->stats();
    EXPECT_GT(st.spec_draft_tokens, 0u) << "MTP drafts were verified";
    EXPECT_GT(st.cache_hit_tokens, 0u);
    EXPECT_EQ(st.kv_pages_used, st.cache_pages) << "only the prefix cache holds pages after the requests";
  }
}

// The fixture edited so that every layer adds nothing (o_proj and every down projection zero):
// the target's next token is a function f of the current one, and the MTP module (eh_proj = [I 0],
// enorm ones, shared_head.norm = the final norm) predicts f of its input token, which is exactly
// the token after next. Every greedy draft is then accepted.
// Written once per process (and left in the temp dir's pid-named folder, as the other engine
// tests' synthetic models).
std::string bigram_copy(const std::string& fixture_name) {
  const std::string fixture = fixture_path(fixture_name);
  const fs::path dir =
      fs::temp_directory_path() / ("brigade_mtp_bigram_" + fixture_name + "_" + std::to_string(::getpid()));
  if (fs::exists(dir / "model.safetensors")) return dir.string();
  fs::create_directories(dir);
  fs::copy_file(fixture + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  std::ifstream in(fixture + "/model.safetensors", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const auto header = nlohmann::json::parse(std::string(bytes.data() + 8, header_len));
  const size_t base = 8 + header_len;
  const auto data = [&](const std::string& name) {
    const auto& t = header.at(name);
    EXPECT_EQ(t.at("dtype"), "F32") << name;
    const size_t begin = t.at("data_offsets")[0].get<size_t>(), end = t.at("data_offsets")[1].get<size_t>();
    return std::span<float>(reinterpret_cast<float*>(bytes.data() + base + begin), (end - begin) / sizeof(float));
  };
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  const std::string mtp = "model.layers.2.";
  int zeroed = 0;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    if (ends_with(name, "o_proj.weight") || name.find("down_proj") != std::string::npos) {
      for (float& v : data(name)) v = 0.0f;
      ++zeroed;
    }
  }
  EXPECT_GE(zeroed, 4);
  const auto eh = data(mtp + "eh_proj.weight");  // [hidden, 2 hidden]
  const size_t hidden = data(mtp + "enorm.weight").size();
  for (float& v : eh) v = 0.0f;
  for (size_t i = 0; i < hidden; ++i) eh[i * 2 * hidden + i] = 1.0f;
  for (float& v : data(mtp + "enorm.weight")) v = 1.0f;
  const auto norm = data("model.norm.weight");
  const auto head_norm = data(mtp + "shared_head.norm.weight");
  std::copy(norm.begin(), norm.end(), head_norm.begin());
  std::ofstream out(dir / "model.safetensors", std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return dir.string();
}

TEST_P(Mtp, AModuleThatKnowsTheNextTokensHasEveryDraftAccepted) {
  const std::string model = bigram_copy(GetParam());
  auto off = create_engine(mtp_options(model, false));
  auto on = create_engine(mtp_options(model, true));
  ASSERT_TRUE(off && on);
  const auto reqs = requests(false);
  expect_same_tokens(run_concurrently(*on, reqs), run_concurrently(*off, reqs), "bigram");
  const EngineStats st = on->stats();
  EXPECT_GT(st.spec_draft_tokens, 0u);
  EXPECT_EQ(st.spec_accepted_tokens, st.spec_draft_tokens);
  EXPECT_LT(st.steps, off->stats().steps) << "accepted drafts save target steps";
}

// PD separation: the prefill instance writes the module's entries with the prompt's pages; the
// decode instance, which computed none of the prompt, drafts from them at once.
TEST_P(Mtp, HandedOffSequencesDraftFromThePrefillInstancesEntries) {
  const std::string model = bigram_copy(GetParam());
  EngineOptions o = mtp_options(model, true);
  InstanceConfig prefill = o.topology.instances.front(), decode = prefill;
  prefill.role = "prefill";
  prefill.name = "p0";
  decode.role = "decode";
  decode.name = "d0";
  o.topology.instances = {prefill, decode};
  auto pd = create_engine(o);
  auto off = create_engine(mtp_options(model, false));
  ASSERT_TRUE(pd && off);
  const auto reqs = requests(false);
  expect_same_tokens(run_concurrently(*pd, reqs), run_concurrently(*off, reqs), "PD");
  const auto per = pd->instance_stats();
  ASSERT_EQ(per.size(), 2u);
  EXPECT_EQ(per[0].stats.spec_draft_tokens, 0u) << "a prefill instance drafts nothing";
  EXPECT_GT(per[1].stats.pd_transfers_in, 0u);
  EXPECT_GT(per[1].stats.spec_draft_tokens, 0u);
  EXPECT_EQ(per[1].stats.spec_accepted_tokens, per[1].stats.spec_draft_tokens)
      << "the handed-off entries are the prompt's own";
}

// A pool of 12 pages of 4 tokens for 4 sequences of up to 60: preempted and recomputed
// sequences rebuild the module's entries with their own.
TEST_P(Mtp, PreemptionChangesNoToken) {
  std::vector<GenerateOptions> reqs;
  for (int n = 0; n < 4; ++n) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 20 + n; ++i) prompt.push_back((i * 53 + n * 7) % 120 + 3);
    GenerateOptions r = testing::greedy_ids(prompt, 30);
    if (n % 2) {
      r.sampling.temperature = 0.7f;
      r.sampling.seed = static_cast<uint64_t>(n);
    }
    reqs.push_back(r);
  }
  EngineOptions o = mtp_options(fixture(), false, 2);
  o.topology.instances.front().kv.pages = 20;
  auto off = create_engine(o);
  EngineOptions on_o = mtp_options(fixture(), true, 2);
  on_o.topology.instances.front().kv.pages = 20;
  auto on = create_engine(on_o);
  ASSERT_TRUE(off && on);
  expect_same_tokens(run_concurrently(*on, reqs), run_concurrently(*off, reqs), "tight pool");
  EXPECT_GT(on->stats().preemptions, 0u) << "the pool is tight enough to preempt";
  EXPECT_GT(on->stats().spec_draft_tokens, 0u);
}

TEST_P(Mtp, SetupsThatCannotRunAreRefused) {
  // A checkpoint of the architecture without MTP weights, and another architecture.
  const std::string without = GetParam().substr(0, GetParam().size() - 4);  // the fixture less "_mtp"
  for (const std::string& m : {fixture_path(without), fixture_path("llama")}) {
    auto e = Engine::create(mtp_options(m, true));
    ASSERT_FALSE(e.has_value()) << m;
    EXPECT_NE(e.status().message().find("MTP"), std::string::npos) << e.status().message();
  }
  EngineOptions tp = mtp_options(fixture(), true);
  tp.topology.instances.front().executors.front().tp = 2;
  auto e = Engine::create(tp);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("tp 1"), std::string::npos) << e.status().message();
}

// GLM's module from llama.cpp's GGUF (gguf_glm4moe: blk.3.nextn.*; reference mtp.json): a prompt
// step drafts the reference chain, which is also the chain llama.cpp's own MTP graph drafts
// (llamacpp.json "mtp", scripts/make_gguf_fixtures.py --llamacpp), and through the engine no
// token changes.
TEST(MtpGguf, Glm4MoeDraftsTheReferenceChainAndChangesNoToken) {
  const std::string gguf = fixture_path("gguf_glm4moe") + "/model.gguf";
  const std::vector<MtpCase> cases = read_mtp_cases(fixture_path("gguf_glm4moe") + "/mtp.json");
  const auto llamacpp = nlohmann::json::parse(read_text_file(fixture_path("gguf_glm4moe") + "/llamacpp.json").value());
  ASSERT_EQ(cases.size(), 2u);
  ASSERT_EQ(llamacpp.at("mtp").size(), 2u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const MtpCase& c = cases[i];
    MtpRunner r(gguf);
    const auto [got, drafts] = r.step(std::vector<int32_t>(c.tokens.begin(), c.tokens.end() - 1), 0, 0, 3);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], c.tokens.back());
    EXPECT_EQ(drafts, c.chain_drafts);
    EXPECT_EQ(drafts, llamacpp["mtp"][i].at("chain_drafts").get<std::vector<int32_t>>()) << "llama.cpp's chain";
  }
  auto off = create_engine(mtp_options(gguf, false));
  auto on = create_engine(mtp_options(gguf, true, 2));
  ASSERT_TRUE(off && on);
  expect_same_tokens(run_concurrently(*on, requests(true)), run_concurrently(*off, requests(true)), "gguf");
  EXPECT_GT(on->stats().spec_draft_tokens, 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Mtp,
                         ::testing::Values("deepseek_v3_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "deepseek_v32_mtp",
                                           "glm_moe_dsa_mtp"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace brigade
