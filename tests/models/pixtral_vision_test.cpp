// Mistral 3's Pixtral vision tower and projector (QwenVision, VisionKind::pixtral) against
// transformers (tests/fixtures/mistral3_vision, written by scripts/make_pixtral_fixtures.py):
// each image's features (get_image_features' pooler_output) from the processor's pixel_values,
// images alone and several in one call; a transposed grid and a channel-major merging_layer that
// the comparison must catch; read_pixtral_vision on the fixture's config and on bad ones. Then
// the language model with images (LlamaModel with the tower, as parse_hf_config reads the
// checkpoint): every position's logits (the first 64 ids') and the greedy tokens of
// prompts holding images' [IMG] / [IMG_BREAK] / [IMG_END] layouts, whole and in chunks that cut
// the images anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "model_test_util.h"
#include "tests/vision_fixture.h"
#include "models/gemma_config.h"
#include "models/llama.h"
#include "models/model_config.h"
#include "models/qwen_image_processor.h"
#include "models/qwen_vision.h"
#include "models/safetensors.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::relative_error;

constexpr const char* kFixture = "mistral3_vision";
constexpr int kTextHidden = 48;
constexpr int kTextVocab = 276;
constexpr float kTextEps = 1e-5f;
// fp32 both sides, sums in other orders: the largest difference over an image's features,
// relative to their largest magnitude.
constexpr float kTol = 1e-5f;

struct FixtureImage {
  StepImage image;              // the processor's pixel_values as the tower's rows
  std::vector<float> features;  // [tokens * 48]
};

nlohmann::json read_json(const std::string& file) {
  return nlohmann::json::parse(read_text_file(fixture_dir(kFixture) + "/" + file).value());
}

// pixel_values [3, h, w] patchified as the Pixtral processor hands them to the tower: merge
// blocks of 2x2 patches of 4x4 pixels, patch rows [c][y][x].
std::vector<FixtureImage> read_images() {
  const auto j = read_json("expected.json");
  QwenImageProcessorConfig rows;
  rows.patch_size = j.at("patch_size").get<int>();
  rows.merge_size = j.at("merge").get<int>();
  rows.temporal_patch_size = 1;
  std::vector<FixtureImage> out;
  for (const auto& im : j.at("images")) {
    const auto hw = im.at("image_sizes").get<std::vector<int>>();
    std::vector<float> chw;
    for (const auto& ch : im.at("pixel_values"))
      for (const auto& row : ch) for (float v : row.get<std::vector<float>>()) chw.push_back(v);
    PatchedImage p = patchify_qwen(chw, hw.at(0), hw.at(1), rows);
    FixtureImage f;
    f.image = {0, std::make_shared<std::vector<float>>(std::move(p.pixels)), p.grid_h, p.grid_w};
    for (const auto& row : im.at("features")) for (float v : row.get<std::vector<float>>()) f.features.push_back(v);
    out.push_back(std::move(f));
  }
  return out;
}

using Tower = testing::LoadedTower<QwenVision>;

