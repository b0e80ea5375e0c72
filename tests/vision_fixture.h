// Shared by the image tests: reading a fixture's JSON (its features and nested pixel arrays); the
// Qwen2-VL family's fixtures (tests/fixtures/qwen2_vl, qwen2_5_vl; written by
// scripts/make_qwen_vl_fixtures.py: the images as the processor flattens them, with their grids,
// and the prompts with transformers' logits, greedy tokens and rotary positions); logprobs under
// transformers' logits; the StepImages of a prompt's rows; and a vision tower loaded from a
// fixture, its checkpoint's tensors edited (mutations the comparison must catch), with its
// features checked against transformers'. tests/models/image_prompts.h runs a language model with
// images on top of these.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
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

// dir/file parsed as JSON (null, the failure recorded, when it cannot be read or parsed).
inline nlohmann::json read_fixture_json(const std::string& dir, const std::string& file) {
  auto text = read_text_file(dir + "/" + file);
  EXPECT_TRUE(text.has_value()) << dir << "/" << file << ": " << text.status().to_string();
  if (!text) return nullptr;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << dir << "/" << file << " is not JSON";
  if (j.is_discarded()) return nullptr;
  return j;
}

// Arrays of numbers nested to any depth (a feature's rows, pixel_values' [c][y][x]) as one
// vector, in order.
inline std::vector<float> flatten_floats(const nlohmann::json& nested) {
  std::vector<float> out;
  auto add = [&out](const auto& self, const nlohmann::json& j) -> void {
    if (!j.is_array()) {
      out.push_back(j.get<float>());
      return;
    }
    for (const auto& e : j) self(self, e);
  };
  add(add, nested);
  return out;
}

