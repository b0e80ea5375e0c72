// fp8 weights on the GPU (core/backend.h "fp8 weights"): the quantization at load rounds as the
// host E4M3 conversion does; the fp8 matmul equals the host's f64 product of the same quantized
// values (weights as stored, activations quantized on the host with the documented scale) within
// bf16 output rounding, and the unquantized f32 product within fp8's own error; graph replays of
// fp8 matmuls give the eager results.
#include <cfloat>

#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

// E4M3 keeps 3 mantissa bits: each operand rounds by up to 2^-4 relative (rms about 2.6% for
// values spread over a binade), so a dot product of independently rounded terms is off by about
// 3.6% rms of its size (simulated for uniform operands, k = 512 and 2048). 6% leaves room for
// the distribution's tail and the bf16 output rounding, and still fails on any wrong scale.
constexpr double kFp8Tol = 6e-2;

OwnedTensor fp8_weight(int64_t rows, int64_t cols, const std::vector<float>& values) {
  Tensor host(const_cast<float*>(values.data()), DType::f32, {rows, cols});
  auto w = gpu()->prepare_weight(host, DType::f8e4m3);
  EXPECT_TRUE(w.has_value()) << w.status().to_string();
  return std::move(*w);
}

// The weight as the GPU stores it: its codes decoded, and its scale.
struct Stored {
  std::vector<float> values;  // e4m3 codes decoded (multiply by scale for the weight)
  float scale = 0.0f;
};
Stored stored(const Tensor& w) {
  Stored s;
  gpu()->synchronize();
  std::vector<uint8_t> codes(w.nbytes());
  gpu()->download(codes.data(), w);
  for (uint8_t c : codes) s.values.push_back(e4m3_to_f32(c));
  const Tensor scale(static_cast<uint8_t*>(w.data) + fp8_scale_offset(w), DType::f32, {1});
  gpu()->download(&s.scale, scale);
  return s;
}

// The dynamic per-tensor quantization the GPU applies (kernels.h launch_quantize_e4m3).
float fp8_scale(const std::vector<float>& v) {
  float amax = 0.0f;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  return std::max(amax / kE4m3Max, FLT_MIN);
}
Stored quantize(const std::vector<float>& v) {
  Stored s;
  s.scale = fp8_scale(v);
  for (float x : v) s.values.push_back(e4m3_to_f32(f32_to_e4m3(x / s.scale)));
  return s;
}

// out [n, m] = x [n, k] · w [m, k]ᵀ (+ bias) in f64, x and w given as values times scale.
std::vector<float> product(const Stored& x, const Stored& w, const std::vector<float>& bias, int64_t n, int64_t m,
                           int64_t k) {
  std::vector<float> out(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0.0;
      for (int64_t t = 0; t < k; ++t)
        acc += static_cast<double>(x.values[static_cast<size_t>(i * k + t)]) * w.values[static_cast<size_t>(j * k + t)];
      acc *= static_cast<double>(x.scale) * w.scale;
      out[static_cast<size_t>(i * m + j)] = static_cast<float>(acc + (bias.empty() ? 0.0 : bias[static_cast<size_t>(j)]));
    }
  return out;
}

TEST(GpuFp8, WeightQuantizationRoundsAsTheHost) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (const float range : {1.0f, 1e-3f, 300.0f}) {  // the scale, not the range, decides the codes
    SCOPED_TRACE(range);
    std::vector<float> w = random_values(rng, 96 * 64, -range, range);
    w[17] = 0.0f;
    const OwnedTensor g = fp8_weight(96, 64, w);
    EXPECT_EQ(g.tensor.dtype, DType::f8e4m3);
    EXPECT_EQ(g.tensor.nbytes(), size_t{96 * 64});
    const Stored got = stored(g.tensor), want = quantize(w);
    EXPECT_EQ(got.scale, want.scale);
    ASSERT_EQ(got.values.size(), want.values.size());
    int64_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i) differ += got.values[i] != want.values[i];
    EXPECT_EQ(differ, 0) << "codes differ from f32_to_e4m3(w / scale)";
  }
  // An all-zero weight gets the smallest scale and zero codes (no division by zero).
  const OwnedTensor z = fp8_weight(16, 32, std::vector<float>(16 * 32, 0.0f));
  const Stored zs = stored(z.tensor);
  EXPECT_EQ(zs.scale, FLT_MIN);
  for (float v : zs.values) ASSERT_EQ(v, 0.0f);
}

