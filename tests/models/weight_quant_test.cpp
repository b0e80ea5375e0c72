// FP8 E4M3 dequantization (models/weight_quant.h): the decode of every byte against torch's
// float8_e4m3fn (tests/fixtures/fp8/e4m3.json, scripts/make_fp8_fixtures.py), and every
// WeightLoader path over a block-scaled matrix whose blocks end mid-matrix (partial tail blocks,
// slices starting and ending inside blocks) against q * scale of its own block, element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/weight_loader.h"
#include "models/weight_quant.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::StEntry;
using testing::TempDir;

// torch.float8_e4m3fn's value of every byte (NaN where torch gives NaN).
std::vector<double> torch_e4m3() {
  auto text = read_text_file(fixture_dir("fp8") + "/e4m3.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  std::vector<double> out;
  if (!text) return out;
  const auto j = nlohmann::json::parse(*text);
  for (const auto& v : j.at("values")) out.push_back(v.is_string() ? NAN : v.get<double>());
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Fp8Decode, EveryByteMatchesTorchFloat8E4m3fn) {
  const std::vector<double> torch = torch_e4m3();
  ASSERT_EQ(torch.size(), 256u);
  for (int b = 0; b < 256; ++b) {
    const float mine = e4m3_table()[static_cast<size_t>(b)], core = e4m3_to_f32(static_cast<uint8_t>(b));
    if (std::isnan(torch[static_cast<size_t>(b)])) {
      EXPECT_TRUE(std::isnan(mine) && std::isnan(core)) << "byte " << b;
      continue;
    }
    const float want = static_cast<float>(torch[static_cast<size_t>(b)]);
    EXPECT_EQ(bits(mine), bits(want)) << "byte " << b << ": " << mine << " vs torch " << want;  // -0 included
    EXPECT_EQ(bits(core), bits(want)) << "byte " << b;
  }
  EXPECT_EQ(e4m3_table()[1], std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_table()[0x7e], 448.0f);
}

// quantize_fp8 (make-model's quantizer): q * scale is within half a step of e4m3 of w.
TEST(Fp8Quantize, DequantizesWithinHalfAnE4m3Step) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.3f);
  const int64_t rows = 37, cols = 50;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& f : w) f = dist(rng);
  w[5] = 0.0f;
  for (WeightScaling sc : {WeightScaling::block, WeightScaling::channel, WeightScaling::tensor}) {
    std::vector<uint8_t> q(w.size());
    const std::vector<float> s = quantize_fp8(w.data(), rows, cols, sc, 16, 24, q.data());
    const int64_t ncb = sc == WeightScaling::block ? 3 : 1;
    EXPECT_EQ(static_cast<int64_t>(s.size()), sc == WeightScaling::block ? 3 * 3 : sc == WeightScaling::channel ? rows : 1);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = sc == WeightScaling::block ? (r / 16) * ncb + c / 24 : sc == WeightScaling::channel ? r : 0;
        const float scale = s[static_cast<size_t>(i)], x = w[static_cast<size_t>(r * cols + c)];
        const float back = e4m3_table()[q[static_cast<size_t>(r * cols + c)]] * scale;
        EXPECT_LE(std::fabs(back - x), std::max(std::fabs(x) * 0.0625f, scale * std::ldexp(1.0f, -10)) * 1.0001f)
            << r << "," << c;
      }
    }
  }
}

// A checkpoint of one block-scaled matrix "w.weight" [24, 30] (blocks 5 x 7: the last block row
// holds 4 rows, the last block column 2 columns) and a stack "s.gate_up_proj" [3, 24, 30].
class Fp8Slices : public ::testing::Test {
 protected:
  static constexpr int64_t kRows = 24, kCols = 30, kBr = 5, kBc = 7, kNrb = 5, kNcb = 5, kItems = 3;

