// Prompts with images through the engine (Gemma 3, tests/fixtures/gemma3_vision): the scheduler
// finds each image's run of image tokens, keeps it in one step, keys the prefix cache by the
// image, and the executor hands the pixels to the model. Checked against transformers' logits.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "tests/engine_test_util.h"
#include "tests/vision_fixture.h"
#include "models/mapped_file.h"

namespace brigade {
namespace {

using testing::create_engine;

std::string fixture(const std::string& name = "gemma3_vision") { return std::string(BRIGADE_FIXTURES) + "/" + name; }

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int> images;
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

struct Fixture {
  std::vector<ImagePixels> pixels;
  std::vector<Case> cases;
};

Fixture read_fixture() {
  Fixture f;
  const auto j = nlohmann::json::parse(read_text_file(fixture() + "/expected.json").value());
  for (const auto& img : j.at("images_u8")) {
    auto px = std::make_shared<std::vector<float>>();
    for (int v : img.get<std::vector<int>>()) px->push_back((static_cast<float>(v) / 255.0f - 0.5f) / 0.5f);
    f.pixels.push_back({std::move(px)});
  }
  for (const auto& c : j.at("cases"))
    f.cases.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                       c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>()});
  return f;
}

GenerateOptions request(const Fixture& f, const Case& c, int max_tokens = 8) {
  GenerateOptions r;
  r.prompt_ids = c.prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  for (int k : c.images) r.images.push_back(f.pixels[static_cast<size_t>(k)]);
  return r;
}

// Every prompt's tokens scored as transformers scores them (prompt logprobs: each position given
// the image features and attention before it), and its greedy continuation, with whole prompts
// in a step and with 32-token chunks that must carry each 16-token image whole.
TEST(EngineVision, PromptsWithImagesScoreAndContinueAsTransformers) {
  const Fixture f = read_fixture();
  for (bool chunked : {false, true}) {
    EngineOptions o = chunked ? testing::chunked_engine_options(fixture()) : testing::test_engine_options(fixture(), 2);
    auto engine = create_engine(o);
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->model().image_size, 56);
    EXPECT_EQ(engine->model().tokens_per_image, 16);
    for (const Case& c : f.cases) {
      GenerateOptions r = request(f, c);
      r.prompt_logprobs = 0;
      auto done = engine->generate(r);
      ASSERT_TRUE(done.has_value()) << done.status().to_string();
      EXPECT_LE(testing::prompt_logprob_error(done->prompt_logprobs, c.prompt, c.logits), 2e-3) << "chunked " << chunked << ", prompt of " << c.prompt.size();
      EXPECT_EQ(done->token_ids, c.greedy) << "chunked " << chunked << ", prompt of " << c.prompt.size();
    }
  }
}

// The completion's first token's top alternatives (logprobs 3): the model's answer is peaked
// (random weights, tied embeddings), so the runners-up tell two answers apart.
struct FirstToken {
  Completion done;
  std::vector<std::pair<int32_t, float>> top;
};
FirstToken first_token(Engine& engine, GenerateOptions r) {
  r.logprobs = 3;
  FirstToken out;
  std::promise<void> finished;
  auto id = engine.submit(r, [&](const Event& ev) {
    if (out.top.empty() && !ev.top_logprobs.empty()) out.top = ev.top_logprobs.front();
    out.done.token_ids.insert(out.done.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (ev.prompt_tokens > 0) out.done.cached_tokens = ev.cached_tokens;
    if (ev.finish != FinishReason::none) finished.set_value();
  });
  EXPECT_TRUE(id.has_value()) << id.status().to_string();
  if (id) finished.get_future().wait();
  return out;
}

float top_diff(const FirstToken& a, const FirstToken& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.top.size() && i < b.top.size(); ++i)
    worst = std::max(worst, a.top[i].first != b.top[i].first ? INFINITY : std::fabs(a.top[i].second - b.top[i].second));
  return a.top.size() == b.top.size() ? worst : INFINITY;
}

