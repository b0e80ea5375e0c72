// GGUF weights: a GGUF written from a transformers fixture's weights (as llama.cpp's converter
// lays them out, q/k permutation included) must give the fixture's logits in F32, the same
// logits as the safetensors loaded as bf16 when stored BF16, and stay within kQ8Tol in Q8_0.
// Truncated or corrupt files are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/gguf.h"
#include "models/inspect.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::GgufOut;
using testing::read_fixture_cases;
using testing::run_fixture_case;

// Same as hf_fixture_test.cpp: fp32 summation order plus 7 printed digits (measured 1.9e-5).
constexpr float kLogitTol = 2e-4f;
// BF16 GGUF vs the safetensors converted to bf16 at load: the same rounded weights; only the
// summation order differs (llama's permuted q/k rows reorder the q·k dot products).
constexpr float kBf16SameTol = 1e-4f;
// Q8_0 keeps ~8 bits per weight. These fixtures' logits reach |45| (N(0, 1) embeddings); the
// measured worst differences from the f32 reference are 0.055 (llama), 0.067 (llama linear),
// 0.067 (qwen3) and 0.59 (qwen2: tied N(0, 1) embedding quantized twice as wide), so the bound
// is 1.5, while a wrong layout or scale is off by tens.
constexpr float kQ8Tol = 1.5f;

std::unique_ptr<Model> load(const std::string& path, Backend& backend, std::optional<DType> dtype = std::nullopt) {
  LoadOptions opts;
  opts.max_batch_tokens = 64;
  opts.progress = false;
  opts.weight_dtype = dtype;
  auto m = Model::load(path, backend, opts);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

std::string write_gguf(const std::string& fixture, const testing::TempDir& dir, GgufOut type) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  const std::string path = dir.file(fixture + ".gguf");
  if (ck) testing::write_gguf_from_checkpoint(**ck, path, type);
  return path;
}

class GgufWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufWeights, F32MatchesTransformers) {
  const testing::TempDir dir("gguf_f32");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(write_gguf(GetParam(), dir, GgufOut::f32), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().arch, GetParam().substr(0, GetParam().find('_')));
  for (const auto& fc : read_fixture_cases(GetParam())) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol);
    EXPECT_EQ(run.greedy, fc.greedy);
  }
}

TEST_P(GgufWeights, Bf16MatchesSafetensorsAsBf16) {
  const testing::TempDir dir("gguf_bf16");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto gguf = load(write_gguf(GetParam(), dir, GgufOut::bf16), *backend);
  auto st = load(fixture_dir(GetParam()), *backend, DType::bf16);
  ASSERT_TRUE(gguf && st);
  for (const auto& fc : read_fixture_cases(GetParam())) {
    const auto a = run_fixture_case(*gguf, *backend, fc);
    const auto b = run_fixture_case(*st, *backend, fc);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    float diff = 0;
    for (size_t i = 0; i < a.logits.size(); ++i) diff = std::max(diff, std::fabs(a.logits[i] - b.logits[i]));
    EXPECT_LE(diff, kBf16SameTol) << "the same bf16 weights through GGUF and safetensors";
    EXPECT_EQ(a.greedy, b.greedy);
    RecordProperty("bf16_vs_safetensors_" + std::to_string(fc.prompt.size()), std::to_string(diff));
  }
}

TEST_P(GgufWeights, Q8_0WithinTolerance) {
  const testing::TempDir dir("gguf_q8");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(write_gguf(GetParam(), dir, GgufOut::q8_0), *backend);
  ASSERT_NE(model, nullptr);
  float worst = 0;
  for (const auto& fc : read_fixture_cases(GetParam())) worst = std::max(worst, run_fixture_case(*model, *backend, fc).max_abs_diff);
  EXPECT_LE(worst, kQ8Tol);
  EXPECT_GT(worst, 0.0f) << "quantized weights cannot be exact";
  RecordProperty("q8_max_abs_diff", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufWeights, ::testing::Values("llama", "llama_rope_linear", "qwen2", "qwen3"));

TEST(GgufFile, InspectShowsTheFormatAndArchitecture) {
  const testing::TempDir dir("gguf_inspect");
  auto info = inspect_model(write_gguf("qwen3", dir, GgufOut::q8_0));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_EQ(info->format, "gguf");
  EXPECT_EQ(info->config.arch, "qwen3");
  EXPECT_EQ(info->config.head_dim, 32);
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("q/k norm"), std::string::npos) << text;
}

TEST(GgufFile, TruncatedOrCorruptFilesAreClearErrors) {
  const testing::TempDir dir("gguf_bad");
  const std::string good = write_gguf("qwen3", dir, GgufOut::f32);
  const auto bytes = testing::read_bytes(good);
  for (size_t cut : {size_t{3}, size_t{20}, size_t{200}, bytes.size() / 2, bytes.size() - 1}) {
    const std::string path = dir.file("cut.gguf");
    testing::write_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)));
    auto ck = Checkpoint::open(path);
    ASSERT_FALSE(ck.has_value()) << "cut at " << cut;
    EXPECT_EQ(ck.status().code(), StatusCode::corrupt) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find("cut.gguf"), std::string::npos) << ck.status().to_string();
  }
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  testing::write_bytes(dir.file("magic.gguf"), bad_magic);
  EXPECT_EQ(Checkpoint::open(dir.file("magic.gguf")).status().code(), StatusCode::corrupt);
  auto bad_version = bytes;
  bad_version[4] = 9;
  testing::write_bytes(dir.file("version.gguf"), bad_version);
  EXPECT_EQ(Checkpoint::open(dir.file("version.gguf")).status().code(), StatusCode::unsupported);
  // A vocabulary-only GGUF has no architecture: the error names the missing key.
  const std::string vocab = std::string(BRIGADE_TESTDATA) + "/tokenizers/ggml-vocab-gpt-2.gguf";
  if (std::filesystem::exists(vocab)) {
    auto ck = Checkpoint::open(vocab);
    ASSERT_FALSE(ck.has_value());
    EXPECT_NE(ck.status().message().find("general.architecture"), std::string::npos) << ck.status().to_string();
  }
}

}  // namespace
}  // namespace brigade
