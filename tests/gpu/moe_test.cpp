// The MoE ops on the GPU against the CPU backend (gpu_test_util.h for the method): routing gives
// the same experts in the same order (ties lowest index first) and the same weights (sparsemixer's
// too); the experts
// op gives the CPU's output within bf16 tolerance for decode-sized and prefill-sized batches
// (more pairs than one collection chunk), rows with and without 16-byte loads, and replays in a
// step graph with the eager result.
#include "tests/gpu/gpu_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

struct Routing {
  std::vector<float> ids, weights;
};

Routing route(Backend& b, const std::vector<float>& logits, int64_t n, int64_t n_experts, int k, bool normalize) {
  const auto l = put(b, DType::f32, {n, n_experts}, logits);
  const auto ids = empty(b, DType::i32, {n, k}), w = empty(b, DType::f32, {n, k});
  MoeRouting r;
  r.k = k;
  r.normalize = normalize;
  b.moe_route(l.tensor, r, ids.tensor, w.tensor);
  return {get(b, ids.tensor), get(b, w.tensor)};
}

TEST(GpuMoe, RouteMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(21);
  struct Case { int64_t n, n_experts; int k; };
  for (const Case c : {Case{37, 128, 8}, Case{5, 8, 2}, Case{9, 300, 5}, Case{3, 16, 16}}) {
    for (const bool normalize : {false, true}) {
      SCOPED_TRACE(testing::Message() << "E=" << c.n_experts << " k=" << c.k << " normalize=" << normalize);
      std::vector<float> logits(static_cast<size_t>(c.n * c.n_experts));
      std::uniform_real_distribution<float> u(-4, 4);
      for (float& v : logits) v = u(rng);
      const Routing rc = route(cpu(), logits, c.n, c.n_experts, c.k, normalize);
      const Routing rg = route(*gpu(), logits, c.n, c.n_experts, c.k, normalize);
      EXPECT_EQ(rg.ids, rc.ids);
      for (size_t i = 0; i < rc.weights.size(); ++i) EXPECT_NEAR(rg.weights[i], rc.weights[i], 1e-5) << i;
    }
  }
  const std::vector<float> ties = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, 2.0f, -3.0f, 1.0f};
  EXPECT_EQ(route(*gpu(), ties, 1, 8, 4, true).ids, (std::vector<float>{1, 3, 5, 2}));
}

// Phi-3.5-MoE's sparsemixer: the CPU's two experts and their masked softmaxes (tests/cpu/moe_test.cpp
// checks those against transformers), for a few token counts and thresholds, relative ids included.
TEST(GpuMoe, SparsemixerRouteMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(23);
  for (const float jitter : {0.0f, 0.01f, 0.3f}) {
    for (const int64_t n : {1, 200}) {
      SCOPED_TRACE(testing::Message() << "jitter=" << jitter << " n=" << n);
      const int64_t n_experts = 16;
      std::vector<float> logits(static_cast<size_t>(n * n_experts));
      std::uniform_real_distribution<float> u(-4, 4);
      for (float& v : logits) v = u(rng);
      Routing side[2];
      Backend* backends[2] = {&cpu(), gpu()};
      for (int s = 0; s < 2; ++s) {
        const auto l = put(*backends[s], DType::f32, {n, n_experts}, logits);
        const auto ids = empty(*backends[s], DType::i32, {n, 2}), w = empty(*backends[s], DType::f32, {n, 2});
        MoeRouting r;
        r.k = 2;
        r.scoring = MoeScoring::sparsemixer;
        r.jitter_eps = jitter;
        r.first_expert = 4;
        backends[s]->moe_route(l.tensor, r, ids.tensor, w.tensor);
        side[s] = {get(*backends[s], ids.tensor), get(*backends[s], w.tensor)};
      }
      EXPECT_EQ(side[1].ids, side[0].ids);
      for (size_t i = 0; i < side[0].weights.size(); ++i) EXPECT_NEAR(side[1].weights[i], side[0].weights[i], 1e-6) << i;
    }
  }
}

struct ExpertCase {
  int64_t n, d, inter, n_experts;
  int k;
};

// out on `b` for the given inputs; graph_key > 0 runs the op three times inside step graphs.
// gpt-oss's biases and clamp (MoeExpertMlp) as host values; empty / 0 = none.
struct HostMlp {
  std::vector<float> gate_up_bias, down_bias;
  float limit = 0.0f, alpha = 1.0f;
  bool weight_on_input = false;  // Llama 4's
  bool gelu_tanh = false;        // Gemma 4's
};

