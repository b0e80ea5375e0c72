// The Qwen2-VL family's language model with images (Qwen2VLForConditionalGeneration,
// Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration) against transformers: the
// config read as a Qwen2 (Qwen3) decoder with M-RoPE (interleaved for Qwen3-VL), the rotary
// positions of prompts with images (get_rope_index), and the logits and greedy tokens of prompts
// whose image tokens take the tower's features (and Qwen3-VL's DeepStack features after its first
// layers) (tests/fixtures/qwen2_vl and qwen2_5_vl, written by scripts/make_qwen_vl_fixtures.py;
// tests/fixtures/qwen3_vl and qwen3_vl_moe, whose language model is a Qwen3-MoE, by
// scripts/make_qwen3_vl_fixtures.py). Qwen3.5 (Qwen3_5ForConditionalGeneration and its MoE,
// tests/fixtures/qwen3_5_vl and qwen3_5_moe_vl, by the same script): Qwen3-VL's tower without
// DeepStack beside a Gated DeltaNet hybrid (StateSpaceModel) whose attention layers rotate part
// of each head by interleaved M-RoPE; its steps name a recurrent state slot per sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf_fixture.h"
#include "tests/vision_fixture.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/mrope.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::make_step;
using testing::SeqChunk;
using testing::max_diff;

using testing::QwenVlCase;
using testing::QwenVlFixture;
using QwenImage = testing::QwenVlImage;

constexpr int32_t kImageToken = testing::kQwenImageToken;
constexpr int kMerge = 2;
// Logits pass through the tower, the merger and the language model: fp32 both sides, sums in
// other orders.
constexpr float kTol = 5e-4f;

QwenVlFixture read_fixture(const std::string& name) { return testing::read_qwen_vl_fixture(fixture_dir(name)); }

// The StepImages of a prompt's rows [from, to) placed at rows row0 + (r - from): one per run of
// image tokens with tokens in [from, to), in order, an image begun before `from` continuing at
// row0 (StepImage::first); those wholly before `from` are skipped (their shift goes to rope_delta).
std::vector<StepImage> images_of(const QwenVlFixture& f, const QwenVlCase& c, int32_t row0, size_t from = 0,
                                 size_t to = SIZE_MAX) {
  std::vector<StepImage> out;
  size_t next = 0;
  for (size_t r = 0; r < c.prompt.size(); ++r)
    if (c.prompt[r] == kImageToken && (r == 0 || c.prompt[r - 1] != kImageToken)) {
      const QwenImage& im = f.images[static_cast<size_t>(c.images[next++])];
      const size_t end = r + static_cast<size_t>((im.grid_h / kMerge) * (im.grid_w / kMerge));
      if (r < to && end > from) {
        const size_t first = from > r ? from - r : 0;
        out.push_back({row0 + static_cast<int32_t>(r + first - from), im.pixels, im.grid_h, im.grid_w,
                       static_cast<int32_t>(first)});
      }
    }
  EXPECT_EQ(next, c.images.size());
  return out;
}

// The rope_delta of a chunk starting at `from`: the shifts of the images wholly before it.
int32_t delta_before(const QwenVlFixture& f, const QwenVlCase& c, size_t from) {
  int32_t delta = 0;
  size_t next = 0;
  for (size_t r = 0; r < std::min(from, c.prompt.size()); ++r)
    if (c.prompt[r] == kImageToken && (r == 0 || c.prompt[r - 1] != kImageToken)) {
      const QwenImage& im = f.images[static_cast<size_t>(c.images[next++])];
      const int32_t h = im.grid_h / kMerge, w = im.grid_w / kMerge;
      if (r + static_cast<size_t>(h * w) <= from) delta += mrope_image_shift(h, w);
    }
  return delta;
}