// The fixture's tower under the names the checkpoint gives a Mistral3ForConditionalGeneration
// (gemma3_tensors). channel_major_merger: merging_layer's columns rearranged so that the
// (correct) patch-major read sees them channel-major, i.e. as if unfold's order were ignored.
std::unique_ptr<Tower> load_tower(bool channel_major_merger = false) {
  auto t = std::make_unique<Tower>();
  auto v = read_pixtral_vision(read_json("config.json"), kTextVocab, kTextHidden, kTextEps);
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  if (!v) return nullptr;
  t->v = *v;
  auto file = MappedFile::open(fixture_dir(kFixture) + "/model.safetensors");
  EXPECT_TRUE(file.has_value()) << file.status().to_string();
  if (!file) return nullptr;
  t->file = *file;
  std::map<std::string, RawTensor> tensors;
  const Status read = read_safetensors(t->file, tensors);
  EXPECT_TRUE(read.is_ok()) << read.to_string();
  tensors = gemma3_tensors(std::move(tensors));
  if (channel_major_merger) {  // W'[r][c * unit + k] = W[r][k * h + c]: the read undoes nothing
    RawTensor& m = tensors.at("multi_modal_projector.patch_merger.merging_layer.weight");
    const int64_t h = t->v.hidden_size, unit = int64_t{t->v.merge} * t->v.merge;
    std::vector<uint8_t>& out = t->bytes.emplace_back(m.bytes.size());
    const auto* src = reinterpret_cast<const float*>(m.bytes.data());
    auto* dst = reinterpret_cast<float*>(out.data());
    for (int64_t r = 0; r < h; ++r)
      for (int64_t c = 0; c < h; ++c)
        for (int64_t k = 0; k < unit; ++k) dst[r * unit * h + c * unit + k] = src[r * unit * h + k * h + c];
    m.bytes = out;
  }
  t->ck = Checkpoint::from_memory(fixture_dir(kFixture), ModelConfig{}, std::move(tensors));
  WeightLoader w(*t->ck, *t->backend, std::nullopt);
  const Status loaded = t->tower.load(w, *t->backend, t->v, kTextHidden);
  EXPECT_TRUE(loaded.is_ok()) << loaded.to_string();
  return loaded.is_ok() ? std::move(t) : nullptr;
}

// Encodes images in one call; each image's features, in order.
std::vector<std::vector<float>> encode(Tower& t, const std::vector<StepImage>& images) {
  return testing::encode_each(t, images, kTextHidden,
                              [&t](const StepImage& im) { return t.v.image_features(im.grid_h, im.grid_w); });
}

class PixtralVision : public ::testing::Test {
 protected:
  void SetUp() override {
    images_ = read_images();
    ASSERT_EQ(images_.size(), 3u);
    t_ = load_tower();
    ASSERT_NE(t_, nullptr);
  }
  void expect_features(const std::vector<size_t>& which) {
    std::vector<StepImage> batch;
    for (size_t i : which) batch.push_back(images_[i].image);
    const auto got = encode(*t_, batch);
    ASSERT_EQ(got.size(), which.size());
    for (size_t k = 0; k < which.size(); ++k) {
      const float err = relative_error(got[k], images_[which[k]].features);
      EXPECT_LE(err, kTol) << "image " << which[k] << " at " << k;
      max_error_ = std::max(max_error_, err);
    }
  }
  std::vector<FixtureImage> images_;
  std::unique_ptr<Tower> t_;
  float max_error_ = 0.0f;
};

// 8x12, 4x2 and 12x4 patches (32x48, 16x8 and 48x16 pixels after the processor's resize).
TEST_F(PixtralVision, EachImageAloneGivesTransformersFeatures) {
  for (size_t i = 0; i < images_.size(); ++i) expect_features({i});
  std::printf("[ measured ] largest relative difference from transformers: %.3g\n", max_error_);
}

// Several images in one call (transformers' block-diagonal mask): each image's rows see only
// its own, so each gets the features it gets alone.
TEST_F(PixtralVision, SeveralImagesInOneCallGiveEachImagesFeatures) { expect_features({2, 0, 1, 0}); }

// Swapping the rotary's row and column (the same pixels read as a transposed grid) moves the
// features far beyond tolerance.
TEST_F(PixtralVision, ATransposedGridMovesTheFeaturesBeyondTolerance) {
  for (size_t i : {0, 1, 2}) {
    StepImage swapped = images_[i].image;
    std::swap(swapped.grid_h, swapped.grid_w);
    EXPECT_GT(relative_error(encode(*t_, {swapped}).at(0), images_[i].features), 100 * kTol) << "image " << i;
  }
}

// merging_layer read as if its input were patch-major (ignoring unfold's channel-major order)
// moves every image's features far beyond tolerance.
TEST(PixtralVisionMutation, AChannelMajorMergerReadMovesTheFeatures) {
  const auto images = read_images();
  auto t = load_tower(/*channel_major_merger=*/true);
  ASSERT_NE(t, nullptr);
  for (size_t i = 0; i < images.size(); ++i)
    EXPECT_GT(relative_error(encode(*t, {images[i].image}).at(0), images[i].features), 100 * kTol) << "image " << i;
}

