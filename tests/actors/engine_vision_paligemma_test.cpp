// PaliGemma through the engine (tests/fixtures/paligemma and paligemma2, written by
// scripts/make_paligemma_fixtures.py: tiny PaliGemmaForConditionalGeneration checkpoints and
// transformers' greedy tokens). Engine::load_image runs SiglipImageProcessor on the PNGs; the
// tokenizer station lays a text prompt out as PaliGemmaProcessor does (the images' runs where the
// text's <image> markers are, or first without any; <bos> after the last; "\n" at the end; a
// text-only prompt <bos> + text + "\n"); the scheduler runs each prompt whole in one step, from
// position 0, never from the prefix cache, so the prompt attends to all of itself; the generated
// tokens then follow transformers' (12 of them). paligemma2's sliding window (24) is shorter than
// three of its prompts: each of those runs alone in its step, unwindowed, when the prompts are
// sent together. A prompt no step can hold is refused, naming max_step_tokens.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "tests/actors/vision_engine_util.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

using testing::create_engine;

const std::string kFixtures = std::string(BRIGADE_FIXTURES) + "/";

struct PaliCase {
  std::string text;
  std::vector<int32_t> prompt;
  std::vector<int> images;
  std::vector<int32_t> greedy;
};

std::vector<PaliCase> read_cases(const std::string& fixture) {
  std::ifstream in(kFixtures + fixture + "/expected.json");
  const nlohmann::json j = nlohmann::json::parse(in);  // kept: a range-for over a temporary's member would dangle
  std::vector<PaliCase> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("text").get<std::string>(), c.at("prompt").get<std::vector<int32_t>>(),
                   c.at("images").get<std::vector<int>>(), c.at("greedy").get<std::vector<int32_t>>()});
  EXPECT_EQ(out.size(), 4u) << fixture;
  return out;
}

// One request's events gathered: its prompt ids (return_prompt_ids), tokens, cached tokens, error.
struct RunResult {
  std::vector<int32_t> prompt_ids, tokens;
  int cached = -1;
  std::string error;
};

RunResult run(Engine& engine, const GenerateOptions& g) {
  std::promise<RunResult> done;
  RunResult r;
  auto id = engine.submit(g, [&](const Event& e) {  // events arrive one at a time, in order
    if (!e.prompt_token_ids.empty()) r.prompt_ids = e.prompt_token_ids;
    r.tokens.insert(r.tokens.end(), e.token_ids.begin(), e.token_ids.end());
    r.error += e.error;
    r.cached = std::max(r.cached, e.cached_tokens);
    if (e.finish != FinishReason::none) done.set_value(r);
  });
  if (!id) return {{}, {}, -1, id.status().to_string()};
  auto f = done.get_future();
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) return {{}, {}, -1, "timed out"};
  return f.get();
}

std::unique_ptr<Engine> engine_with_steps(const std::string& dir, int step_tokens) {
  EngineOptions o = testing::chunked_engine_options(dir);
  o.topology.instances.front().scheduler.max_step_tokens = step_tokens;
  return create_engine(o);
}

class EngineVisionPaliGemma : public ::testing::TestWithParam<std::string> {};

// The fixture's texts with the PNGs: the processor's prompt ids, transformers' greedy tokens; with
// a prefix cache warm from the same prompts, nothing is served from it.
TEST_P(EngineVisionPaliGemma, TextPromptsAreLaidOutAsTheProcessorAndContinueAsTransformers) {
  const std::string dir = kFixtures + GetParam();
  auto engine = engine_with_steps(dir, 64);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->model().takes_images());
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  ASSERT_EQ(images.size(), 3u);
  EXPECT_EQ(images[0].pixels->size(), 3u * 16 * 16);
  for (int round = 0; round < 2; ++round)
    for (const PaliCase& c : read_cases(GetParam())) {
      GenerateOptions g;
      g.prompt = c.text;  // add_bos stays true: the layout places <bos> itself
      for (int i : c.images) g.images.push_back(images.at(static_cast<size_t>(i)));
      g.max_tokens = static_cast<int>(c.greedy.size());
      g.sampling.temperature = 0.0f;
      g.ignore_eos = true;
      g.return_prompt_ids = true;
      const RunResult done = run(*engine, g);
      EXPECT_EQ(done.error, "") << c.text;
      EXPECT_EQ(done.prompt_ids, c.prompt) << c.text;
      EXPECT_EQ(done.tokens, c.greedy) << c.text << ", round " << round;
      EXPECT_EQ(done.cached, 0) << c.text << ": a prompt's KV depends on all of it";
    }
}

// Token-id prompts with their images, beside one another (a batch where some decode while another's
// prompt runs whole): transformers' tokens for each.
TEST_P(EngineVisionPaliGemma, TokenIdPromptsTogetherContinueAsTransformers) {
  const std::string dir = kFixtures + GetParam();
  auto engine = engine_with_steps(dir, 64);
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  const std::vector<PaliCase> cases = read_cases(GetParam());
  std::mutex mu;
  std::condition_variable cv;
  size_t n_done = 0;
  std::vector<std::vector<int32_t>> got(cases.size());
  std::vector<std::string> errors(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {  // all submitted before any is awaited
    auto id = engine->submit(testing::greedy_image_request(images, cases[i].prompt, cases[i].images, cases[i].greedy),
                             [&, i](const Event& e) {
                               std::lock_guard<std::mutex> lock(mu);
                               got[i].insert(got[i].end(), e.token_ids.begin(), e.token_ids.end());
                               errors[i] += e.error;
                               if (e.finish != FinishReason::none) ++n_done, cv.notify_all();
                             });
    ASSERT_TRUE(id.has_value()) << id.status().to_string();
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return n_done == cases.size(); }));
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(errors[i], "");
    EXPECT_EQ(got[i], cases[i].greedy) << "case " << i;
  }
}

// Steps of 32 tokens: the shorter prompts run (whole); the 57-token one is refused, naming the bound.
TEST_P(EngineVisionPaliGemma, APromptNoStepHoldsIsRefused) {
  const std::string dir = kFixtures + GetParam();
  auto engine = engine_with_steps(dir, 32);
  ASSERT_NE(engine, nullptr);
  const std::vector<ImagePixels> images = testing::load_fixture_images(*engine, dir, 3);
  for (const PaliCase& c : read_cases(GetParam())) {
    const GenerateOptions r = testing::greedy_image_request(images, c.prompt, c.images, c.greedy);
    if (c.prompt.size() <= 32) testing::expect_greedy_run(*engine, r, c.greedy);
    else testing::expect_refused(*engine, r, "max_step_tokens");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineVisionPaliGemma, ::testing::Values("paligemma", "paligemma2"));

}  // namespace
}  // namespace brigade