// The prompt's chunk [from, to) as the scheduler sends it: its rows, its images (in part where
// the chunk cuts one) and the shift of the images before it.
StepBatch chunk_step(const QwenVlFixture& f, const QwenVlCase& c, size_t from, size_t to, int page_size, int pages) {
  const std::vector<int32_t> rows(c.prompt.begin() + static_cast<long>(from), c.prompt.begin() + static_cast<long>(to));
  StepBatch step = make_step({{0, rows, static_cast<int>(from), true}}, page_size, pages);
  step.images = images_of(f, c, 0, from, to);
  step.rope_delta = {delta_before(f, c, from)};
  return step;
}

// Qwen3.5's language model keeps a recurrent state per sequence (models/state_space.h).
bool recurrent(const std::string& name) { return name.starts_with("qwen3_5"); }

// run_step with sequence s in state slot s (where the model keeps states).
std::vector<float> run(Model& model, Backend& backend, const KvCache& kv, StepBatch step) {
  if (model.state_slots() > 0)
    for (int s = 0; s < step.n_seqs(); ++s) step.state_slots.push_back(s);
  return testing::run_step(model, backend, kv, step);
}

class QwenVl : public ::testing::TestWithParam<const char*> {};

TEST_P(QwenVl, TheConfigIsAQwen2DecoderWithMropeBesideItsTower) {
  auto text = read_text_file(fixture_dir(GetParam()) + "/config.json");
  ASSERT_TRUE(text.has_value());
  auto c = parse_hf_config(*text);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  const std::string name = GetParam();
  EXPECT_TRUE(c->multimodal_text);
  EXPECT_EQ(c->mrope_section, (std::vector<int>{2, 3, 3}));
  EXPECT_TRUE(c->vision.present());
  EXPECT_TRUE(c->vision.dynamic());
  EXPECT_EQ(c->vision.merge, kMerge);
  EXPECT_EQ(c->vision.image_token, kImageToken);
  EXPECT_EQ(c->vision.image_tokens(8, 12), 24);
  auto j = nlohmann::json::parse(*text);
  if (recurrent(name)) {
    // Qwen3.5 (the Hub's form): a Gated DeltaNet hybrid whose attention rotates half of each
    // head by M-RoPE, interleaved whatever the config says (transformers always interleaves it),
    // and Qwen3-VL's tower without DeepStack (taps listed in the config are not run).
    EXPECT_EQ(c->arch, name == "qwen3_5_moe_vl" ? "qwen3_5_moe_text" : "qwen3_5_text");
    EXPECT_EQ(c->n_experts, name == "qwen3_5_moe_vl" ? 4 : 0);
    EXPECT_TRUE(c->ssm.gated_delta);
    EXPECT_EQ(c->rope_dims(), 16);
    EXPECT_TRUE(c->mrope_interleaved);
    EXPECT_EQ(c->vision.kind, VisionKind::qwen3_vl);
    EXPECT_TRUE(c->vision.deepstack_layers.empty());
    auto& rope = j["text_config"]["rope_parameters"];
    rope["mrope_interleaved"] = false;
    j["vision_config"]["deepstack_visual_indexes"] = {0, 1};
    auto same = parse_hf_config(j.dump());
    ASSERT_TRUE(same.has_value()) << same.status().to_string();
    EXPECT_TRUE(same->mrope_interleaved);
    EXPECT_TRUE(same->vision.deepstack_layers.empty());
    rope["mrope_section"] = {2, 3, 4};
    auto bad = parse_hf_config(j.dump());
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("text_config.rope_parameters.mrope_section must be 3 sizes"), std::string::npos)
        << bad.status().message();
    rope.erase("mrope_section");  // transformers' default [11, 11, 10] covers 64 rotary dims, not 16
    EXPECT_EQ(parse_hf_config(j.dump()).status().code(), StatusCode::invalid_argument);
    return;
  }
  if (name.starts_with("qwen3_vl")) {
    // Qwen3-VL (the Hub's form: text_config, rope_scaling with mrope_interleaved): a Qwen3
    // decoder (q/k norms) with interleaved sections and DeepStack taps after blocks 0 and 1;
    // Qwen3-VL-MoE's a Qwen3-MoE whose router always renormalises, its experts transposed.
    if (name == "qwen3_vl_moe") {
      EXPECT_EQ(c->arch, "qwen3_moe");
      EXPECT_EQ(c->n_experts, 4);
      EXPECT_TRUE(c->norm_topk_prob);
      EXPECT_TRUE(c->experts_transposed);
    } else {
      EXPECT_EQ(c->arch, "qwen3");
      EXPECT_FALSE(c->experts_transposed);
    }
    EXPECT_TRUE(c->mrope_interleaved);
    EXPECT_EQ(c->vision.kind, VisionKind::qwen3_vl);
    EXPECT_EQ(c->vision.deepstack_layers, (std::vector<int>{0, 1}));
    j["text_config"]["rope_scaling"]["mrope_interleaved"] = "yes";
    auto bad = parse_hf_config(j.dump());
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("mrope_interleaved"), std::string::npos) << bad.status().message();
    j["text_config"]["rope_scaling"]["mrope_interleaved"] = true;
    j["vision_config"]["deepstack_visual_indexes"] = {0, 1, 2, 2};
    EXPECT_FALSE(parse_hf_config(j.dump()).has_value()) << "more taps than decoder layers, or a repeated tap";
    return;
  }
  EXPECT_EQ(c->arch, "qwen2");
  EXPECT_FALSE(c->mrope_interleaved);
  EXPECT_EQ(c->vision.kind, name == "qwen2_5_vl" ? VisionKind::qwen2_5_vl : VisionKind::qwen2_vl);

  // transformers 5's form: the language model's fields under text_config, rope_parameters.
  nlohmann::json nested = {{"architectures", j["architectures"]}, {"vision_config", j["vision_config"]},
                           {"image_token_id", j["image_token_id"]}, {"vision_start_token_id", j["vision_start_token_id"]},
                           {"vision_end_token_id", j["vision_end_token_id"]}};
  nlohmann::json t = j;
  t.erase("vision_config");
  t.erase("architectures");
  t.erase("rope_scaling");
  t["rope_parameters"] = {{"rope_type", "default"}, {"mrope_section", {2, 3, 3}}, {"rope_theta", j["rope_theta"]}};
  nested["text_config"] = t;
  auto c5 = parse_hf_config(nested.dump());
  ASSERT_TRUE(c5.has_value()) << c5.status().to_string();
  EXPECT_EQ(c5->hidden_size, c->hidden_size);
  EXPECT_EQ(c5->n_layers, c->n_layers);
  EXPECT_EQ(c5->rope_theta, c->rope_theta);
  EXPECT_EQ(c5->mrope_section, c->mrope_section);

  // An M-RoPE split that does not cover head_dim / 2 is refused, naming the field.
  j["rope_scaling"]["mrope_section"] = {2, 3, 4};
  auto bad = parse_hf_config(j.dump());
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("mrope_section"), std::string::npos) << bad.status().message();
  j["rope_scaling"]["mrope_section"] = "16,24,24";
  EXPECT_FALSE(parse_hf_config(j.dump()).has_value());
}