TEST(PixtralVisionConfig, ReadsTheFixturesConfig) {
  const auto v = read_pixtral_vision(read_json("config.json"), kTextVocab, kTextHidden, kTextEps);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  EXPECT_EQ(v->kind, VisionKind::pixtral);
  EXPECT_TRUE(v->dynamic());
  EXPECT_EQ(v->n_layers, 2);
  EXPECT_EQ(v->hidden_size, 32);
  EXPECT_EQ(v->intermediate_size, 48);
  EXPECT_EQ(v->n_heads, 2);
  EXPECT_EQ(v->patch_size, 4);
  EXPECT_EQ(v->merge, 2);
  EXPECT_EQ(v->patch_width(), 48);
  EXPECT_EQ(v->out_hidden_size, kTextHidden);
  EXPECT_EQ(v->image_token, 10);
  EXPECT_FLOAT_EQ(v->eps, 1e-5f);
  EXPECT_FLOAT_EQ(v->projector_eps, kTextEps);
  EXPECT_FALSE(v->projector_bias);
  EXPECT_EQ(v->image_features(8, 12), 24);
  EXPECT_EQ(v->image_tokens(8, 12), 28);  // a break after each of the 4 rows of 6, the last the end
}

// parse_hf_config gives Mistral3ForConditionalGeneration its tower; a tower refused by field leaves
// the language model loading as text, vision_off saying why (the mistral3 / ministral3 text
// fixtures' towers say gelu), and Mistral Small 4's MLA language model takes no images.
TEST(PixtralVisionConfig, ParseHfConfigGivesTheTowerOrSaysWhyNot) {
  nlohmann::json j = read_json("config.json");
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_TRUE(c->vision.present());
  EXPECT_EQ(c->vision.kind, VisionKind::pixtral);
  EXPECT_EQ(c->vision.out_hidden_size, kTextHidden);
  EXPECT_EQ(c->vision_off, "");
  j["vision_config"]["hidden_act"] = "gelu";
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_FALSE(c->vision.present());
  EXPECT_EQ(c->vocab_size, kTextVocab);
  EXPECT_NE(c->vision_off.find("vision_config.hidden_act 'gelu'"), std::string::npos) << c->vision_off;
}

// Refused by field: each mutation of the fixture's config names what it changed.
TEST(PixtralVisionConfig, RefusesWhatTheTowerCannotRunByName) {
  const nlohmann::json base = read_json("config.json");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["vision_config"]["hidden_act"] = "gelu"; }, "vision_config.hidden_act 'gelu'"},
      {[](nlohmann::json& j) { j["vision_config"].erase("hidden_act"); }, "vision_config.hidden_act 'gelu'"},
      {[](nlohmann::json& j) { j["vision_config"]["num_channels"] = 4; }, "vision_config.num_channels 4"},
      {[](nlohmann::json& j) { j["vision_config"]["head_dim"] = 8; }, "vision_config.head_dim 8"},
      {[](nlohmann::json& j) {
         j["vision_config"]["num_attention_heads"] = 16;  // head_dim 2
         j["vision_config"].erase("head_dim");
       },
       "multiple of 4"},
      {[](nlohmann::json& j) { j["vision_config"]["rope_parameters"] = {{"rope_type", "yarn"}}; },
       "rope_parameters.rope_type 'yarn'"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = -2; }, "vision_feature_layer -2"},
      {[](nlohmann::json& j) { j["vision_feature_layer"] = {-1, -2}; }, "vision_feature_layer [-1,-2]"},
      {[](nlohmann::json& j) { j["projector_hidden_act"] = "silu"; }, "projector_hidden_act 'silu'"},
      {[](nlohmann::json& j) { j["image_token_index"] = kTextVocab; }, "image_token_index 276"},
      {[](nlohmann::json& j) { j["spatial_merge_size"] = 0; }, "spatial_merge_size"},
      {[](nlohmann::json& j) { j["vision_config"] = 3; }, "vision_config is not an object"},
  };
  for (const auto& [mutate, want] : cases) {
    nlohmann::json j = base;
    mutate(j);
    const auto v = read_pixtral_vision(j, kTextVocab, kTextHidden, kTextEps);
    ASSERT_FALSE(v.has_value()) << want;
    EXPECT_NE(v.status().message().find(want), std::string::npos) << v.status().message();
  }
}