  void SetUp() override {
    auto cfg = read_text_file(fixture_dir("qwen3_fp8_block") + "/config.json");
    ASSERT_TRUE(cfg.has_value());
    auto j = nlohmann::json::parse(*cfg);
    j["quantization_config"]["weight_block_size"] = {kBr, kBc};
    testing::write_text(dir_.file("config.json"), j.dump());
    std::mt19937 rng(11);
    auto codes = [&](int64_t n) {
      std::vector<uint8_t> c(static_cast<size_t>(n));
      for (auto& b : c) do b = static_cast<uint8_t>(rng()); while ((b & 0x7f) == 0x7f);  // no NaN codes
      return c;
    };
    auto scales = [&](int64_t n) {
      std::vector<float> s(static_cast<size_t>(n));
      for (auto& v : s) v = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 9) - 12);
      return s;
    };
    w_codes_ = codes(kRows * kCols);
    w_scales_ = scales(kNrb * kNcb);
    s_codes_ = codes(kItems * kRows * kCols);
    s_scales_ = scales(kItems * kNrb * kNcb);
    auto bytes = [](const auto& v) {
      std::vector<uint8_t> b(v.size() * sizeof(v[0]));
      std::memcpy(b.data(), v.data(), b.size());
      return b;
    };
    testing::write_safetensors_file(dir_.file("model.safetensors"),
                                    {StEntry{"w.weight", "F8_E4M3", {kRows, kCols}, w_codes_},
                                     StEntry{"w.weight_scale_inv", "F32", {kNrb, kNcb}, bytes(w_scales_)},
                                     StEntry{"s.gate_up_proj", "F8_E4M3", {kItems, kRows, kCols}, s_codes_},
                                     StEntry{"s.gate_up_proj_scale_inv", "F32", {kItems, kNrb, kNcb}, bytes(s_scales_)}});
    auto ck = Checkpoint::open(dir_.str());
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    ck_ = std::move(*ck);
  }

  // Element (r, c) of matrix `item`: torch's value of its byte times its own block's scale.
  float want(int64_t item, int64_t r, int64_t c, bool stacked) const {
    const auto& codes = stacked ? s_codes_ : w_codes_;
    const auto& scales = stacked ? s_scales_ : w_scales_;
    const double v = torch_[codes[static_cast<size_t>((item * kRows + r) * kCols + c)]];
    return static_cast<float>(v) * scales[static_cast<size_t>((item * kNrb + r / kBr) * kNcb + c / kBc)];
  }
  static float got(const OwnedTensor& t, int64_t r, int64_t c) {
    EXPECT_EQ(t.tensor.dtype, DType::f32);
    return reinterpret_cast<const float*>(t.tensor.data)[r * t.tensor.shape[1] + c];
  }

  TempDir dir_{"fp8_slices"};
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend({.n_threads = 1});
  std::vector<double> torch_ = torch_e4m3();
  std::vector<uint8_t> w_codes_, s_codes_;
  std::vector<float> w_scales_, s_scales_;
};

TEST_F(Fp8Slices, WholeMatrixAndRowColumnSlices) {
  WeightLoader w(*ck_, *backend_, std::nullopt);  // auto: fp8 dequantizes to f32
  auto whole = w.matrix("w.weight", kRows, kCols);
  ASSERT_TRUE(whole.has_value()) << whole.status().to_string();
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(got(*whole, r, c), want(0, r, c, false)) << r << "," << c;
  auto part = w.matrix("w.weight", kRows, kCols, {3, 19}, {8, 21});  // starts and ends inside blocks
  ASSERT_TRUE(part.has_value()) << part.status().to_string();
  for (int64_t r = 0; r < 19; ++r)
    for (int64_t c = 0; c < 21; ++c) ASSERT_EQ(got(*part, r, c), want(0, 3 + r, 8 + c, false)) << r << "," << c;
}

TEST_F(Fp8Slices, FusedPartsAndRowBlocks) {
  WeightLoader w(*ck_, *backend_, std::nullopt);
  auto fused = w.fused({"w.weight", "w.weight"}, {kRows, kRows}, kCols, {{2, 5}, {10, 9}}, {6, 17});
  ASSERT_TRUE(fused.has_value()) << fused.status().to_string();
  for (int64_t r = 0; r < 14; ++r)
    for (int64_t c = 0; c < 17; ++c)
      ASSERT_EQ(got(*fused, r, c), want(0, r < 5 ? 2 + r : 10 + r - 5, 6 + c, false)) << r << "," << c;
  // Blocks of 8 rows (heads), of each rows [2, 7), heads 1 and 2, transposed: [2 * cols, 5].
  auto t = w.row_blocks("w.weight", kRows, kCols, 8, {2, 5}, /*transpose_blocks=*/true, {1, 2});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_EQ(t->tensor.shape[0], 2 * kCols);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(got(*t, b * kCols + c, r), want(0, (1 + b) * 8 + 2 + r, c, false));
}

TEST_F(Fp8Slices, StackedExpertsPickTheirItemsScales) {
  WeightLoader w(*ck_, *backend_, std::nullopt);
  auto s = w.stacked("s.gate_up_proj", kItems, kRows, kCols, {1, 2}, {{0, 4}, {13, 6}}, {7, 20});
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t r = 0; r < 10; ++r)
      for (int64_t c = 0; c < 20; ++c)
        ASSERT_EQ(got(*s, i * 10 + r, c), want(1 + i, r < 4 ? r : 13 + r - 4, 7 + c, true)) << i << "," << r << "," << c;
}

// weights: bf16 stages the dequantized values rounded once to bf16.
TEST_F(Fp8Slices, Bf16WhenAskedRoundsTheDequantizedValueOnce) {
  WeightLoader w(*ck_, *backend_, DType::bf16);
  auto m = w.matrix("w.weight", kRows, kCols, {}, {3, 20});
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  ASSERT_EQ(m->tensor.dtype, DType::bf16);
  const auto* h = reinterpret_cast<const uint16_t*>(m->tensor.data);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < 20; ++c) ASSERT_EQ(h[r * 20 + c], f32_to_bf16(want(0, r, 3 + c, false))) << r << "," << c;
}

}  // namespace
}  // namespace brigade