// mrope_positions of a whole prompt equal get_rope_index's position_ids, and its images' shifts
// sum to transformers' rope_delta (with brigade's sign: positions run behind).
TEST_P(QwenVl, RotaryPositionsAreTransformersGetRopeIndex) {
  const QwenVlFixture f = read_fixture(GetParam());
  ASSERT_FALSE(f.cases.empty());
  for (const QwenVlCase& c : f.cases) {
    StepBatch step = make_step({{0, c.prompt, 0, true}}, 64, 4);
    step.images = images_of(f, c, 0);
    const std::vector<int32_t> planes = mrope_positions(step, kMerge);
    const size_t n = c.prompt.size();
    ASSERT_EQ(planes.size(), 3 * n);
    for (size_t k = 0; k < 3; ++k)
      EXPECT_EQ(std::vector<int32_t>(planes.begin() + static_cast<long>(k * n), planes.begin() + static_cast<long>((k + 1) * n)),
                c.position_ids[k])
          << "plane " << k << " of a prompt of " << n;
    EXPECT_EQ(delta_before(f, c, n), -c.rope_delta);
    // A chunk after the images, shifted by rope_delta: the same positions as in the whole prompt.
    const size_t tail = n - 3;
    StepBatch last = make_step({{0, std::vector<int32_t>(c.prompt.begin() + static_cast<long>(tail), c.prompt.end()),
                                 static_cast<int>(tail), true}},
                               64, 4);
    last.rope_delta = {delta_before(f, c, tail)};
    const std::vector<int32_t> shifted = mrope_positions(last, kMerge);
    for (size_t k = 0; k < 3; ++k)
      for (size_t j = 0; j < 3; ++j) EXPECT_EQ(shifted[k * 3 + j], c.position_ids[k][tail + j]);
    // Chunks of 5 and of 7 rows, cutting images anywhere: each row at its place in the whole prompt.
    for (size_t size : {5, 7})
      for (size_t from = 0; from < n; from += size) {
        const size_t to = std::min(n, from + size);
        const std::vector<int32_t> part = mrope_positions(chunk_step(f, c, from, to, 64, 4), kMerge);
        for (size_t k = 0; k < 3; ++k)
          for (size_t j = from; j < to; ++j)
            EXPECT_EQ(part[k * (to - from) + (j - from)], c.position_ids[k][j])
                << "plane " << k << ", row " << j << " of a prompt of " << n << " in chunks of " << size;
      }
  }
}

