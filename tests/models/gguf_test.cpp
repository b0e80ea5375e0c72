// GGUF weights: a GGUF written from a transformers fixture's weights (as llama.cpp's converter
// lays them out, q/k permutation included) must give the fixture's logits in F32, the same
// logits as the safetensors loaded as bf16 (f16) when stored BF16 (F16), and stay within kQ8Tol
// in Q8_0.
// Truncated or corrupt files are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/gguf.h"
#include "models/inspect.h"
#include "models/llama.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::GgufOut;
using testing::read_fixture_cases;
using testing::run_fixture_case;

// Same as hf_fixture_test.cpp: fp32 summation order plus 7 printed digits (measured 1.9e-5).
constexpr float kLogitTol = 2e-4f;
// BF16 (F16) GGUF vs the safetensors converted to bf16 (f16) at load: the same rounded weights;
// only the summation order differs (llama's permuted q/k rows reorder the q·k dot products).
constexpr float kHalfSameTol = 1e-4f;
// Q8_0 keeps ~8 bits per weight. These fixtures' logits reach |45| (N(0, 1) embeddings); the
// measured worst differences from the f32 reference are 0.055 (llama), 0.067 (llama linear),
// 0.49 (llama3, tied), 0.083 (mistral), 0.067 (qwen3) and 0.59 (qwen2: tied N(0, 1) embedding
// quantized twice as wide), so the bound is 1.5, while a wrong layout or scale is off by tens.
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

std::string write_gguf(const std::string& fixture, const testing::TempDir& dir, GgufOut type,
                       bool sliding_window_key = true) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  const std::string path = dir.file(fixture + ".gguf");
  if (ck) testing::write_gguf_from_checkpoint(**ck, path, type, sliding_window_key);
  return path;
}

std::string fixture_arch(const std::string& fixture) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  return ck ? (*ck)->config().arch : "";
}

class GgufWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufWeights, F32MatchesTransformers) {
  const testing::TempDir dir("gguf_f32");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(write_gguf(GetParam(), dir, GgufOut::f32), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().arch, fixture_arch(GetParam()));
  for (const auto& fc : read_fixture_cases(GetParam())) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol);
    EXPECT_EQ(run.greedy, fc.greedy);
  }
}

// The GGUF stored as `out` against the safetensors converted to `dtype` at load.
void expect_same_as_safetensors(const std::string& fixture, GgufOut out, DType dtype) {
  const testing::TempDir dir("gguf_half");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto gguf = load(write_gguf(fixture, dir, out), *backend);
  auto st = load(fixture_dir(fixture), *backend, dtype);
  ASSERT_TRUE(gguf && st);
  EXPECT_EQ(gguf->config().dtype, dtype) << "stored as " << dtype_name(dtype) << " in the GGUF";
  for (const auto& fc : read_fixture_cases(fixture)) {
    const auto a = run_fixture_case(*gguf, *backend, fc);
    const auto b = run_fixture_case(*st, *backend, fc);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    float diff = 0;
    for (size_t i = 0; i < a.logits.size(); ++i) diff = std::max(diff, std::fabs(a.logits[i] - b.logits[i]));
    EXPECT_LE(diff, kHalfSameTol) << "the same " << dtype_name(dtype) << " weights through GGUF and safetensors";
    EXPECT_EQ(a.greedy, b.greedy);
    ::testing::Test::RecordProperty(std::string(dtype_name(dtype)) + "_vs_safetensors_" + std::to_string(fc.prompt.size()), std::to_string(diff));
  }
}

TEST_P(GgufWeights, Bf16MatchesSafetensorsAsBf16) { expect_same_as_safetensors(GetParam(), GgufOut::bf16, DType::bf16); }
TEST_P(GgufWeights, F16MatchesSafetensorsAsF16) { expect_same_as_safetensors(GetParam(), GgufOut::f16, DType::f16); }

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

INSTANTIATE_TEST_SUITE_P(Architectures, GgufWeights,
                         ::testing::Values("llama", "llama_rope_linear", "llama_rope_llama3", "mistral_sliding",
                                           "qwen2", "qwen3", "phi3"));

