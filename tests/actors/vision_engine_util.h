// Shared by the engine's image tests (engine_vision_qwen_test.cpp, engine_vision_pixtral_test.cpp):
// a greedy run checked against transformers' tokens, the prefix-cache match that ends inside an
// image, and a request refused naming its problem.
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "brigade/engine.h"
#include "tests/engine_test_util.h"

namespace brigade::testing {

// The PNG images dir/image{k}.png, k < n, as engine.load_image makes them for a prompt of
// `prompt_images` images.
inline std::vector<ImagePixels> load_fixture_images(Engine& engine, const std::string& dir, int n, int prompt_images = 1) {
  std::vector<ImagePixels> out;
  for (int k = 0; k < n; ++k) {
    std::ifstream in(dir + "/image" + std::to_string(k) + ".png", std::ios::binary);
    const std::vector<uint8_t> png{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto image = engine.load_image(png, prompt_images);
    EXPECT_TRUE(image.has_value()) << image.status().to_string();
    if (image) out.push_back(*image);
  }
  return out;
}

// A greedy request of prompt ids with images `which` (indices into images, in the prompt's
// order) for as many tokens as `greedy` holds, without stopping at EOS (as transformers' generate
// ran).
inline GenerateOptions greedy_image_request(const std::vector<ImagePixels>& images, const std::vector<int32_t>& prompt,
                                            const std::vector<int>& which, const std::vector<int32_t>& greedy) {
  GenerateOptions r;
  r.prompt_ids = prompt;
  r.max_tokens = static_cast<int>(greedy.size());
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  for (int k : which) r.images.push_back(images.at(static_cast<size_t>(k)));
  return r;
}

// Runs r expecting `greedy`; the run's cached_tokens (-1 when it failed).
inline int expect_greedy_run(Engine& engine, const GenerateOptions& r, const std::vector<int32_t>& greedy,
                             const std::string& what = "") {
  auto done = engine.generate(r);
  EXPECT_TRUE(done.has_value()) << done.status().to_string();
  if (!done) return -1;
  EXPECT_EQ(done->token_ids, greedy) << what << "prompt of " << r.prompt_ids.size();
  return done->cached_tokens;
}

// An engine of 12 pages of 4 tokens and steps of 16 (chunked), for
// expect_prefix_match_inside_image.
inline EngineOptions small_cache_options(const std::string& model_dir) {
  EngineOptions o = chunked_engine_options(model_dir);
  auto& inst = o.topology.instances.front();
  inst.kv.page_size = 4;
  inst.kv.pages = 12;
  inst.scheduler.max_step_tokens = 16;
  return o;
}

// A prefix-cache match ending inside an image, on an engine of small_cache_options: r runs
// (`greedy` expected), a text request of image_end tokens evicts the pages of the image's tail,
// and r again is served a match ending inside its image [image_start, image_end) (its chunk
// starts inside the image, whose features the tower computes again), with the same tokens.
inline void expect_prefix_match_inside_image(Engine& engine, const GenerateOptions& r, const std::vector<int32_t>& greedy,
                                             int image_start, int image_end) {
  expect_greedy_run(engine, r, greedy);
  GenerateOptions text;
  text.prompt_ids = std::vector<int32_t>(static_cast<size_t>(image_end), 7);
  text.max_tokens = 1;
  ASSERT_TRUE(engine.generate(text).has_value());
  const int cached = expect_greedy_run(engine, r, greedy);
  EXPECT_GT(cached, image_start) << "the match should reach into the image";
  EXPECT_LT(cached, image_end) << "the match should end inside the image";
}

// engine.generate(r) fails with a message holding `why`.
inline void expect_refused(Engine& engine, const GenerateOptions& r, const std::string& why) {
  auto done = engine.generate(r);
  const std::string msg = done.has_value() ? "" : done.status().message();
  EXPECT_FALSE(done.has_value()) << why;
  EXPECT_NE(msg.find(why), std::string::npos) << msg;
}

}  // namespace brigade::testing
