// Backend::moe_identity_experts (LongCat-Flash's zero-computation experts, models/longcat_flash.h)
// on the GPU against the CPU backend: the routed ids at or past E add their weights' share of the
// MoE input to out, decode-sized and prefill-sized, eagerly and replayed in a step graph; tokens
// with no such id keep out as it was.
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

// out after moe_identity_experts on `b` (graph_key > 0: recorded then replayed twice in step graphs,
// out reset before each run).
std::vector<float> run_identity(Backend& b, int64_t n, int64_t d, int k, int n_experts, const std::vector<float>& x,
                                const std::vector<float>& out0, const std::vector<float>& ids,
                                const std::vector<float>& weights, uint64_t graph_key) {
  const DType act = b.activation_dtype();
  const auto xt = put(b, act, {n, d}, x);
  const auto idt = put(b, DType::i32, {n, k}, ids), wt = put(b, DType::f32, {n, k}, weights);
  const auto init = put(b, act, {n, d}, out0);
  const auto out = empty(b, act, {n, d});
  for (int i = 0; i < (graph_key > 0 ? 3 : 1); ++i) {
    b.copy(out.tensor, init.tensor);
    if (graph_key > 0) b.begin_step(graph_key);
    b.moe_identity_experts(xt.tensor, idt.tensor, wt.tensor, n_experts, out.tensor);
    if (graph_key > 0) b.end_step();
  }
  return get(b, out.tensor);
}

TEST(GpuMoe, IdentityExpertsMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(31);
  struct Case { int64_t n, d; int k, n_experts, n_zero; };
  for (const Case c : {Case{3, 64, 3, 8, 4}, Case{200, 96, 12, 512, 256}, Case{17, 40, 2, 6, 6}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " E=" << c.n_experts << " Z=" << c.n_zero);
    const auto x = random_values(rng, c.n * c.d, -2, 2), out0 = random_values(rng, c.n * c.d, -1, 1);
    std::vector<float> ids(static_cast<size_t>(c.n * c.k)), weights = random_values(rng, c.n * c.k, 0, 1);
    std::uniform_int_distribution<int> pick(0, c.n_experts + c.n_zero - 1);
    for (float& id : ids) id = static_cast<float>(pick(rng));
    for (int j = 0; j < c.k; ++j) ids[static_cast<size_t>(j)] = 0;  // token 0 takes no zero expert
    const auto want = run_identity(cpu(), c.n, c.d, c.k, c.n_experts, x, out0, ids, weights, 0);
    for (int64_t i = 0; i < c.d; ++i) EXPECT_EQ(want[static_cast<size_t>(i)], out0[static_cast<size_t>(i)]);
    EXPECT_GT(rel_error(want, out0), 0.1) << "zero experts moved the other rows";
    for (const uint64_t key : {uint64_t{0}, uint64_t{77}})
      EXPECT_LT(rel_error(run_identity(*gpu(), c.n, c.d, c.k, c.n_experts, x, out0, ids, weights, key), want), kBf16Tol)
          << "graph " << key;
  }
}

}  // namespace
}  // namespace brigade