// The fixture's prompts that are longer than `n` tokens (the ones a window or a RoPE band shows in).
std::vector<testing::FixtureCase> cases_longer_than(const std::string& fixture, size_t n) {
  std::vector<testing::FixtureCase> out;
  for (auto& fc : read_fixture_cases(fixture))
    if (fc.prompt.size() > n) out.push_back(std::move(fc));
  EXPECT_FALSE(out.empty()) << fixture << " has no prompt longer than " << n;
  return out;
}

// Mistral: llama.attention.sliding_window reaches the attention path. The 40-token prompt is five
// windows long; GgufWeights/mistral_sliding matches transformers on it, so the window is honoured
// where it matters.
TEST(GgufSlidingWindow, KeyIsHonoured) {
  const testing::TempDir dir("gguf_swa");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(write_gguf("mistral_sliding", dir, GgufOut::f32), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().sliding_window, 8);
  for (const auto& fc : cases_longer_than("mistral_sliding", 8)) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    EXPECT_EQ(run.greedy, fc.greedy);
  }
}

// Without the key a llama GGUF gets full causal attention, as in llama.cpp (whose llama
// architecture never reads the key): identical to the windowed reference up to the window, and
// measurably different past it.
TEST(GgufSlidingWindow, WithoutTheKeyAttentionIsUnwindowed) {
  const testing::TempDir dir("gguf_noswa");
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(write_gguf("mistral_sliding", dir, GgufOut::f32, /*sliding_window_key=*/false), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().sliding_window, 0);
  for (const auto& fc : read_fixture_cases("mistral_sliding")) {
    const auto run = run_fixture_case(*model, *backend, fc);
    // max_abs_diff covers the prompt's positions only.
    if (fc.prompt.size() <= 8) {
      EXPECT_LE(run.max_abs_diff, kLogitTol);
    } else {
      EXPECT_GT(run.max_abs_diff, 100 * kLogitTol) << "the window must matter here";
    }
  }
}

// Where `needle` first occurs in `hay` (tensor names and data are written verbatim).
size_t find_bytes(const std::vector<uint8_t>& hay, const void* needle, size_t n) {
  const auto* p = static_cast<const uint8_t*>(needle);
  auto it = std::search(hay.begin(), hay.end(), p, p + n);
  EXPECT_NE(it, hay.end());
  return static_cast<size_t>(it - hay.begin());
}

// llama3 RoPE in GGUF: llama.cpp's converter stores it as rope_freqs.weight, per-frequency divisors
// of inv_freq; GgufWeights/llama_rope_llama3 matches transformers with it. Here: the factors
// arrive as written, the 40-token prompt needs them, and a tensor of the wrong length or a
// non-positive factor is refused naming the tensor.
TEST(GgufRopeFreqs, FactorsAreReadAndMatter) {
  const testing::TempDir dir("gguf_rope_freqs");
  auto src = Checkpoint::open(fixture_dir("llama_rope_llama3"));
  ASSERT_TRUE(src.has_value()) << src.status().to_string();
  const std::string path = write_gguf("llama_rope_llama3", dir, GgufOut::f32);
  auto ck = Checkpoint::open(path);
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const std::vector<float> want = testing::llama3_rope_freq_factors((*src)->config());
  EXPECT_EQ((*ck)->config().rope_scaling.freq_factors, want);
  EXPECT_EQ((*ck)->config().rope_scaling.type, RopeScalingType::none) << "GGUF has no llama3 scaling type";
  ASSERT_GT(*std::max_element(want.begin(), want.end()), 1.0f) << "the fixture scales some band";
  auto info = inspect_model(path);
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_NE(format_model_info(*info).find("rope_freqs"), std::string::npos) << format_model_info(*info);

  // The same file with the tensor renamed to one no layout uses: plain RoPE, which the long
  // prompt shows.
  auto bytes = testing::read_bytes(path);
  const std::string name = "rope_freqs.weight", other = "rope_xxxxx.weight";
  std::copy(other.begin(), other.end(), bytes.begin() + static_cast<std::ptrdiff_t>(find_bytes(bytes, name.data(), name.size())));
  testing::write_bytes(dir.file("renamed.gguf"), bytes);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto plain = load(dir.file("renamed.gguf"), *backend);
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->config().rope_scaling.freq_factors.empty());
  for (const auto& fc : cases_longer_than("llama_rope_llama3", 8))
    EXPECT_GT(run_fixture_case(*plain, *backend, fc).max_abs_diff, 100 * kLogitTol) << "the factors must matter";
}

