// A language model with images against transformers' prompts (llava_vision_test.cpp,
// internvl_test.cpp, pixtral_vision_test.cpp): a fixture's checkpoint loaded as LlamaModel with
// its tower (as parse_hf_config reads it), the cases of an expected.json (prompt ids, which of
// the fixture's images each run of image tokens holds, every position's logits (the first ids of
// each row, as the fixtures keep them) and the greedy tokens), and the two checks each family
// runs on them: every prompt in one prefill then the greedy tokens decoded on the cache, and the
// prompts in chunks that cut the images anywhere.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "model_test_util.h"
#include "tests/vision_fixture.h"
#include "models/llama.h"
#include "models/mapped_file.h"

namespace brigade::testing {

// fixture_dir(fixture)/file parsed as JSON.
inline nlohmann::json fixture_json(const std::string& fixture, const std::string& file) {
  return read_fixture_json(fixture_dir(fixture), file);
}

struct ImageCase {
  std::vector<int32_t> prompt;
  std::vector<int> images;  // which of the fixture's images, one per run of image tokens, in order
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

// expected.json's "cases".
inline std::vector<ImageCase> read_image_cases(const nlohmann::json& expected) {
  std::vector<ImageCase> out;
  for (const auto& c : expected.at("cases"))
    out.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                   c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>()});
  return out;
}

class ImagePrompts {
 public:
  struct Options {
    std::string fixture;    // the checkpoint's fixture
    std::string reference;  // the fixture whose expected.json holds its cases (empty: the same)
    VisionKind kind{};      // the tower its config must give
    ImageMarkers markers;
    int max_batch_tokens = 256;
    int page_size = 16, pages = 12;
    // The images of the runs of a case whose expected.json lists `images` (Idefics3: each image's
    // tiles, a run each); empty: the same.
    std::function<std::vector<int>(const std::vector<int>&)> runs_of;
  };

  // Loads o.fixture's model on a CPU backend and the reference's cases; `images` are the fixture's
  // images (the cases' indices) as the tower takes them. Failures are recorded; loaded() says
  // whether the checks can run.
  void load(const Options& o, std::vector<StepImage> images) {
    o_ = o;
    images_ = std::move(images);
    cases_ = read_image_cases(fixture_json(o.reference.empty() ? o.fixture : o.reference, "expected.json"));
    EXPECT_FALSE(cases_.empty());
    if (o.runs_of)
      for (ImageCase& c : cases_) c.images = o.runs_of(c.images);
    auto ck = Checkpoint::open(fixture_dir(o.fixture));
    EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
    if (!ck) return;
    EXPECT_EQ((*ck)->config().vision.kind, o.kind);
    if ((*ck)->config().vision.kind != o.kind) return;
    auto model = load_llama(**ck, *backend_, LoadOptions{.max_batch_tokens = o.max_batch_tokens, .progress = false});
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (model) model_ = std::move(*model);
  }
  bool loaded() const { return model_ != nullptr && !cases_.empty(); }

  Model& model() { return *model_; }
  Backend& backend() { return *backend_; }
  const std::vector<ImageCase>& cases() const { return cases_; }
  int page_size() const { return o_.page_size; }
  int pages() const { return o_.pages; }
  size_t vocab() const { return static_cast<size_t>(model_->config().vocab_size); }

  // The StepImages of case c's rows [from, to) (images_in_chunk, each image's run as long as the
  // model's config says).
  std::vector<StepImage> images_of(const ImageCase& c, size_t from = 0, size_t to = SIZE_MAX) const {
    const VisionConfig& v = model_->config().vision;
    return images_in_chunk(c.prompt, c.images, images_, o_.markers,
                           [&v](const StepImage& im) { return v.image_tokens(im.grid_h, im.grid_w); }, from, to);
  }
  // Case c prefilled into kv in chunks of `size` rows (0: whole): every position's logits.
  std::vector<float> prefill(const ImageCase& c, size_t size, const KvCache& kv) {
    return prefill_chunks(*model_, *backend_, kv, c.prompt, size, o_.page_size, o_.pages,
                          [&](size_t from, size_t to) { return images_of(c, from, to); });
  }
  float logit_diff(const std::vector<float>& got, const ImageCase& c) const {
    return testing::logit_diff(got, vocab(), c.logits);
  }

  // Each case in one prefill: every position's logits within tol of transformers', then
  // transformers' greedy tokens decoded one at a time on the cache. Returns the largest logit
  // difference.
  float expect_prompts_match(float tol) {
    float worst = 0.0f;
    for (const ImageCase& c : cases_) {
      auto kv = KvCache::allocate(*backend_, model_->kv_layout(o_.pages, o_.page_size, DType::f32));
      EXPECT_TRUE(kv.has_value());
      if (!kv) return INFINITY;
      const std::vector<float> logits = prefill(c, 0, *kv);
      EXPECT_EQ(logits.size(), c.prompt.size() * vocab());
      if (logits.size() != c.prompt.size() * vocab()) return INFINITY;
      const float d = logit_diff(logits, c);
      EXPECT_LE(d, tol) << o_.fixture << ", prompt of " << c.prompt.size();
      worst = std::max(worst, d);
      const float* last = logits.data() + (c.prompt.size() - 1) * vocab();
      EXPECT_EQ(greedy_decode(*model_, *backend_, *kv, last, static_cast<int>(c.prompt.size()), c.greedy.size(),
                              o_.page_size, o_.pages),
                c.greedy)
          << o_.fixture << ", prompt of " << c.prompt.size();
    }
    return worst;
  }