std::unique_ptr<Model> load_fixture(Backend& backend, const std::string& name) {
  auto model = Model::load(fixture_dir(name), backend, LoadOptions{.progress = false, .state_slots = 4});
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  return model ? std::move(*model) : nullptr;
}

// Each prompt in one prefill: every position's logits, then transformers' greedy continuation
// decoded a token at a time, each decode step shifted by the prompt's images (rope_delta).
TEST_P(QwenVl, PromptsWithImagesMatchTransformersLogitsAndGreedyTokens) {
  const QwenVlFixture f = read_fixture(GetParam());
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_fixture(*backend, GetParam());
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->has_vision());
  constexpr int kPageSize = 16, kPages = 5;
  for (const QwenVlCase& c : f.cases) {
    auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    StepBatch step = make_step({{0, c.prompt, 0, true}}, kPageSize, kPages);
    step.images = images_of(f, c, 0);
    const std::vector<float> logits = run(*model, *backend, *kv, step);
    EXPECT_LE(max_diff(logits, 0, c.logits), kTol) << "prompt of " << c.prompt.size();
    const int vocab = model->config().vocab_size;
    int32_t next = testing::argmax(logits.data() + (c.prompt.size() - 1) * static_cast<size_t>(vocab), vocab);
    std::vector<int32_t> greedy;
    for (int n_past = static_cast<int>(c.prompt.size()); greedy.size() < c.greedy.size(); ++n_past) {
      greedy.push_back(next);
      StepBatch decode = make_step({{0, {next}, n_past, false}}, kPageSize, kPages);
      decode.rope_delta = {-c.rope_delta};
      const auto row = run(*model, *backend, *kv, decode);
      next = testing::argmax(row.data(), vocab);
    }
    EXPECT_EQ(greedy, c.greedy);
  }
}