TEST(GgufRopeFreqs, WrongLengthOrBadFactorIsRefused) {
  const testing::TempDir dir("gguf_rope_freqs_bad");
  auto src = Checkpoint::open(fixture_dir("llama_rope_llama3"));
  ASSERT_TRUE(src.has_value());
  const auto good = testing::read_bytes(write_gguf("llama_rope_llama3", dir, GgufOut::f32));
  // Tensor info: u64 name length, name, u32 n_dims, u64 dims[0], ... Shrink dims[0] by one.
  const std::string name = "rope_freqs.weight";
  const size_t info = find_bytes(good, name.data(), name.size()) + name.size();
  auto short_len = good;
  uint64_t dim0 = 0;
  std::memcpy(&dim0, &short_len[info + 4], 8);
  ASSERT_EQ(dim0, static_cast<uint64_t>((*src)->config().head_dim / 2));
  --dim0;
  std::memcpy(&short_len[info + 4], &dim0, 8);
  testing::write_bytes(dir.file("short.gguf"), short_len);
  auto st = Checkpoint::open(dir.file("short.gguf")).status();
  EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
  EXPECT_NE(st.message().find("rope_freqs.weight"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("head_dim / 2"), std::string::npos) << st.to_string();

  const std::vector<float> f = testing::llama3_rope_freq_factors((*src)->config());
  auto negative = good;
  const float minus_one = -1.0f;
  std::memcpy(&negative[find_bytes(good, f.data(), f.size() * 4)], &minus_one, 4);
  testing::write_bytes(dir.file("negative.gguf"), negative);
  st = Checkpoint::open(dir.file("negative.gguf")).status();
  EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
  EXPECT_NE(st.message().find("rope_freqs.weight"), std::string::npos) << st.to_string();
}

// Phi-3: blk.N.attn_qkv and ffn_up (gate|up) load as the fused weights, the window key is
// honoured (GgufWeights/phi3 matches transformers on the 40-token prompt, 5 windows long), and
// LongRoPE factor tensors are refused, pointing to the Hugging Face checkpoint.
TEST(GgufFile, Phi3FusedWeightsAndLongropeRefused) {
  const testing::TempDir dir("gguf_phi3");
  auto info = inspect_model(write_gguf("phi3", dir, GgufOut::f32));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_EQ(info->config.arch, "phi3");
  EXPECT_TRUE(info->config.fused_weights);
  EXPECT_EQ(info->config.sliding_window, 8);
  const Status st = Checkpoint::open(write_gguf("phi3_longrope", dir, GgufOut::f32)).status();
  EXPECT_EQ(st.code(), StatusCode::unsupported) << st.to_string();
  EXPECT_NE(st.message().find("rope_factors_long"), std::string::npos) << st.to_string();
}

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
  // A vocabulary-only GGUF (llama.cpp's ggml-vocab-gpt-2: general.architecture gpt2, which brigade
  // reads, and no tensors): the error names the first missing tensor.
  const std::string vocab = std::string(BRIGADE_TESTDATA) + "/tokenizers/ggml-vocab-gpt-2.gguf";
  if (std::filesystem::exists(vocab)) {
    auto ck = Checkpoint::open(vocab);
    ASSERT_FALSE(ck.has_value());
    EXPECT_NE(ck.status().message().find("token_embd.weight"), std::string::npos) << ck.status().to_string();
  }
}

}  // namespace
}  // namespace brigade