  // Each case in chunks of each of `sizes` rows (which cut the images anywhere: each chunk
  // scatters its rows of the image's cached features): every position's logits within tol of
  // transformers' as in one prefill. Returns the largest logit difference.
  float expect_chunks_match(float tol, const std::vector<size_t>& sizes) {
    float worst = 0.0f;
    for (size_t size : sizes)
      for (const ImageCase& c : cases_) {
        auto kv = KvCache::allocate(*backend_, model_->kv_layout(o_.pages, o_.page_size, DType::f32));
        EXPECT_TRUE(kv.has_value());
        if (!kv) return INFINITY;
        const float d = logit_diff(prefill(c, size, *kv), c);
        EXPECT_LE(d, tol) << o_.fixture << ", prompt of " << c.prompt.size() << " in chunks of " << size;
        worst = std::max(worst, d);
      }
    return worst;
  }

 private:
  Options o_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend({.n_threads = 2});
  std::vector<StepImage> images_;
  std::vector<ImageCase> cases_;
  std::unique_ptr<Model> model_;
};

// A tiled model's fixture images (Idefics3, Aya Vision): the processor's tiles (pixel_values.f32:
// every image's [n_tiles, 3, S, S] in order, expected.json's images[k].n_tiles) each an image of
// side x side patches; first[k] / count[k] say which are image k's.
struct FixtureTiles {
  std::vector<StepImage> tiles;
  std::vector<int> first, count;
  // ImagePrompts::Options::runs_of: each image of a case as its tiles, a run each.
  std::function<std::vector<int>(const std::vector<int>&)> runs_of() const {
    return [first = first, count = count](const std::vector<int>& images) {
      std::vector<int> runs;
      for (int k : images)
        for (int i = 0; i < count.at(static_cast<size_t>(k)); ++i) runs.push_back(first.at(static_cast<size_t>(k)) + i);
      return runs;
    };
  }
};

inline FixtureTiles read_fixture_tiles(const std::string& fixture, int tile_pixels, int side) {
  const nlohmann::json j = fixture_json(fixture, "expected.json");
  const std::string raw = read_text_file(fixture_dir(fixture) + "/pixel_values.f32").value();
  const size_t tile = size_t{3} * static_cast<size_t>(tile_pixels) * static_cast<size_t>(tile_pixels);
  FixtureTiles out;
  size_t at = 0;
  for (const auto& im : j.at("images")) {
    const int n = im.at("n_tiles").get<int>();
    out.first.push_back(static_cast<int>(out.tiles.size()));
    out.count.push_back(n);
    for (int t = 0; t < n && (at + tile) * sizeof(float) <= raw.size(); ++t, at += tile) {
      auto px = std::make_shared<std::vector<float>>(tile);
      std::memcpy(px->data(), raw.data() + at * sizeof(float), tile * sizeof(float));
      out.tiles.push_back({0, std::move(px), side, side});
    }
  }
  EXPECT_EQ(at * sizeof(float), raw.size()) << fixture << ": pixel_values.f32 is not the images' tiles";
  return out;
}

// Each tile's features: expected.json's images' features cut tile_tokens rows (of `hidden`) at a time.
inline std::vector<std::vector<float>> read_tile_features(const std::string& fixture, int tile_tokens, int hidden) {
  const size_t per_tile = static_cast<size_t>(tile_tokens) * static_cast<size_t>(hidden);
  std::vector<std::vector<float>> out;
  for (const std::vector<float>& image : read_image_features(fixture_json(fixture, "expected.json"))) {
    EXPECT_EQ(image.size() % per_tile, 0u) << fixture;
    for (size_t at = 0; at + per_tile <= image.size(); at += per_tile)
      out.emplace_back(image.begin() + static_cast<std::ptrdiff_t>(at), image.begin() + static_cast<std::ptrdiff_t>(at + per_tile));
  }
  return out;
}

// A tiled model's fixture loaded into `prompts` (Idefics3, Aya Vision): its checkpoint of `kind`,
// its processor's tiles (read_fixture_tiles, 3 images), each case's images as their tiles' runs of
// `image` tokens, room for the fixtures' longest prompts.
inline void load_tiled_prompts(ImagePrompts& prompts, const std::string& fixture, VisionKind kind, int32_t image,
                               int tile_pixels, int side) {
  FixtureTiles t = read_fixture_tiles(fixture, tile_pixels, side);
  ASSERT_EQ(t.first.size(), 3u);
  auto runs_of = t.runs_of();
  prompts.load({.fixture = fixture, .kind = kind, .markers = {.image = image}, .max_batch_tokens = 512, .pages = 24,
                .runs_of = std::move(runs_of)},
               std::move(t.tiles));
  ASSERT_TRUE(prompts.loaded());
}

}  // namespace brigade::testing