// Each of expected.json's images' "features" ([tokens][width]: get_image_features' output),
// flattened.
inline std::vector<std::vector<float>> read_image_features(const nlohmann::json& expected) {
  std::vector<std::vector<float>> out;
  for (const auto& im : expected.at("images")) out.push_back(flatten_floats(im.at("features")));
  return out;
}

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
  const nlohmann::json j = read_fixture_json(dir, "expected.json");
  if (j.is_null()) return f;
  for (const auto& im : j.at("images")) {
    const auto thw = im.at("grid_thw").get<std::vector<int>>();
    f.images.push_back({std::make_shared<std::vector<float>>(flatten_floats(im.at("pixel_values"))), thw.at(1), thw.at(2)});
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

// A config edit and the text the refusal of the edited config must name.
using ConfigEdit = std::pair<std::function<void(nlohmann::json&)>, std::string>;

// Each edit of base (a config.json) makes read(edited) (an Expected) fail with a message that
// contains the edit's text.
template <typename Read>
void expect_refused_by_name(const nlohmann::json& base, const std::vector<ConfigEdit>& edits, Read read) {
  for (const auto& [edit, want] : edits) {
    nlohmann::json j = base;
    edit(j);
    const auto got = read(j);
    ASSERT_FALSE(got.has_value()) << want;
    EXPECT_NE(got.status().message().find(want), std::string::npos) << got.status().message();
  }
}

// Where a fixture's prompts hold their images: each image is one run of `image` tokens (Pixtral's
// broken by `brk` tokens inside it); `begin` and `end`, where set, must stand just before and
// just after each run. -1: none.
struct ImageMarkers {
  int32_t image = -1, brk = -1, begin = -1, end = -1;
};

// The StepImages a step over a prompt's rows [from, to) carries, at step rows row0 + (r - from):
// the k-th run of m.image (a row of it after neither m.image nor m.brk) holds images[which[k]]
// and is tokens(image) rows long; an image begun before `from` continues at its token from - r
// (StepImage::first). Every run must have its image in `which`, and every image of `which` a run.
template <typename Tokens>
std::vector<StepImage> images_in_chunk(const std::vector<int32_t>& prompt, const std::vector<int>& which,
                                       const std::vector<StepImage>& images, const ImageMarkers& m, Tokens tokens,
                                       size_t from = 0, size_t to = SIZE_MAX, int32_t row0 = 0) {
  std::vector<StepImage> out;
  size_t next = 0, prev_end = SIZE_MAX;  // fixed-size images may touch (PaliGemma's): one begins where one ends
  for (size_t r = 0; r < prompt.size(); ++r) {
    if (prompt[r] != m.image || (r > 0 && r != prev_end && (prompt[r - 1] == m.image || prompt[r - 1] == m.brk)))
      continue;
    EXPECT_LT(next, which.size()) << "the run of image tokens at row " << r << " has no image";
    if (next >= which.size()) break;
    const StepImage& im = images.at(static_cast<size_t>(which[next++]));
    const size_t end = r + static_cast<size_t>(tokens(im));
    prev_end = end;
    if (m.begin >= 0) {
      EXPECT_EQ(r > 0 ? prompt[r - 1] : -1, m.begin) << "before the image at row " << r;
    }
    if (m.end >= 0) {
      EXPECT_EQ(end < prompt.size() ? prompt[end] : -1, m.end) << "after the image at row " << r;
    }
    if (r < to && end > from) {
      const size_t first = from > r ? from - r : 0;
      out.push_back({row0 + static_cast<int32_t>(r + first - from), im.pixels, im.grid_h, im.grid_w,
                     static_cast<int32_t>(first)});
    }
  }
  EXPECT_EQ(next, which.size()) << "images without a run of image tokens";
  return out;
}

// A vision tower (QwenVision, ClipVision, InternVision, Gemma4Vision) loaded from a fixture on its
// own CPU backend for a language model text_hidden wide: the tower tests' holder; `bytes` keeps
// tensors a test rewrote alive.
template <typename Encoder>
struct LoadedTower {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  std::shared_ptr<MappedFile> file;
  std::unique_ptr<Checkpoint> ck;
  std::vector<std::vector<uint8_t>> bytes;
  VisionConfig v;
  int text_hidden = 0;
  Encoder tower;
};

// t's copy of zeros in place of tensor's bytes (a mutation: the tensor read as zeros).
template <typename Encoder>
void zero_tensor(LoadedTower<Encoder>& t, RawTensor& tensor) {
  tensor.bytes = t.bytes.emplace_back(tensor.bytes.size(), uint8_t{0});
}

// A mutation of a merger's f32 weight [rows, unit * h] that reads a patch-major input (column
// k * h + c: channel c of patch k): its columns rearranged, W'[r][c * unit + k] = W[r][k * h + c],
// so that the (correct) patch-major read sees them channel-major, as if unfold's order were
// ignored. The new bytes are t's.
template <typename Encoder>
void make_channel_major(LoadedTower<Encoder>& t, RawTensor& m, int64_t h, int64_t unit) {
  const int64_t rows = m.shape.at(0);
  std::vector<uint8_t>& out = t.bytes.emplace_back(m.bytes.size());
  const auto* src = reinterpret_cast<const float*>(m.bytes.data());
  auto* dst = reinterpret_cast<float*>(out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < h; ++c)
      for (int64_t k = 0; k < unit; ++k) dst[r * unit * h + c * unit + k] = src[r * unit * h + k * h + c];
  m.bytes = out;
}

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

// Reads dir/model.safetensors into t (its tensor names through `rename`, e.g. gemma3_tensors,
// which may also edit them: zero_tensor, make_channel_major) and loads t.tower from it with t.v
// for a language model text_hidden wide; false (the failure recorded) when a step fails.
template <typename Encoder, typename Rename>
bool load_tower_from(LoadedTower<Encoder>& t, const std::string& dir, int text_hidden, Rename rename) {
  auto file = MappedFile::open(dir + "/model.safetensors");
  EXPECT_TRUE(file.has_value()) << file.status().to_string();
  if (!file) return false;
  t.file = *file;
  t.text_hidden = text_hidden;
  std::map<std::string, RawTensor> tensors;
  const Status read = read_safetensors(t.file, tensors);
  EXPECT_TRUE(read.is_ok()) << read.to_string();
  t.ck = Checkpoint::from_memory(dir, ModelConfig{}, rename(std::move(tensors)));
  WeightLoader w(*t.ck, *t.backend, std::nullopt);
  const Status loaded = t.tower.load(w, *t.backend, t.v, text_hidden);
  EXPECT_TRUE(loaded.is_ok()) << loaded.to_string();
  return loaded.is_ok();
}

// A tower from fixture directory dir for a language model text_hidden wide: its config's
// VisionConfig `v` (a failure recorded), edited by `edit` where set, the checkpoint's tensors
// through rename(tower, tensors) (load_tower_from; rename may edit them into the tower's bytes).
// nullptr when a step fails.
template <typename Encoder, typename Rename>
std::unique_ptr<LoadedTower<Encoder>> load_fixture_tower(const std::string& dir, const Expected<VisionConfig>& v,
                                                         int text_hidden, Rename rename,
                                                         const std::function<void(VisionConfig&)>& edit = {}) {
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  if (!v) return nullptr;
  auto t = std::make_unique<LoadedTower<Encoder>>();
  t->v = *v;
  if (edit) edit(t->v);
  const bool loaded = load_tower_from(*t, dir, text_hidden, [&](std::map<std::string, RawTensor> tensors) {
    return rename(*t, std::move(tensors));
  });
  return loaded ? std::move(t) : nullptr;
}

// Each image's features from t's tower (loaded by load_tower_from), the images encoded in one
// call: t.v.image_features(grid) rows of t.text_hidden values each.
template <typename Encoder>
std::vector<std::vector<float>> encode_images(LoadedTower<Encoder>& t, const std::vector<StepImage>& images) {
  return encode_each(t, images, t.text_hidden,
                     [&t](const StepImage& im) { return t.v.image_features(im.grid_h, im.grid_w); });
}

// images[which[0]], images[which[1]], ... encoded in one call by t's tower: each one's features
// must be want[which[k]] within tol (relative_error). Returns the largest error.
template <typename Encoder>
float expect_features(LoadedTower<Encoder>& t, const std::vector<StepImage>& images,
                      const std::vector<std::vector<float>>& want, const std::vector<size_t>& which, float tol) {
  std::vector<StepImage> batch;
  for (size_t i : which) batch.push_back(images.at(i));
  const auto got = encode_images(t, batch);
  EXPECT_EQ(got.size(), which.size());
  float worst = got.size() == which.size() ? 0.0f : INFINITY;
  for (size_t k = 0; k < got.size() && k < which.size(); ++k) {
    const float err = relative_error(got[k], want.at(which[k]));
    EXPECT_LE(err, tol) << "image " << which[k] << " at " << k << " of " << which.size() << " in one call";
    worst = std::max(worst, err);
  }
  return worst;
}

// Each image alone, then all of them in one call in the order `together` (each image's rows see
// only its own): every image's features within tol of want's. Returns the largest error alone.
template <typename Encoder>
float expect_features_alone_and_together(LoadedTower<Encoder>& t, const std::vector<StepImage>& images,
                                         const std::vector<std::vector<float>>& want,
                                         const std::vector<size_t>& together, float tol) {
  float worst = 0.0f;
  for (size_t i = 0; i < images.size(); ++i) worst = std::max(worst, expect_features(t, images, want, {i}, tol));
  expect_features(t, images, want, together, tol);
  return worst;
}

}  // namespace brigade::testing