TEST(GpuFp8, UnsupportedWeightsAreRefused) {
  BRIGADE_REQUIRE_GPU();
  EXPECT_TRUE(gpu()->supports_weight_dtype(DType::f8e4m3));  // the backend starts on sm_90+ only
  std::vector<float> w(8 * 24, 0.5f);
  auto odd = gpu()->prepare_weight(Tensor(w.data(), DType::f32, {8, 24}), DType::f8e4m3);
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.status().code(), StatusCode::unsupported);
  EXPECT_NE(odd.status().message().find("multiple of 16"), std::string::npos) << odd.status().message();
  std::vector<int32_t> ids(16, 1);
  auto ints = gpu()->prepare_weight(Tensor(ids.data(), DType::i32, {1, 16}), DType::f8e4m3);
  EXPECT_FALSE(ints.has_value());
}

struct Fp8Case {
  int64_t n, k, m;
  bool bias;
  DType bias_t;
  DType out;
};

TEST(GpuFp8, MatmulMatchesTheQuantizedAndTheExactProduct) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (const Fp8Case c : {Fp8Case{1, 256, 384, false, DType::f32, DType::bf16},
                          Fp8Case{7, 512, 200, true, DType::f32, DType::bf16},
                          Fp8Case{33, 1024, 96, true, DType::bf16, DType::bf16},
                          Fp8Case{64, 256, 1000, false, DType::f32, DType::f32},
                          Fp8Case{300, 128, 256, true, DType::f32, DType::f32}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " k=" << c.k << " m=" << c.m << " bias=" << c.bias
                                    << " out=" << dtype_name(c.out));
    const auto x = random_values(rng, c.n * c.k, -2.0f, 2.0f), w = random_values(rng, c.m * c.k, -0.1f, 0.1f);
    const auto bias = c.bias ? random_values(rng, c.m) : std::vector<float>();
    const OwnedTensor wg = fp8_weight(c.m, c.k, w);
    const auto xg = put(*gpu(), DType::bf16, {c.n, c.k}, x);
    const auto bg = c.bias ? put(*gpu(), c.bias_t, {c.m}, bias) : OwnedTensor{};
    const auto og = empty(*gpu(), c.out, {c.n, c.m});
    gpu()->matmul(xg.tensor, wg.tensor, bg.tensor, og.tensor);
    const std::vector<float> got = get(*gpu(), og.tensor);
    // x holds bf16 values, so quantizing them on the host sees what the GPU's kernel sees.
    const std::vector<float> quantized = product(quantize(x), stored(wg.tensor), bias, c.n, c.m, c.k);
    EXPECT_LT(rel_error(got, quantized), c.out == DType::f32 ? 2e-3 : kBf16Tol);
    const std::vector<float> exact = product(Stored{x, 1.0f}, Stored{w, 1.0f}, bias, c.n, c.m, c.k);
    EXPECT_LT(rel_error(got, exact), kFp8Tol);
  }
}

// Two chained fp8 matmuls (the second quantizes the first's output) as one step: the first step
// of the key runs eagerly, the second captures, the rest replay; every one equals the same ops
// run outside a step on the same inputs, bit for bit (same kernels, same cuBLASLt algorithms).
TEST(GpuFp8, GraphReplaysEqualEagerMatmuls) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(9);
  const int64_t n = 8, k = 256, h = 512, m = 128;
  const OwnedTensor w1 = fp8_weight(h, k, random_values(rng, h * k, -0.1f, 0.1f));
  const OwnedTensor w2 = fp8_weight(m, h, random_values(rng, m * h, -0.1f, 0.1f));
  const auto x = empty(*gpu(), DType::bf16, {n, k}), y = empty(*gpu(), DType::bf16, {n, h});
  const auto z = empty(*gpu(), DType::bf16, {n, m});
  const auto bias = put(*gpu(), DType::f32, {m}, random_values(rng, m));
  auto run = [&](const std::vector<float>& input, bool as_step) {
    std::vector<uint16_t> host(input.size());
    for (size_t i = 0; i < input.size(); ++i) host[i] = f32_to_bf16(input[i]);
    if (as_step) gpu()->begin_step(42);
    gpu()->upload(x.tensor, host.data());
    gpu()->matmul(x.tensor, w1.tensor, Tensor(), y.tensor);
    gpu()->matmul(y.tensor, w2.tensor, bias.tensor, z.tensor);
    if (as_step) gpu()->end_step();
    return get(*gpu(), z.tensor);
  };
  const CudaGraphStats before = gpu()->graph_stats();
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(step);
    // Inputs of different ranges: the dynamic activation scale changes from step to step.
    const auto input = random_values(rng, n * k, -1.0f - step, 1.0f + step);
    const std::vector<float> eager = run(input, false);
    const std::vector<float> stepped = run(input, true);
    ASSERT_EQ(stepped, eager);
  }
  const CudaGraphStats after = gpu()->graph_stats();
  EXPECT_EQ(after.captures - before.captures, 1);
  EXPECT_EQ(after.replays - before.replays, 4);  // the capturing step counts as a replay
}

}  // namespace
}  // namespace brigade