// The prefix cache keys image tokens by the image: the same prompt with another image shares only
// the pages before it, and gives that image's answer; the same image again is served from the cache.
TEST(EngineVision, ThePrefixCacheTellsImagesApart) {
  const Fixture f = read_fixture();
  EngineOptions o = testing::test_engine_options(fixture(), 1);
  o.topology.instances.front().kv.page_size = 4;
  auto engine = create_engine(o);
  ASSERT_NE(engine, nullptr);
  // The third prompt: 13 text tokens, then its image block at 13 (image tokens 14..29).
  const Case& c = f.cases[2];
  const FirstToken a = first_token(*engine, request(f, c, 1));
  ASSERT_EQ(a.done.token_ids.size(), 1u);
  EXPECT_EQ(a.done.token_ids.front(), c.greedy.front());
  ASSERT_EQ(a.top.size(), 3u);
  for (const auto& [token, lp] : a.top) EXPECT_NEAR(lp, testing::logprob(c.logits.back(), token), 2e-3);

  GenerateOptions other = request(f, c, 1);
  other.images = {f.pixels[0]};
  const FirstToken b = first_token(*engine, other);
  EXPECT_EQ(b.done.cached_tokens, 14)
      << "the whole pages before the image tokens, and the 2 rows of the next page before them (partial_pages)";
  auto fresh = create_engine(o);  // what that image gives with no cache in play
  ASSERT_NE(fresh, nullptr);
  const FirstToken want = first_token(*fresh, other);
  EXPECT_EQ(b.done.token_ids, want.done.token_ids);
  EXPECT_LE(top_diff(b, want), 1e-4f);
  EXPECT_GT(top_diff(b, a), 1e-2f) << "another image, another answer";

  const FirstToken again = first_token(*engine, request(f, c, 1));
  EXPECT_EQ(again.done.cached_tokens, 32) << "every whole page, the image's included";
  EXPECT_EQ(again.done.token_ids, a.done.token_ids);
  EXPECT_LE(top_diff(again, a), 1e-4f);
}

// A prefill instance hands the sequence (and its images) to a decode instance: the same tokens.
TEST(EngineVision, PrefillDecodeSeparationKeepsTheImages) {
  const Fixture f = read_fixture();
  auto engine = create_engine(testing::prefill_decode(testing::test_engine_options(fixture(), 1)));
  ASSERT_NE(engine, nullptr);
  for (const Case& c : f.cases) {
    auto done = engine->generate(request(f, c));
    ASSERT_TRUE(done.has_value()) << done.status().to_string();
    EXPECT_EQ(done->token_ids, c.greedy) << "prompt of " << c.prompt.size();
  }
}

// Requests whose images cannot run are refused with what was wrong; the engine keeps serving.
TEST(EngineVision, BadImageRequestsAreRefusedNamingTheProblem) {
  const Fixture f = read_fixture();
  auto engine = create_engine(testing::test_engine_options(fixture(), 1));
  ASSERT_NE(engine, nullptr);
  auto refused = [&](GenerateOptions r, const std::string& why) {
    auto done = engine->generate(r);
    const std::string msg = done.has_value() ? "" : done.status().message();
    EXPECT_FALSE(done.has_value()) << why;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  };
  GenerateOptions none = request(f, f.cases[0]);
  none.images.clear();
  refused(none, "1 image(s) of image tokens but the request 0");
  GenerateOptions extra = request(f, f.cases[0]);
  extra.images.push_back(f.pixels[1]);
  refused(extra, "but the request 2 image(s)");
  GenerateOptions short_run = request(f, f.cases[0]);
  short_run.prompt_ids.erase(short_run.prompt_ids.begin() + 5);
  refused(short_run, "a run of 15 image tokens at position 4");
  GenerateOptions small = request(f, f.cases[0]);
  small.images = {ImagePixels{std::make_shared<const std::vector<float>>(100, 0.0f)}};
  refused(small, "image 0 must be [3, 56, 56] pixels");
  auto ok = engine->generate(request(f, f.cases[0]));
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(ok->token_ids, f.cases[0].greedy);

  // An image that cannot run in one step, and images to a model that takes none.
  EngineOptions tight = testing::test_engine_options(fixture(), 1);
  tight.topology.instances.front().scheduler.max_step_tokens = 8;
  auto small_steps = create_engine(tight);
  ASSERT_NE(small_steps, nullptr);
  auto r = small_steps->generate(request(f, f.cases[0]));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("max_step_tokens"), std::string::npos) << r.status().message();
  auto text_model = create_engine(testing::test_engine_options(fixture("gemma3"), 1));
  ASSERT_NE(text_model, nullptr);
  EXPECT_EQ(text_model->model().image_size, 0);
  GenerateOptions to_text = request(f, f.cases[0]);
  to_text.prompt_ids = {1, 17, 42};  // inside its vocabulary of 256
  auto t = text_model->generate(to_text);
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.status().message().find("text only"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace brigade
