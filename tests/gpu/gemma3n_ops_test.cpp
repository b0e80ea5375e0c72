// The CUDA Gemma 3n ops (gpu/gemma3n.cu) against the CPU backend's (cpu/gemma3n_ops.cpp) on the
// same bf16-rounded random inputs: AltUp's prediction and correction over 4 streams, the RMS
// match, the gaussian top-k on the gate half of a gate|up row, the weightless v norm and the
// gated per-layer input. Outputs within bf16 tolerance.
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

OwnedTensor act(Backend& b, std::initializer_list<int64_t> dims, const std::vector<float>& v) {
  return put(b, b.activation_dtype(), dims, v);
}

TEST(GpuGemma3n, OpsMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(53);
  constexpr int64_t kStreams = 4, n = 7, d = 300;
  const auto streams = random_values(rng, kStreams * n * d, -2, 2), router = random_values(rng, n * kStreams, -3, 3);
  const auto pred_coefs = random_values(rng, kStreams * kStreams * kStreams), corr = random_values(rng, kStreams * kStreams);
  const auto activated = random_values(rng, n * d, -2, 2);
  for (Backend* b : {&cpu(), static_cast<Backend*>(gpu())}) ASSERT_TRUE(b->supports_altup());
  auto run = [&](Backend& b) {
    const auto s = act(b, {kStreams, n, d}, streams), r = act(b, {n, kStreams}, router), a = act(b, {n, d}, activated);
    const auto pc = put(b, DType::f32, {kStreams * kStreams, kStreams}, pred_coefs);
    const auto cc = put(b, DType::f32, {kStreams, kStreams}, corr);
    const auto out = empty(b, b.activation_dtype(), {kStreams, n, d});
    b.altup_predict(s.tensor, r.tensor, pc.tensor, out.tensor);
    std::vector<std::vector<float>> got{get(b, out.tensor)};
    b.altup_correct(out.tensor, a.tensor, r.tensor, cc.tensor, 1);
    got.push_back(get(b, out.tensor));
    const Tensor x = out.tensor.rows(0, 1).reshaped({n, d}), ref = s.tensor.rows(1, 1).reshaped({n, d});
    b.match_rms(x, ref, 1e-5f);
    got.push_back(get(b, x));
    b.gaussian_topk(a.tensor, d / 2, 1.6448536f);
    got.push_back(get(b, a.tensor));
    const QkvLayout l{4, 2, 50};  // rows [n, 400]: v heads at columns 300..399
    const auto qkv = act(b, {n, 400}, std::vector<float>(streams.begin(), streams.begin() + n * 400));
    b.v_head_norm(qkv.tensor, l, 1e-6f);
    got.push_back(get(b, qkv.tensor));
    const auto m = act(b, {n, d}, activated);
    b.gelu_tanh_gate(m.tensor, ref);
    got.push_back(get(b, m.tensor));
    return got;
  };
  const auto want = run(cpu()), got = run(*gpu());
  const char* names[] = {"altup_predict", "altup_correct", "match_rms", "gaussian_topk", "v_head_norm", "gelu_tanh_gate"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(rel_error(got[i], want[i]), kBf16Tol) << names[i];
  // The top-k zeroes the same share of the gate half (about 95% of normal-ish values; the rows'
  // edges may differ by a value at the cutoff).
  int zeros_cpu = 0, zeros_gpu = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < d / 2; ++k) {
      zeros_cpu += want[3][static_cast<size_t>(t * d + k)] == 0.0f;
      zeros_gpu += got[3][static_cast<size_t>(t * d + k)] == 0.0f;
    }
  EXPECT_NEAR(zeros_gpu, zeros_cpu, n);
  EXPECT_GT(zeros_cpu, n * d / 2 * 8 / 10);
}

}  // namespace
}  // namespace brigade