// The prompts as one step of several sequences, and each prompt in two chunks (the second
// starting after an image, shifted by rope_delta): the same logits as each alone in one step.
// Without the shift the chunked logits move: the test can fail.
TEST_P(QwenVl, BatchedAndChunkedPromptsGiveTheSameLogits) {
  const QwenVlFixture f = read_fixture(GetParam());
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_fixture(*backend, GetParam());
  ASSERT_NE(model, nullptr);
  constexpr int kPageSize = 8, kPages = 6;
  const int n_seqs = static_cast<int>(f.cases.size());
  auto kv = KvCache::allocate(*backend, model->kv_layout(n_seqs * kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  std::vector<SeqChunk> chunks;
  std::vector<StepImage> images;
  int32_t row0 = 0;
  for (int s = 0; s < n_seqs; ++s) {
    chunks.push_back({s, f.cases[static_cast<size_t>(s)].prompt, 0, true});
    for (const StepImage& im : images_of(f, f.cases[static_cast<size_t>(s)], row0)) images.push_back(im);
    row0 += static_cast<int32_t>(f.cases[static_cast<size_t>(s)].prompt.size());
  }
  StepBatch step = make_step(chunks, kPageSize, kPages);
  step.images = images;
  const std::vector<float> logits = run(*model, *backend, *kv, step);
  size_t at = 0;
  for (const QwenVlCase& c : f.cases) {
    EXPECT_LE(max_diff(logits, at, c.logits), kTol) << "batched prompt of " << c.prompt.size();
    at += c.prompt.size();
  }

  for (const QwenVlCase& c : f.cases) {
    // Cut right after the first image's run (its end-of-vision token goes to the second chunk).
    const size_t first = static_cast<size_t>(std::find(c.prompt.begin(), c.prompt.end(), kImageToken) - c.prompt.begin());
    size_t cut = first;
    while (cut < c.prompt.size() && c.prompt[cut] == kImageToken) ++cut;
    for (bool shifted : {true, false}) {
      auto kv2 = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
      ASSERT_TRUE(kv2.has_value());
      const std::vector<int32_t> head(c.prompt.begin(), c.prompt.begin() + static_cast<long>(cut));
      const std::vector<int32_t> tail(c.prompt.begin() + static_cast<long>(cut), c.prompt.end());
      StepBatch one = make_step({{0, head, 0, true}}, kPageSize, kPages);
      StepBatch two = make_step({{0, tail, static_cast<int>(cut), true}}, kPageSize, kPages);
      one.images = images_of(f, c, 0, 0, cut);
      two.images = images_of(f, c, 0, cut);
      if (shifted) two.rope_delta = {delta_before(f, c, cut)};
      std::vector<float> got = run(*model, *backend, *kv2, one);
      const std::vector<float> rest = run(*model, *backend, *kv2, two);
      got.insert(got.end(), rest.begin(), rest.end());
      if (shifted) EXPECT_LE(max_diff(got, 0, c.logits), kTol) << "prompt of " << c.prompt.size() << " cut at " << cut;
      else EXPECT_GT(max_diff(got, 0, c.logits), 1e-2f) << "the unshifted second chunk should rotate elsewhere";
    }
  }
}

// Chunked prefill cutting images anywhere (chunks of 5 and 7 rows against images of 24, 10 and 9
// tokens): each chunk's rows take their part of the image's features, at their M-RoPE positions,
// so every position's logits are transformers'. The tower encodes each image once: the steps
// after an image's first take its features from the encoder cache, which is empty at the end.
TEST_P(QwenVl, ImagesSplitOverStepsGiveTransformersLogits) {
  const QwenVlFixture f = read_fixture(GetParam());
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_fixture(*backend, GetParam());
  ASSERT_NE(model, nullptr);
  constexpr int kPageSize = 8, kPages = 6;
  for (size_t size : {5, 7})
    for (const QwenVlCase& c : f.cases) {
      auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
      ASSERT_TRUE(kv.has_value());
      const Model::VisionStats before = model->vision_stats();
      int64_t later_steps = 0;  // steps that continue an image begun in an earlier one
      std::vector<float> got;
      for (size_t from = 0; from < c.prompt.size(); from += size) {
        const StepBatch step = chunk_step(f, c, from, std::min(c.prompt.size(), from + size), kPageSize, kPages);
        for (const StepImage& im : step.images) later_steps += im.first > 0 ? 1 : 0;
        const std::vector<float> part = run(*model, *backend, *kv, step);
        got.insert(got.end(), part.begin(), part.end());
      }
      ASSERT_GT(later_steps, 0) << "the chunks should cut an image";
      EXPECT_LE(max_diff(got, 0, c.logits), kTol) << "prompt of " << c.prompt.size() << " in chunks of " << size;
      const Model::VisionStats after = model->vision_stats();
      EXPECT_EQ(after.images_encoded - before.images_encoded, static_cast<int64_t>(c.images.size()));
      EXPECT_EQ(after.cache_hits - before.cache_hits, later_steps);
    }
}

// A chunk that starts inside an image with nothing cached (a prefix-cache hit that ends inside
// the image, or a preempted sequence) has the tower encode the image again: the same logits.
TEST_P(QwenVl, AChunkInsideAnImageWithoutItsFeaturesEncodesItAgain) {
  if (recurrent(GetParam()))  // engine_vision_qwen_test's prefix-cache tests cover it through a snapshot
    GTEST_SKIP() << "a second model instance holds no recurrent state to continue the sequence from";
  const QwenVlFixture f = read_fixture(GetParam());
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_fixture(*backend, GetParam());
  ASSERT_NE(model, nullptr);
  constexpr int kPageSize = 8, kPages = 6;
  const QwenVlCase& c = f.cases[0];  // 4 text tokens, then its 24 image tokens at 4..27
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  std::vector<float> got = run(*model, *backend, *kv, chunk_step(f, c, 0, 10, kPageSize, kPages));
  // Another model instance (an empty cache) takes the rest of the prompt on the same KV.
  auto other = load_fixture(*backend, GetParam());
  ASSERT_NE(other, nullptr);
  const std::vector<float> rest = run(*other, *backend, *kv, chunk_step(f, c, 10, c.prompt.size(), kPageSize, kPages));
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_LE(max_diff(got, 0, c.logits), kTol);
  EXPECT_EQ(other->vision_stats().images_encoded, 1);
  EXPECT_EQ(other->vision_stats().cache_hits, 0);
}

// Steps whose images or shifts do not fit are refused before anything runs, naming the problem.
TEST_P(QwenVl, BadImageStepsAreRefusedNamingTheProblem) {
  const QwenVlFixture f = read_fixture(GetParam());
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_fixture(*backend, GetParam());
  ASSERT_NE(model, nullptr);
  constexpr int kPageSize = 16, kPages = 4;
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const QwenVlCase& c = f.cases[0];  // one image of 24 tokens at rows 4..27
  const int vocab = model->config().vocab_size;
  auto refused = [&](StepBatch step, const std::string& why) {
    auto buf = backend->allocate(std::max<size_t>(1, step.logit_rows.size()) * static_cast<size_t>(vocab) * sizeof(float));
    ASSERT_TRUE(buf.has_value());
    const Status st =
        model->forward(step, *kv, buf->view(DType::f32, {static_cast<int64_t>(step.logit_rows.size()), vocab}));
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << why << ": " << st.to_string();
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  const StepBatch whole = make_step({{0, c.prompt, 0, false}}, kPageSize, kPages);
  const QwenImage& im = f.images[static_cast<size_t>(c.images[0])];
  StepBatch odd = whole;
  odd.images = {{4, im.pixels, im.grid_h - 1, im.grid_w}};
  refused(odd, "positive multiple of 2");
  StepBatch wrong_grid = whole;  // 8 x 14 patches are 28 tokens: the image would take the end token
  wrong_grid.images = {{4, im.pixels, im.grid_h, im.grid_w + 2}};
  refused(wrong_grid, "not the image token");
  StepBatch deltas = whole;
  deltas.rope_delta = {0, 0};
  refused(deltas, "rope_delta has 2 entries for 1 sequences");
  StepBatch past_end = whole;  // the image has tokens 0..23
  past_end.images = {{4, im.pixels, im.grid_h, im.grid_w, 24}};
  refused(past_end, "starts at its token 24 but has tokens 0..23");
  StepBatch mid_seq = whole;  // a continued image must begin the sequence's rows
  mid_seq.images = {{4, im.pixels, im.grid_h, im.grid_w, 3}};
  refused(mid_seq, "continues from an earlier step (its token 3) but its sequence's rows begin at 0");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QwenVl,
                         ::testing::Values("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5_vl",
                                           "qwen3_5_moe_vl"));

}  // namespace
}  // namespace brigade
