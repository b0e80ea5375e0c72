// Shared by the image tests: the Qwen2-VL family's fixtures (tests/fixtures/qwen2_vl,
// qwen2_5_vl; written by scripts/make_qwen_vl_fixtures.py: the images as the processor flattens
// them, with their grids, and the prompts with transformers' logits, greedy tokens and rotary
// positions), and logprobs under transformers' logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/cpu_backend.h"
#include "models/checkpoint.h"
#include "models/mapped_file.h"
#include "models/model.h"
#include "models/safetensors.h"
#include "models/vision_config.h"
#include "models/weight_loader.h"

namespace brigade::testing {

// The Qwen fixtures' vision token ids (scripts/make_qwen_vl_fixtures.py).
constexpr int32_t kQwenVisionStart = 300;
constexpr int32_t kQwenVisionEnd = 301;
constexpr int32_t kQwenImageToken = 302;

struct QwenVlImage {
  std::shared_ptr<const std::vector<float>> pixels;  // [grid_h * grid_w, patch width]
  int grid_h = 0, grid_w = 0;
};

struct QwenVlCase {
  std::vector<int32_t> prompt;
  std::vector<int> images;  // which of the fixture's images, in the order of their runs
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
  std::vector<std::vector<int32_t>> position_ids;  // [3][prompt] get_rope_index's
  int32_t rope_delta = 0;                          // transformers' sign: max position + 1 - length
};

struct QwenVlFixture {
  std::vector<QwenVlImage> images;
  std::vector<QwenVlCase> cases;
};

// dir: the fixture directory (its expected.json).
inline QwenVlFixture read_qwen_vl_fixture(const std::string& dir) {
  QwenVlFixture f;
  auto text = read_text_file(dir + "/expected.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  if (!text) return f;
  const auto j = nlohmann::json::parse(*text);
  for (const auto& im : j.at("images")) {
    auto px = std::make_shared<std::vector<float>>();
    for (const auto& row : im.at("pixel_values"))
      for (float v : row.get<std::vector<float>>()) px->push_back(v);
    const auto thw = im.at("grid_thw").get<std::vector<int>>();
    f.images.push_back({std::move(px), thw.at(1), thw.at(2)});
  }
  for (const auto& c : j.at("cases"))
    f.cases.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("images").get<std::vector<int>>(),
                       c.at("logits").get<std::vector<std::vector<float>>>(), c.at("greedy").get<std::vector<int32_t>>(),
                       c.at("position_ids").get<std::vector<std::vector<int32_t>>>(), c.at("rope_delta").get<int32_t>()});
  return f;
}

// A vision tower's features against transformers': max |got - want| / max |want|; infinite for a
// size mismatch or a NaN.
inline float relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    const float d = std::fabs(got[i] - want[i]);
    diff = std::max(diff, std::isnan(d) ? INFINITY : d);
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / scale;
}

// The largest |got - want| over want's rows, got's rows from row0 on (each as wide as want's);
// infinite for a NaN.
inline float max_diff(const std::vector<float>& got, size_t row0, const std::vector<std::vector<float>>& want) {
  float worst = 0.0f;
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t v = 0; v < want[r].size(); ++v) {
      const float d = std::fabs(got[(row0 + r) * want[r].size() + v] - want[r][v]);
      worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
  return worst;
}

// log p(token) under a logits row, in double.
inline double logprob(const std::vector<float>& row, int32_t token) {
  double mx = -INFINITY, sum = 0.0;
  for (float v : row) mx = std::max(mx, static_cast<double>(v));
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  return row[static_cast<size_t>(token)] - mx - std::log(sum);
}

// The worst difference between a completion's prompt logprobs (each with .logprob an optional)
// and those of the prompt's tokens under transformers' logits (row q - 1 scores token q).
template <typename PromptLogprobs>
double prompt_logprob_error(const PromptLogprobs& got, const std::vector<int32_t>& prompt,
                            const std::vector<std::vector<float>>& logits) {
  EXPECT_EQ(got.size(), prompt.size());
  double worst = 0.0;
  for (size_t q = 1; q < got.size() && q < prompt.size(); ++q) {
    const auto& lp = got[q].logprob;
    if (!lp) return INFINITY;
    worst = std::max(worst, std::fabs(*lp - logprob(logits[q - 1], prompt[q])));
  }
  return worst;
}

// A vision tower (QwenVision, ClipVision) loaded from a fixture on its own CPU backend: the
// tower tests' holder; `bytes` keeps tensors a test rewrote alive.
template <typename Encoder>
struct LoadedTower {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  std::shared_ptr<MappedFile> file;
  std::unique_ptr<Checkpoint> ck;
  std::vector<std::vector<uint8_t>> bytes;
  VisionConfig v;
  Encoder tower;
};

// Encodes `images` with t's tower in one call and returns each image's features, rows(image)
// rows of `width` values each.
template <typename Encoder, typename Rows>
std::vector<std::vector<float>> encode_each(LoadedTower<Encoder>& t, const std::vector<StepImage>& images,
                                            int64_t width, Rows rows) {
  int64_t total = 0;
  for (const StepImage& im : images) total += rows(im);
  auto buf = t.backend->allocate(static_cast<size_t>(total * width) * sizeof(float));
  EXPECT_TRUE(buf.has_value());
  if (!buf) return {};
  const Tensor out = buf->view(DType::f32, {total, width});
  const Status st = t.tower.encode(images, out);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  if (!st.is_ok()) return {};
  std::vector<float> all(static_cast<size_t>(total * width));
  t.backend->download(all.data(), out);
  std::vector<std::vector<float>> each;
  auto at = all.begin();
  for (const StepImage& im : images) {
    const auto n = static_cast<std::ptrdiff_t>(rows(im) * width);
    each.emplace_back(at, at + n);
    at += n;
  }
  return each;
}

// Reads dir/model.safetensors into t (its tensor names through `rename`, e.g. gemma3_tensors) and
// loads t.tower from it with t.v for a language model text_hidden wide; false (the failure
// recorded) when a step fails.
template <typename Encoder, typename Rename>
bool load_tower_from(LoadedTower<Encoder>& t, const std::string& dir, int text_hidden, Rename rename) {
  auto file = MappedFile::open(dir + "/model.safetensors");
  EXPECT_TRUE(file.has_value()) << file.status().to_string();
  if (!file) return false;
  t.file = *file;
  std::map<std::string, RawTensor> tensors;
  const Status read = read_safetensors(t.file, tensors);
  EXPECT_TRUE(read.is_ok()) << read.to_string();
  t.ck = Checkpoint::from_memory(dir, ModelConfig{}, rename(std::move(tensors)));
  WeightLoader w(*t.ck, *t.backend, std::nullopt);
  const Status loaded = t.tower.load(w, *t.backend, t.v, text_hidden);
  EXPECT_TRUE(loaded.is_ok()) << loaded.to_string();
  return loaded.is_ok();
}

}  // namespace brigade::testing