// ---- The language model with images ----

constexpr int32_t kImage = 10;
constexpr int32_t kImageBreak = 12;
// Logits pass through the tower, the projector and the language model: fp32 both sides.
constexpr float kLogitTol = 5e-4f;

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int> images;  // which fixture images, in the prompt's order
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

std::vector<Case> read_cases() {
  std::vector<Case> out;
  const nlohmann::json j = read_json("expected.json");
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                   c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>()});
  return out;
}

// The fixture's Mistral3ForConditionalGeneration, its language model with the Pixtral tower.
std::unique_ptr<Model> load_model(Backend& backend) {
  auto ck = Checkpoint::open(fixture_dir(kFixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  if (!ck) return nullptr;
  EXPECT_EQ((*ck)->config().vision.kind, VisionKind::pixtral);
  auto model = load_llama(**ck, backend, LoadOptions{.max_batch_tokens = 128, .progress = false});
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  return model ? std::move(*model) : nullptr;
}

// The StepImages of the prompt's rows [from, to) at step rows row0 + (r - from): one per image
// layout (an [IMG] after neither [IMG] nor [IMG_BREAK] starts one) with tokens in the range, an
// image begun before `from` continuing at row0 (StepImage::first).
std::vector<StepImage> images_of(const std::vector<FixtureImage>& images, const VisionConfig& v, const Case& c,
                                 int32_t row0, size_t from = 0, size_t to = SIZE_MAX) {
  std::vector<StepImage> out;
  size_t next = 0;
  for (size_t r = 0; r < c.prompt.size(); ++r) {
    const bool starts = c.prompt[r] == kImage && (r == 0 || (c.prompt[r - 1] != kImage && c.prompt[r - 1] != kImageBreak));
    if (!starts) continue;
    const StepImage& im = images.at(static_cast<size_t>(c.images.at(next++))).image;
    const size_t end = r + static_cast<size_t>(v.image_tokens(im.grid_h, im.grid_w));
    if (r < to && end > from) {
      const size_t first = from > r ? from - r : 0;
      out.push_back({row0 + static_cast<int32_t>(r + first - from), im.pixels, im.grid_h, im.grid_w,
                     static_cast<int32_t>(first)});
    }
  }
  EXPECT_EQ(next, c.images.size());
  return out;
}

class Mistral3Vision : public ::testing::Test {
 protected:
  void SetUp() override {
    images_ = read_images();
    cases_ = read_cases();
    ASSERT_EQ(cases_.size(), 2u);
    model_ = load_model(*backend_);
    ASSERT_NE(model_, nullptr);
  }
  // The largest difference of rows of `got` (the vocabulary's width) from c.logits (the first ids
  // of each row, as the fixture keeps them).
  float logit_diff(const std::vector<float>& got, const Case& c) const {
    const size_t vocab = static_cast<size_t>(model_->config().vocab_size);
    float worst = 0.0f;
    for (size_t r = 0; r < c.logits.size(); ++r)
      for (size_t v = 0; v < c.logits[r].size(); ++v) {
        const float d = std::fabs(got[r * vocab + v] - c.logits[r][v]);
        worst = std::max(worst, std::isnan(d) ? INFINITY : d);
      }
    return worst;
  }
  // The prompt of case c in chunks of `size` rows (all of it when 0): every position's logits.
  std::vector<float> prefill(const Case& c, size_t size, const KvCache& kv) {
    std::vector<float> all;
    const size_t n = c.prompt.size();
    for (size_t from = 0; from < n; from += size == 0 ? n : size) {
      const size_t to = size == 0 ? n : std::min(n, from + size);
      StepBatch step = testing::make_step(
          {{0, std::vector<int32_t>(c.prompt.begin() + static_cast<long>(from), c.prompt.begin() + static_cast<long>(to)),
            static_cast<int>(from), true}},
          kPageSize, kPages);
      step.images = images_of(images_, model_->config().vision, c, 0, from, to);
      const std::vector<float> rows = testing::run_step(*model_, *backend_, kv, step);
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }
  static constexpr int kPageSize = 16, kPages = 4;
  std::unique_ptr<Backend> backend_ = make_cpu_backend({.n_threads = 2});
  std::vector<FixtureImage> images_;
  std::vector<Case> cases_;
  std::unique_ptr<Model> model_;
};

// Each image's layout in the prompts is the one read_pixtral_vision's token ids give (mistral-
// common's, checked by the image processor's tests).
TEST_F(Mistral3Vision, ThePromptsHoldEachImagesLayout) {
  const VisionConfig& v = model_->config().vision;
  for (const Case& c : cases_)
    for (const StepImage& im : images_of(images_, v, c, 0)) {
      const int t = v.image_tokens(im.grid_h, im.grid_w);
      for (int j = 0; j < t; ++j) EXPECT_EQ(c.prompt.at(static_cast<size_t>(im.row + j)), v.token_at(j, im.grid_h, im.grid_w));
    }
}

// Each prompt in one prefill: every position's logits, then transformers' greedy continuation
// decoded a token at a time.
TEST_F(Mistral3Vision, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  float worst = 0.0f;
  for (const Case& c : cases_) {
    auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    const std::vector<float> logits = prefill(c, 0, *kv);
    const float d = logit_diff(logits, c);
    EXPECT_LE(d, kLogitTol) << "prompt of " << c.prompt.size();
    worst = std::max(worst, d);
    const int vocab = model_->config().vocab_size;
    int32_t next = testing::argmax(logits.data() + (c.prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
    std::vector<int32_t> greedy;
    for (int n_past = static_cast<int>(c.prompt.size()); greedy.size() < c.greedy.size(); ++n_past) {
      greedy.push_back(next);
      const auto row = testing::run_step(*model_, *backend_, *kv, testing::make_step({{0, {next}, n_past, false}}, kPageSize, kPages));
      next = testing::argmax(row.data(), vocab);
    }
    EXPECT_EQ(greedy, c.greedy);
  }
  std::printf("[ measured ] largest |logit difference| from transformers: %.3g\n", worst);
}

// Chunks of 5 and 7 rows cut the images anywhere (inside a row of [IMG], at a break): each chunk
// scatters its rows' features, gathered from the image's cached encoding, the breaks keep their
// embeddings; every position's logits are transformers' as in one prefill.
TEST_F(Mistral3Vision, ChunksCuttingImagesGiveTheSameLogits) {
  for (size_t size : {5, 7})
    for (const Case& c : cases_) {
      auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
      ASSERT_TRUE(kv.has_value());
      EXPECT_LE(logit_diff(prefill(c, size, *kv), c), kLogitTol) << "prompt of " << c.prompt.size() << " in chunks of " << size;
    }
}

// A step whose image layout holds [IMG] where its break belongs is refused, naming the row.
TEST_F(Mistral3Vision, ABreakOutOfPlaceIsRefused) {
  const Case& c = cases_.at(1);
  std::vector<int32_t> prompt = c.prompt;
  const std::vector<StepImage> ims = images_of(images_, model_->config().vision, c, 0);
  ASSERT_EQ(ims.size(), 1u);
  const size_t brk = static_cast<size_t>(ims[0].row) + 6;  // after the first row of 6 tokens
  ASSERT_EQ(prompt.at(brk), kImageBreak);
  prompt[brk] = kImage;
  auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepBatch step = testing::make_step({{0, prompt, 0, true}}, kPageSize, kPages);
  step.images = ims;
  auto buf = backend_->allocate(step.logit_rows.size() * static_cast<size_t>(model_->config().vocab_size) * sizeof(float));
  ASSERT_TRUE(buf.has_value());
  const Status st = model_->forward(step, *kv, buf->view(DType::f32, {static_cast<int64_t>(step.logit_rows.size()),
                                                                       model_->config().vocab_size}));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("row " + std::to_string(brk) + " of the image"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("the break or end of its layout"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace brigade