std::vector<float> run_experts(Backend& b, const ExpertCase& c, const std::vector<float>& x, const std::vector<float>& gu,
                               const std::vector<float>& down, const Routing& r, uint64_t graph_key = 0,
                               const HostMlp& m = {}) {
  const DType act = b.activation_dtype();
  const auto xt = put(b, act, {c.n, c.d}, x);
  const auto gut = weight(b, c.n_experts * 2 * c.inter, c.d, gu);
  const auto dt = weight(b, c.n_experts * c.d, c.inter, down);
  const auto ids = put(b, DType::i32, {c.n, c.k}, r.ids), w = put(b, DType::f32, {c.n, c.k}, r.weights);
  const auto ws = empty(b, DType::u8, {static_cast<int64_t>(b.moe_workspace_bytes(c.n, c.k, c.d, c.inter))});
  const auto out = empty(b, act, {c.n, c.d});
  MoeExpertMlp mlp;
  OwnedTensor gub, db;
  if (!m.gate_up_bias.empty()) {
    gub = put(b, DType::f32, {static_cast<int64_t>(m.gate_up_bias.size())}, m.gate_up_bias);
    db = put(b, DType::f32, {static_cast<int64_t>(m.down_bias.size())}, m.down_bias);
    mlp.gate_up_bias = gub.tensor;
    mlp.down_bias = db.tensor;
  }
  mlp.swiglu_limit = m.limit;
  mlp.swiglu_alpha = m.alpha;
  mlp.weight_on_input = m.weight_on_input;
  mlp.gelu_tanh = m.gelu_tanh;
  for (int i = 0; i < (graph_key > 0 ? 3 : 1); ++i) {
    if (graph_key > 0) b.begin_step(graph_key);
    b.moe_experts(xt.tensor, gut.tensor, dt.tensor, ids.tensor, w.tensor, mlp, ws.tensor, out.tensor);
    if (graph_key > 0) b.end_step();
  }
  return get(b, out.tensor);
}

struct ExpertInputs {
  std::vector<float> x, gu, down;
  Routing routing;  // the CPU's, from random router logits
};

ExpertInputs random_inputs(std::mt19937& rng, const ExpertCase& c, bool normalize) {
  ExpertInputs in;
  in.x = random_values(rng, c.n * c.d, -2, 2);
  in.gu = random_values(rng, c.n_experts * 2 * c.inter * c.d, -0.2f, 0.2f);
  in.down = random_values(rng, c.n_experts * c.d * c.inter, -0.2f, 0.2f);
  std::vector<float> logits(static_cast<size_t>(c.n * c.n_experts));
  std::uniform_real_distribution<float> u(-3, 3);
  for (float& v : logits) v = u(rng);
  in.routing = route(cpu(), logits, c.n, c.n_experts, c.k, normalize);
  return in;
}

TEST(GpuMoe, ExpertsMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(22);
  for (const ExpertCase c : {ExpertCase{1, 256, 96, 16, 8}, ExpertCase{50, 200, 40, 8, 2},
                             ExpertCase{300, 128, 64, 32, 4}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " d=" << c.d << " I=" << c.inter << " E=" << c.n_experts);
    const ExpertInputs in = random_inputs(rng, c, true);
    const auto want = run_experts(cpu(), c, in.x, in.gu, in.down, in.routing);
    EXPECT_LT(rel_error(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing), want), kBf16Tol);
  }
}

// gpt-oss's experts: gate|up and down biases and the clamped SwiGLU, decode- and prefill-sized.
TEST(GpuMoe, ExpertBiasesAndClampedSwiGluMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(25);
  for (const ExpertCase c : {ExpertCase{1, 256, 96, 32, 4}, ExpertCase{200, 128, 64, 8, 4}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n);
    const ExpertInputs in = random_inputs(rng, c, true);
    HostMlp m;
    m.gate_up_bias = random_values(rng, c.n_experts * 2 * c.inter, -0.5f, 0.5f);
    m.down_bias = random_values(rng, c.n_experts * c.d, -0.5f, 0.5f);
    m.limit = 0.7f;
    m.alpha = 1.702f;
    const auto want = run_experts(cpu(), c, in.x, in.gu, in.down, in.routing, 0, m);
    EXPECT_LT(rel_error(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0, m), want), kBf16Tol);
    EXPECT_EQ(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0x6f7373, m),
              run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0, m));
  }
}

// Llama 4's experts: the routing weight on the expert's input (top 1 and 2), decode- and
// prefill-sized, and replayed in a step graph.
TEST(GpuMoe, WeightOnTheInputMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(27);
  for (const ExpertCase c : {ExpertCase{1, 256, 96, 16, 1}, ExpertCase{200, 128, 64, 8, 2}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " k=" << c.k);
    const ExpertInputs in = random_inputs(rng, c, false);
    HostMlp m;
    m.weight_on_input = true;
    const auto want = run_experts(cpu(), c, in.x, in.gu, in.down, in.routing, 0, m);
    EXPECT_LT(rel_error(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0, m), want), kBf16Tol);
    EXPECT_GT(rel_error(run_experts(cpu(), c, in.x, in.gu, in.down, in.routing), want), 10 * kBf16Tol)
        << "weighting the input is not weighting the output";
    EXPECT_EQ(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0x4c34, m),
              run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0, m));
  }
}

// Gemma 4's experts (gelu_pytorch_tanh gate) and its per-expert scale in the routing,
// decode- and prefill-sized, and replayed in a step graph.
TEST(GpuMoe, GeluTanhExpertsAndExpertScaleMatchCpu) {
  BRIGADE_REQUIRE_GPU();
  ASSERT_TRUE(gpu()->supports_gelu_experts());
  std::mt19937 rng(29);
  for (const ExpertCase c : {ExpertCase{1, 256, 96, 16, 2}, ExpertCase{200, 128, 64, 8, 4}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " k=" << c.k);
    const ExpertInputs in = random_inputs(rng, c, true);
    HostMlp m;
    m.gelu_tanh = true;
    const auto want = run_experts(cpu(), c, in.x, in.gu, in.down, in.routing, 0, m);
    EXPECT_LT(rel_error(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0, m), want), kBf16Tol);
    EXPECT_GT(rel_error(run_experts(cpu(), c, in.x, in.gu, in.down, in.routing), want), 10 * kBf16Tol)
        << "gelu_tanh is not silu";
    EXPECT_EQ(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0x67346d, m),
              run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, 0, m));
    std::vector<float> logits(static_cast<size_t>(c.n * c.n_experts)), scale(static_cast<size_t>(c.n_experts));
    std::uniform_real_distribution<float> u(-3, 3), s(0.5f, 1.5f);
    for (float& v : logits) v = u(rng);
    for (float& v : scale) v = s(rng);
    Routing side[2];
    Backend* backends[2] = {&cpu(), gpu()};
    for (int b = 0; b < 2; ++b) {
      const auto l = put(*backends[b], DType::f32, {c.n, c.n_experts}, logits);
      const auto st = put(*backends[b], DType::f32, {c.n_experts}, scale);
      const auto ids = empty(*backends[b], DType::i32, {c.n, c.k}), w = empty(*backends[b], DType::f32, {c.n, c.k});
      MoeRouting r;
      r.k = c.k;
      r.normalize = true;
      r.expert_scale = st.tensor;
      backends[b]->moe_route(l.tensor, r, ids.tensor, w.tensor);
      side[b] = {get(*backends[b], ids.tensor), get(*backends[b], w.tensor)};
    }
    EXPECT_EQ(side[1].ids, side[0].ids);
    for (size_t i = 0; i < side[0].weights.size(); ++i) EXPECT_NEAR(side[1].weights[i], side[0].weights[i], 1e-5) << i;
  }
}

TEST(GpuMoe, ExpertsReplayInAStepGraph) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(23);
  const ExpertCase c{4, 128, 64, 16, 4};
  const ExpertInputs in = random_inputs(rng, c, false);
  const auto eager = run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing);
  const int64_t replays = gpu()->graph_stats().replays;
  EXPECT_EQ(run_experts(*gpu(), c, in.x, in.gu, in.down, in.routing, /*graph_key=*/0x4d6f45), eager);
  EXPECT_GT(gpu()->graph_stats().replays, replays);
}

// Expert parallelism: routing with first_expert gives the CPU's relative ids, and the experts op
// over the upper half of the experts (ids of the lower half negative, skipped) the CPU's output.
TEST(GpuMoe, AnExpertParallelSliceMatchesCpu) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(24);
  for (const ExpertCase whole : {ExpertCase{3, 128, 64, 16, 4}, ExpertCase{120, 128, 64, 16, 4}}) {
    SCOPED_TRACE(testing::Message() << "n=" << whole.n);
    std::vector<float> logits(static_cast<size_t>(whole.n * whole.n_experts));
    std::uniform_real_distribution<float> u(-3, 3);
    for (float& v : logits) v = u(rng);
    auto route_from = [&](Backend& b, int first) {
      const auto l = put(b, DType::f32, {whole.n, whole.n_experts}, logits);
      const auto ids = empty(b, DType::i32, {whole.n, whole.k}), w = empty(b, DType::f32, {whole.n, whole.k});
      MoeRouting r;
      r.k = whole.k;
      r.normalize = true;
      r.first_expert = first;
      b.moe_route(l.tensor, r, ids.tensor, w.tensor);
      return Routing{get(b, ids.tensor), get(b, w.tensor)};
    };
    const int first = static_cast<int>(whole.n_experts / 2);
    const Routing rc = route_from(cpu(), first);
    const Routing rg = route_from(*gpu(), first);
    EXPECT_EQ(rg.ids, rc.ids);
    ASSERT_TRUE(std::any_of(rc.ids.begin(), rc.ids.end(), [](float id) { return id < 0; }));
    const ExpertCase half{whole.n, whole.d, whole.inter, whole.n_experts / 2, whole.k};
    const auto x = random_values(rng, half.n * half.d, -2, 2);
    const auto gu = random_values(rng, half.n_experts * 2 * half.inter * half.d, -0.2f, 0.2f);
    const auto down = random_values(rng, half.n_experts * half.d * half.inter, -0.2f, 0.2f);
    const auto want = run_experts(cpu(), half, x, gu, down, rc);
    EXPECT_LT(rel_error(run_experts(*gpu(), half, x, gu, down, rc), want), kBf16Tol);
  }
}

}  // namespace
}  // namespace brigade
