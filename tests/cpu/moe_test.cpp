// The MoE ops against plain references: moe_route against softmax + a sort in double (ties, the
// normalisation on and off, k = E) and against transformers' sparsemixer, moe_experts against a loop over each token's k experts in
// double, at every SIMD level, with f32 and bf16 weights, below and above the BLAS row count;
// moe_experts_split over block-quantized experts against moe_experts over them dequantized.
#include <algorithm>
#include <utility>
#include <cmath>
#include <cstring>
#include <numeric>

#include "cpu/ops.h"
#include "tests/cpu/cpu_test_util.h"

namespace brigade {
namespace {

using test::backend_at;
using test::get;
using test::make;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(Backend& b, const std::vector<float>& logits, int64_t n, int64_t n_experts, int k, bool normalize) {
  auto l = make(b, DType::f32, {n, n_experts});
  std::copy(logits.begin(), logits.end(), l.tensor.as<float>());
  auto ids = make(b, DType::i32, {n, k});
  auto w = make(b, DType::f32, {n, k});
  MoeRouting r;
  r.k = k;
  r.normalize = normalize;
  b.moe_route(l.tensor, r, ids.tensor, w.tensor);
  return {{ids.tensor.as<int32_t>(), ids.tensor.as<int32_t>() + n * k}, {w.tensor.as<float>(), w.tensor.as<float>() + n * k}};
}

TEST(CpuMoe, RouteIsSoftmaxTopKInDescendingOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const int64_t n = 13, n_experts = 16;
  std::vector<float> logits(static_cast<size_t>(n * n_experts));
  for (float& v : logits) v = u(rng);
  auto b = make_cpu_backend({2});
  for (const bool normalize : {false, true}) {
    for (const int k : {1, 2, 5, 16}) {
      SCOPED_TRACE(testing::Message() << "k=" << k << " normalize=" << normalize);
      const Routed r = route(*b, logits, n, n_experts, k, normalize);
      for (int64_t t = 0; t < n; ++t) {
        const float* l = logits.data() + t * n_experts;
        std::vector<double> p(static_cast<size_t>(n_experts));
        const double mx = *std::max_element(l, l + n_experts);
        for (int64_t e = 0; e < n_experts; ++e) p[static_cast<size_t>(e)] = std::exp(l[e] - mx);
        const double sum = std::accumulate(p.begin(), p.end(), 0.0);
        std::vector<int32_t> order(static_cast<size_t>(n_experts));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t z) { return l[a] > l[z]; });
        double top = 0.0;
        for (int j = 0; j < k; ++j) top += p[static_cast<size_t>(order[static_cast<size_t>(j)])] / sum;
        for (int j = 0; j < k; ++j) {
          const size_t at = static_cast<size_t>(t * k + j);
          const int32_t e = order[static_cast<size_t>(j)];
          EXPECT_EQ(r.ids[at], e) << "token " << t << " slot " << j;
          const double want = p[static_cast<size_t>(e)] / sum / (normalize ? top : 1.0);
          EXPECT_NEAR(r.weights[at], want, 1e-6);
        }
      }
      if (k == n_experts) {  // every expert: the weights are the whole softmax and sum to 1
        const float s = std::accumulate(r.weights.begin(), r.weights.begin() + k, 0.0f);
        EXPECT_NEAR(s, 1.0f, 1e-5f);
      }
    }
  }
}

// DeepSeek's rules against a direct transcription of transformers' routers in double:
// DeepseekV3TopkRouter (sigmoid, bias for the choice only, groups by their top-2 sum, -inf
// masking, renormalised, scaled) and DeepseekV2TopkRouter group_limited_greedy (softmax, groups
// by their max, 0 masking). The bias is large enough to change the choice against plain top-k.
// select_on_logits: Kolibri1TopKRouter's choice, topk(logits + bias), weighted by the sigmoid.
struct DeepseekCase {
  MoeScoring scoring;
  MoeGroupScore group_score;
  int n_group, topk_group, k;
  bool normalize;
  float scale;
  bool select_on_logits = false;
};

std::pair<std::vector<int32_t>, std::vector<double>> deepseek_reference(const float* l, const float* bias, int64_t e,
                                                                        const DeepseekCase& c) {
  std::vector<double> s(static_cast<size_t>(e)), choice(static_cast<size_t>(e));
  const double mx = *std::max_element(l, l + e);
  double sum = 0.0;
  for (int64_t i = 0; i < e; ++i) sum += std::exp(l[i] - mx);
  for (int64_t i = 0; i < e; ++i) {
    const size_t u = static_cast<size_t>(i);
    s[u] = c.scoring == MoeScoring::sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(l[i]))) : std::exp(l[i] - mx) / sum;
    choice[u] = (c.select_on_logits ? static_cast<double>(l[i]) : s[u]) + (bias != nullptr ? bias[i] : 0.0);
  }
  const int64_t size = e / c.n_group;
  std::vector<double> group(static_cast<size_t>(c.n_group));
  for (int g = 0; g < c.n_group; ++g) {
    std::vector<double> part(choice.begin() + g * size, choice.begin() + (g + 1) * size);
    std::sort(part.rbegin(), part.rend());
    group[static_cast<size_t>(g)] = c.group_score == MoeGroupScore::max ? part[0] : part[0] + part[1];
  }
  std::vector<int32_t> groups(static_cast<size_t>(c.n_group));
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](int32_t a, int32_t z) { return group[static_cast<size_t>(a)] > group[static_cast<size_t>(z)]; });
  for (int j = c.topk_group; j < c.n_group; ++j)
    for (int64_t i = groups[static_cast<size_t>(j)] * size; i < (groups[static_cast<size_t>(j)] + 1) * size; ++i)
      choice[static_cast<size_t>(i)] = -INFINITY;
  std::vector<int32_t> order(static_cast<size_t>(e));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t z) { return choice[static_cast<size_t>(a)] > choice[static_cast<size_t>(z)]; });
  order.resize(static_cast<size_t>(c.k));
  double top = 0.0;
  for (int32_t i : order) top += s[static_cast<size_t>(i)];
  std::vector<double> w;
  for (int32_t i : order) w.push_back(s[static_cast<size_t>(i)] / (c.normalize ? top : 1.0) * c.scale);
  return {order, w};
}

TEST(CpuMoe, DeepseekRoutingMatchesTransformersRules) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const int64_t n = 17, e = 16;
  std::vector<float> logits(static_cast<size_t>(n * e)), bias(static_cast<size_t>(e));
  for (float& v : logits) v = u(rng);
  for (float& v : bias) v = 0.2f * u(rng);
  auto b = make_cpu_backend({2});
  auto bias_t = make(*b, DType::f32, {e});
  std::copy(bias.begin(), bias.end(), bias_t.tensor.as<float>());
  const DeepseekCase cases[] = {
      {MoeScoring::sigmoid, MoeGroupScore::top2_sum, 4, 2, 3, true, 2.5f},   // V3
      {MoeScoring::sigmoid, MoeGroupScore::top2_sum, 8, 3, 2, false, 1.0f},
      {MoeScoring::softmax, MoeGroupScore::max, 4, 1, 2, false, 1.5f},      // V2 group_limited_greedy
      {MoeScoring::sigmoid, MoeGroupScore::none, 1, 1, 4, true, 1.0f},      // no groups
      {MoeScoring::sigmoid, MoeGroupScore::none, 1, 1, 3, false, 1.0f, true},  // Kolibri-1
      {MoeScoring::sigmoid, MoeGroupScore::top2_sum, 4, 2, 3, true, 1.0f, true},
  };
  int changed_by_bias = 0;
  for (const DeepseekCase& c : cases) {
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE(testing::Message() << "groups " << c.n_group << "/" << c.topk_group << " k " << c.k << " bias " << with_bias);
      MoeRouting r;
      r.k = c.k;
      r.scoring = c.scoring;
      r.normalize = c.normalize;
      r.n_group = c.n_group;
      r.topk_group = c.topk_group;
      r.group_score = c.group_score;
      r.scale = c.scale;
      r.select_on_logits = c.select_on_logits;
      if (with_bias) r.bias = bias_t.tensor;
      auto l = make(*b, DType::f32, {n, e});
      std::copy(logits.begin(), logits.end(), l.tensor.as<float>());
      auto ids = make(*b, DType::i32, {n, c.k});
      auto w = make(*b, DType::f32, {n, c.k});
      b->moe_route(l.tensor, r, ids.tensor, w.tensor);
      for (int64_t t = 0; t < n; ++t) {
        const auto [want_ids, want_w] = deepseek_reference(logits.data() + t * e, with_bias ? bias.data() : nullptr, e, c);
        const auto [plain_ids, plain_w] = deepseek_reference(logits.data() + t * e, nullptr, e, c);
        changed_by_bias += with_bias && want_ids != plain_ids;
        for (int j = 0; j < c.k; ++j) {
          EXPECT_EQ(ids.tensor.as<int32_t>()[t * c.k + j], want_ids[static_cast<size_t>(j)]) << "token " << t;
          EXPECT_NEAR(w.tensor.as<float>()[t * c.k + j], want_w[static_cast<size_t>(j)], 1e-5) << "token " << t;
        }
      }
    }
  }
  EXPECT_GT(changed_by_bias, 0) << "the bias changes some choices, so the test sees it";
}

// Equal probabilities are taken lowest index first (torch.topk), and the order of the chosen
// ones is by probability, not by index.
TEST(CpuMoe, RouteTiesTakeTheLowestIndex) {
  auto b = make_cpu_backend({1});
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, 2.0f, -3.0f, 1.0f};
  const Routed r = route(*b, logits, 1, 8, 4, true);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 5, 2}));
  EXPECT_NEAR(r.weights[0], r.weights[1], 1e-7);
  EXPECT_NEAR(std::accumulate(r.weights.begin(), r.weights.end(), 0.0f), 1.0f, 1e-6f);
  const Routed all_equal = route(*b, std::vector<float>(8, 0.25f), 1, 8, 3, false);
  EXPECT_EQ(all_equal.ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(all_equal.weights[2], 0.125f, 1e-7f);
}

Routed route_sparsemixer(Backend& b, const std::vector<float>& logits, int64_t n, int64_t n_experts, float jitter) {
  auto l = make(b, DType::f32, {n, n_experts});
  std::copy(logits.begin(), logits.end(), l.tensor.as<float>());
  auto ids = make(b, DType::i32, {n, 2});
  auto w = make(b, DType::f32, {n, 2});
  MoeRouting r;
  r.k = 2;
  r.scoring = MoeScoring::sparsemixer;
  r.jitter_eps = jitter;
  b.moe_route(l.tensor, r, ids.tensor, w.tensor);
  return {{ids.tensor.as<int32_t>(), ids.tensor.as<int32_t>() + n * 2}, {w.tensor.as<float>(), w.tensor.as<float>() + n * 2}};
}

// transformers' sparsemixer in eval, transcribed: each mask in f32 as torch computes it (the
// second one's factor from the unmasked scores against the second maximum), the softmaxes in
// double. Returns the two experts and weights, and counts the experts each mask drops / keeps
// (the first expert, out of the second softmax, not counted).
struct SparsemixerRef {
  int32_t id[2];
  double w[2];
};
SparsemixerRef sparsemixer_ref(const float* l, int64_t n_experts, float jitter, int& masked, int& kept) {
  SparsemixerRef r{};
  int64_t first = -1;
  for (int j = 0; j < 2; ++j) {
    int64_t m = -1;  // torch.max's argmax: the first of equal maxima
    for (int64_t i = 0; i < n_experts; ++i)
      if (i != first && (m < 0 || l[i] > l[m])) m = i;
    double sum = 0.0;
    for (int64_t i = 0; i < n_experts; ++i) {
      if (i == first) continue;
      const float factor = std::max(std::fabs(l[i]), l[m]);
      const bool drop = (l[m] - l[i]) / factor > 2 * jitter;
      (drop ? masked : kept) += 1;
      if (!drop) sum += std::exp(static_cast<double>(l[i]) - l[m]);
    }
    r.id[j] = static_cast<int32_t>(m);
    r.w[j] = 1.0 / sum;
    first = m;
  }
  return r;
}

// Phi-3.5-MoE's sparsemixer (eval): the argmax with the softmax over the logits its jitter mask
// keeps, then the argmax of the rest with its own mask's softmax; random logits where the masks
// drop some experts and keep others, and two rows worked by hand (a negative maximum, where the
// factor is |s|).
TEST(CpuMoe, SparsemixerMatchesTransformersEvalRouter) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const int64_t n = 29, n_experts = 16;
  const float jitter = 0.2f;
  std::vector<float> logits(static_cast<size_t>(n * n_experts));
  for (float& v : logits) v = u(rng);
  auto b = make_cpu_backend({2});
  const Routed r = route_sparsemixer(*b, logits, n, n_experts, jitter);
  int masked = 0, kept = 0, second_differs = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.data() + t * n_experts;
    const SparsemixerRef want = sparsemixer_ref(l, n_experts, jitter, masked, kept);
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(r.ids[static_cast<size_t>(t * 2 + j)], want.id[j]) << "token " << t << " slot " << j;
      EXPECT_NEAR(r.weights[static_cast<size_t>(t * 2 + j)], want.w[j], 1e-6) << "token " << t << " slot " << j;
    }
    // Not the plain softmax's value at the second expert: its own masked softmax.
    double all = 0.0;
    for (int64_t i = 0; i < n_experts; ++i) all += std::exp(static_cast<double>(l[i]) - l[want.id[0]]);
    const double plain = std::exp(static_cast<double>(l[want.id[1]]) - l[want.id[0]]) / all;
    second_differs += std::fabs(want.w[1] - plain) > 1e-3 ? 1 : 0;
  }
  EXPECT_GT(masked, n) << "the masks drop experts";
  EXPECT_GT(kept, 2 * n) << "and keep some beside the chosen ones";
  EXPECT_EQ(second_differs, n);
  // Hand-worked, jitter 0.05 (threshold 0.1): row 0's first mask keeps 1.9 ((2 - 1.9) / 2 = 0.05),
  // drops 1 and -3; its second mask (max 1.9) drops both. Row 1 (max -1, factor |s|) keeps -1.05
  // ((-1 + 1.05) / 1.05), drops -2 and -5; the second drops both.
  const Routed h = route_sparsemixer(*b, {2.0f, 1.9f, 1.0f, -3.0f, -1.0f, -1.05f, -2.0f, -5.0f}, 2, 4, 0.05f);
  EXPECT_EQ(h.ids, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_NEAR(h.weights[0], 1.0 / (1.0 + std::exp(-0.1)), 1e-6);
  EXPECT_NEAR(h.weights[1], 1.0, 1e-7);
  EXPECT_NEAR(h.weights[2], 1.0 / (1.0 + std::exp(-0.05)), 1e-6);
  EXPECT_NEAR(h.weights[3], 1.0, 1e-7);
}

struct ExpertCase {
  int64_t n, d, inter, n_experts;
  int k;
  DType w_dtype;
};

// Routing from random logits in [-3, 3) (softmax top-k, renormalised), so some experts get many
// tokens and some none: the ids and weights as moe_route leaves them, on the host and as tensors.
struct RandomRouting {
  Routed r;
  OwnedTensor ids, wts;
};
// normalize false: the top-k softmax weights as they are (a top-1 weight is then not 1).
RandomRouting random_routing(Backend& b, std::mt19937& rng, const ExpertCase& c, bool normalize = true) {
  std::vector<float> logits(static_cast<size_t>(c.n * c.n_experts));
  std::uniform_real_distribution<float> u(-3, 3);
  for (float& v : logits) v = u(rng);
  RandomRouting out{route(b, logits, c.n, c.n_experts, c.k, normalize), make(b, DType::i32, {c.n, c.k}),
                    make(b, DType::f32, {c.n, c.k})};
  std::copy(out.r.ids.begin(), out.r.ids.end(), out.ids.tensor.as<int32_t>());
  std::copy(out.r.weights.begin(), out.r.weights.end(), out.wts.tensor.as<float>());
  return out;
}

// Inputs x [n, d] in [-2, 2) and fused experts (gate_up [E * 2I, d], down [E * d, I]) in
// [-0.3, 0.3) of the case's weight type.
struct RandomExperts {
  OwnedTensor x, gu, down;
};
RandomExperts random_experts(Backend& b, std::mt19937& rng, const ExpertCase& c) {
  RandomExperts e{make(b, DType::f32, {c.n, c.d}), make(b, c.w_dtype, {c.n_experts * 2 * c.inter, c.d}),
                  make(b, c.w_dtype, {c.n_experts * c.d, c.inter})};
  test::fill_uniform(e.x.tensor, rng, -2, 2);
  test::fill_uniform(e.gu.tensor, rng, -0.3f, 0.3f);
  test::fill_uniform(e.down.tensor, rng, -0.3f, 0.3f);
  return e;
}

// gpt-oss's additions (MoeExpertMlp) as the reference applies them; empty / 0 = none.
struct RefMlp {
  std::vector<float> gate_up_bias;  // [E * 2I]
  std::vector<float> down_bias;     // [E * d]
  float limit = 0.0f;
  float alpha = 1.0f;
  bool weight_on_input = false;  // Llama 4: w scales the expert's input, its output is added as is
  bool gelu_tanh = false;        // Gemma 4: gelu_pytorch_tanh(g) * u
};

// out[t] = sum_j w[t,j] * down_e (silu(gate_e x) * up_e x) in double from the weights as stored
// (with RefMlp: biases added, transformers' GptOssExperts._apply_gate as the activation).
std::vector<double> experts_reference(const Tensor& x, const Tensor& gu, const Tensor& down, const std::vector<int32_t>& ids,
                                      const std::vector<float>& wts, const ExpertCase& c, const RefMlp& m = {}) {
  std::vector<double> out(static_cast<size_t>(c.n * c.d), 0.0);
  std::vector<double> act(static_cast<size_t>(c.inter));
  for (int64_t t = 0; t < c.n; ++t) {
    for (int j = 0; j < c.k; ++j) {
      const int64_t e = ids[static_cast<size_t>(t * c.k + j)];
      const double w = wts[static_cast<size_t>(t * c.k + j)];
      for (int64_t i = 0; i < c.inter; ++i) {
        double g = 0.0, u = 0.0;
        for (int64_t h = 0; h < c.d; ++h) {
          const double xv = get(x, t * c.d + h) * (m.weight_on_input ? w : 1.0);
          g += xv * get(gu, (e * 2 * c.inter + i) * c.d + h);
          u += xv * get(gu, (e * 2 * c.inter + c.inter + i) * c.d + h);
        }
        if (!m.gate_up_bias.empty()) {
          g += m.gate_up_bias[static_cast<size_t>(e * 2 * c.inter + i)];
          u += m.gate_up_bias[static_cast<size_t>(e * 2 * c.inter + c.inter + i)];
        }
        if (m.gelu_tanh) {
          act[static_cast<size_t>(i)] = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * u;
        } else if (m.limit > 0.0f) {
          g = std::min<double>(g, m.limit);
          u = std::clamp<double>(u, -m.limit, m.limit);
          act[static_cast<size_t>(i)] = (u + 1.0) * g / (1.0 + std::exp(-m.alpha * g));
        } else {
          act[static_cast<size_t>(i)] = g / (1.0 + std::exp(-g)) * u;
        }
      }
      for (int64_t h = 0; h < c.d; ++h) {
        double y = m.down_bias.empty() ? 0.0 : m.down_bias[static_cast<size_t>(e * c.d + h)];
        for (int64_t i = 0; i < c.inter; ++i) y += get(down, (e * c.d + h) * c.inter + i) * act[static_cast<size_t>(i)];
        out[static_cast<size_t>(t * c.d + h)] += (m.weight_on_input ? 1.0 : w) * y;
      }
    }
  }
  return out;
}

// The largest |out - ref| (worst), |ref| (scale) and |ref - other| (other) over the elements.
struct Gaps {
  double worst = 0.0, scale = 0.0, other = 0.0;
};
Gaps gaps(const Tensor& out, const std::vector<double>& ref, const std::vector<double>& other) {
  Gaps g;
  for (size_t i = 0; i < ref.size(); ++i) {
    g.worst = std::max(g.worst, std::abs(get(out, static_cast<int64_t>(i)) - ref[i]));
    g.scale = std::max(g.scale, std::abs(ref[i]));
    g.other = std::max(g.other, std::abs(ref[i] - other[i]));
  }
  return g;
}

TEST(CpuMoe, ExpertsMatchAPlainLoop) {
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    for (const ExpertCase c : {ExpertCase{1, 32, 16, 8, 2, DType::f32}, ExpertCase{7, 64, 24, 8, 8, DType::bf16},
                               ExpertCase{100, 48, 32, 4, 2, DType::f32}, ExpertCase{5, 40, 8, 16, 3, DType::bf16}}) {
      SCOPED_TRACE(testing::Message() << level << " n=" << c.n << " E=" << c.n_experts << " k=" << c.k);
      std::mt19937 rng(static_cast<uint32_t>(c.n * 131 + c.n_experts));
      const RandomExperts ex = random_experts(*b, rng, c);
      const OwnedTensor &x = ex.x, &gu = ex.gu, &down = ex.down;
      const RandomRouting routing = random_routing(*b, rng, c);
      const Routed& r = routing.r;
      const OwnedTensor &ids = routing.ids, &wts = routing.wts;
      const size_t ws_bytes = b->moe_workspace_bytes(c.n, c.k, c.d, c.inter);
      auto ws = make(*b, DType::u8, {static_cast<int64_t>(ws_bytes)});
      auto out = make(*b, DType::f32, {c.n, c.d});
      b->moe_experts(x.tensor, gu.tensor, down.tensor, ids.tensor, wts.tensor, MoeExpertMlp{}, ws.tensor, out.tensor);
      const auto ref = experts_reference(x.tensor, gu.tensor, down.tensor, r.ids, r.weights, c);
      double worst = 0.0, scale = 0.0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::abs(get(out.tensor, static_cast<int64_t>(i)) - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
      }
      EXPECT_LT(worst, 1e-5 * std::max(1.0, scale));
      EXPECT_GT(scale, 0.01);  // the outputs are not trivially zero
    }
  }
}

// gpt-oss's experts: gate|up and down biases and the clamped SwiGLU (MoeExpertMlp), decode- and
// prefill-sized steps at every SIMD level, against the plain loop; a limit this small (0.4 here,
// 7 in the real models) clamps many values, and leaving the biases out moves the result.
TEST(CpuMoe, ExpertBiasesAndClampedSwiGluMatchAPlainLoop) {
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    for (const ExpertCase c : {ExpertCase{1, 32, 16, 8, 4, DType::f32}, ExpertCase{60, 64, 24, 4, 2, DType::bf16}}) {
      SCOPED_TRACE(testing::Message() << level << " n=" << c.n);
      std::mt19937 rng(static_cast<uint32_t>(c.n * 7 + 3));
      const RandomExperts ex = random_experts(*b, rng, c);
      const OwnedTensor &x = ex.x, &gu = ex.gu, &down = ex.down;
      RefMlp m;
      m.gate_up_bias.resize(static_cast<size_t>(c.n_experts * 2 * c.inter));
      m.down_bias.resize(static_cast<size_t>(c.n_experts * c.d));
      std::uniform_real_distribution<float> u(-0.5f, 0.5f);
      for (float& v : m.gate_up_bias) v = u(rng);
      for (float& v : m.down_bias) v = u(rng);
      m.limit = 0.4f;
      m.alpha = 1.702f;
      auto gub = make(*b, DType::f32, {static_cast<int64_t>(m.gate_up_bias.size())});
      auto db = make(*b, DType::f32, {static_cast<int64_t>(m.down_bias.size())});
      std::copy(m.gate_up_bias.begin(), m.gate_up_bias.end(), gub.tensor.as<float>());
      std::copy(m.down_bias.begin(), m.down_bias.end(), db.tensor.as<float>());
      const RandomRouting routing = random_routing(*b, rng, c);
      const Routed& r = routing.r;
      const OwnedTensor &ids = routing.ids, &wts = routing.wts;
      auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(c.n, c.k, c.d, c.inter))});
      auto out = make(*b, DType::f32, {c.n, c.d});
      MoeExpertMlp mlp;
      mlp.gate_up_bias = gub.tensor;
      mlp.down_bias = db.tensor;
      mlp.swiglu_limit = m.limit;
      mlp.swiglu_alpha = m.alpha;
      b->moe_experts(x.tensor, gu.tensor, down.tensor, ids.tensor, wts.tensor, mlp, ws.tensor, out.tensor);
      const auto ref = experts_reference(x.tensor, gu.tensor, down.tensor, r.ids, r.weights, c, m);
      RefMlp unbiased = m;
      unbiased.gate_up_bias.clear();
      unbiased.down_bias.clear();
      const auto ref_unbiased = experts_reference(x.tensor, gu.tensor, down.tensor, r.ids, r.weights, c, unbiased);
      const Gaps g = gaps(out.tensor, ref, ref_unbiased);
      EXPECT_LT(g.worst, 1e-5 * std::max(1.0, g.scale));
      EXPECT_GT(g.other, 0.05) << "the biases move the result";
    }
  }
}

// Llama 4's experts (MoeExpertMlp::weight_on_input): the routing weight scales each expert's
// input, not its output, in decode- and prefill-sized steps (the grouped decode kernels and one
// matmul per expert), f32 and bf16 weights, top 1 and top 2, at every SIMD level, against the
// loop in double; through SwiGLU that is far from weighting the output.
TEST(CpuMoe, WeightOnTheInputMatchesAPlainLoop) {
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    for (const ExpertCase c : {ExpertCase{1, 32, 16, 8, 1, DType::f32}, ExpertCase{60, 64, 24, 4, 2, DType::bf16},
                               ExpertCase{100, 48, 32, 4, 1, DType::f32}}) {
      SCOPED_TRACE(testing::Message() << level << " n=" << c.n << " k=" << c.k);
      std::mt19937 rng(static_cast<uint32_t>(c.n * 11 + c.k));
      const RandomExperts ex = random_experts(*b, rng, c);
      const OwnedTensor &x = ex.x, &gu = ex.gu, &down = ex.down;
      const RandomRouting routing = random_routing(*b, rng, c, /*normalize=*/false);
      auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(c.n, c.k, c.d, c.inter))});
      auto out = make(*b, DType::f32, {c.n, c.d});
      MoeExpertMlp mlp;
      mlp.weight_on_input = true;
      b->moe_experts(x.tensor, gu.tensor, down.tensor, routing.ids.tensor, routing.wts.tensor, mlp, ws.tensor, out.tensor);
      RefMlp m;
      m.weight_on_input = true;
      const auto ref = experts_reference(x.tensor, gu.tensor, down.tensor, routing.r.ids, routing.r.weights, c, m);
      const auto on_output = experts_reference(x.tensor, gu.tensor, down.tensor, routing.r.ids, routing.r.weights, c);
      const Gaps g = gaps(out.tensor, ref, on_output);
      EXPECT_LT(g.worst, 1e-5 * std::max(1.0, g.scale));
      EXPECT_GT(g.other, 0.01 * g.scale) << "weighting the input is not weighting the output";
    }
  }
}

// Gemma 4's experts (MoeExpertMlp::gelu_tanh): gelu_pytorch_tanh(gate) * up, in decode- and
// prefill-sized steps, f32 and bf16 weights, at every SIMD level, against the loop in double; far
// from SwiGLU's result.
TEST(CpuMoe, GeluTanhExpertsMatchAPlainLoop) {
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    ASSERT_TRUE(b->supports_gelu_experts());
    for (const ExpertCase c : {ExpertCase{1, 32, 16, 8, 2, DType::f32}, ExpertCase{60, 64, 24, 8, 2, DType::bf16}}) {
      SCOPED_TRACE(testing::Message() << level << " n=" << c.n);
      std::mt19937 rng(static_cast<uint32_t>(c.n * 19 + 5));
      const RandomExperts ex = random_experts(*b, rng, c);
      const RandomRouting routing = random_routing(*b, rng, c);
      auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(c.n, c.k, c.d, c.inter))});
      auto out = make(*b, DType::f32, {c.n, c.d});
      MoeExpertMlp mlp;
      mlp.gelu_tanh = true;
      b->moe_experts(ex.x.tensor, ex.gu.tensor, ex.down.tensor, routing.ids.tensor, routing.wts.tensor, mlp, ws.tensor,
                     out.tensor);
      RefMlp m;
      m.gelu_tanh = true;
      const auto ref = experts_reference(ex.x.tensor, ex.gu.tensor, ex.down.tensor, routing.r.ids, routing.r.weights, c, m);
      const auto swiglu = experts_reference(ex.x.tensor, ex.gu.tensor, ex.down.tensor, routing.r.ids, routing.r.weights, c);
      const Gaps g = gaps(out.tensor, ref, swiglu);
      EXPECT_LT(g.worst, 1e-5 * std::max(1.0, g.scale));
      EXPECT_GT(g.other, 0.01 * g.scale) << "gelu_tanh is not silu";
    }
  }
}

// MoeRouting::expert_scale (Gemma 4's per_expert_scale): the same experts chosen, each weight
// times its expert's scale after the renormalisation.
TEST(CpuMoe, RouteExpertScaleMultipliesEachChosenWeight) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const int64_t n = 9, n_experts = 8;
  const int k = 3;
  auto b = make_cpu_backend({2});
  auto l = make(*b, DType::f32, {n, n_experts});
  for (int64_t i = 0; i < n * n_experts; ++i) l.tensor.as<float>()[i] = u(rng);
  auto scale = make(*b, DType::f32, {n_experts});
  for (int64_t e = 0; e < n_experts; ++e) scale.tensor.as<float>()[e] = 0.5f + 0.25f * static_cast<float>(e);
  auto ids = make(*b, DType::i32, {n, k}), w = make(*b, DType::f32, {n, k});
  auto ids_s = make(*b, DType::i32, {n, k}), w_s = make(*b, DType::f32, {n, k});
  MoeRouting r;
  r.k = k;
  r.normalize = true;
  b->moe_route(l.tensor, r, ids.tensor, w.tensor);
  r.expert_scale = scale.tensor;
  b->moe_route(l.tensor, r, ids_s.tensor, w_s.tensor);
  for (int64_t i = 0; i < n * k; ++i) {
    const int32_t e = ids.tensor.as<int32_t>()[i];
    EXPECT_EQ(ids_s.tensor.as<int32_t>()[i], e);
    EXPECT_FLOAT_EQ(w_s.tensor.as<float>()[i], w.tensor.as<float>()[i] * scale.tensor.as<float>()[e]);
  }
}

// Nemotron 3's experts (MoeExpertMlp::relu2): gate_up holds each expert's up rows alone and the
// activation is relu(u)^2, in decode- and prefill-sized steps (the grouped decode kernels and one
// matmul per expert), f32 and bf16 weights, at every SIMD level, against the loop in double.
TEST(CpuMoe, Relu2ExpertsMatchAPlainLoop) {
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    ASSERT_TRUE(b->supports_relu2_experts());
    for (const ExpertCase c : {ExpertCase{1, 64, 32, 8, 2, DType::f32}, ExpertCase{40, 64, 32, 8, 3, DType::bf16},
                               ExpertCase{100, 48, 24, 4, 2, DType::f32}}) {
      SCOPED_TRACE(testing::Message() << level << " n=" << c.n << " " << dtype_name(c.w_dtype));
      std::mt19937 rng(static_cast<uint32_t>(c.n * 17 + c.inter));
      auto x = make(*b, DType::f32, {c.n, c.d});
      auto up = make(*b, c.w_dtype, {c.n_experts * c.inter, c.d});
      auto down = make(*b, c.w_dtype, {c.n_experts * c.d, c.inter});
      test::fill_uniform(x.tensor, rng, -2, 2);
      test::fill_uniform(up.tensor, rng, -0.3f, 0.3f);
      test::fill_uniform(down.tensor, rng, -0.3f, 0.3f);
      const RandomRouting routing = random_routing(*b, rng, c);
      const Routed& r = routing.r;
      const OwnedTensor &ids = routing.ids, &wts = routing.wts;
      auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(c.n, c.k, c.d, c.inter))});
      auto out = make(*b, DType::f32, {c.n, c.d});
      MoeExpertMlp mlp;
      mlp.relu2 = true;
      b->moe_experts(x.tensor, up.tensor, down.tensor, ids.tensor, wts.tensor, mlp, ws.tensor, out.tensor);
      std::vector<double> ref(static_cast<size_t>(c.n * c.d), 0.0), act(static_cast<size_t>(c.inter));
      for (int64_t t = 0; t < c.n; ++t)
        for (int j = 0; j < c.k; ++j) {
          const int64_t e = r.ids[static_cast<size_t>(t * c.k + j)];
          for (int64_t i = 0; i < c.inter; ++i) {
            double u = 0.0;
            for (int64_t h = 0; h < c.d; ++h) u += get(x.tensor, t * c.d + h) * get(up.tensor, (e * c.inter + i) * c.d + h);
            act[static_cast<size_t>(i)] = u > 0.0 ? u * u : 0.0;
          }
          for (int64_t h = 0; h < c.d; ++h) {
            double y = 0.0;
            for (int64_t i = 0; i < c.inter; ++i) y += get(down.tensor, (e * c.d + h) * c.inter + i) * act[static_cast<size_t>(i)];
            ref[static_cast<size_t>(t * c.d + h)] += r.weights[static_cast<size_t>(t * c.k + j)] * y;
          }
        }
      double worst = 0.0, scale = 0.0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::abs(get(out.tensor, static_cast<int64_t>(i)) - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
      }
      EXPECT_LT(worst, 1e-5 * std::max(1.0, scale));
      EXPECT_GT(scale, 0.01);
    }
  }
}

// GGUF's experts (moe_experts_split): gate, up and down block-quantized, each in its own type, in
// decode-sized and prefill-sized steps at every SIMD level, against moe_experts over the same
// weights dequantized to f32 (checked against the plain loop above). The quantized kernels round
// the activations to int8 per block of 32 or 256 (d = absmax / 127: about 0.4% of a block's
// largest value), so the outputs agree to 2% of their scale; gate and up swapped, or an expert's
// rows read from another expert, are off by far more (checked for the swap).
TEST(CpuMoe, SplitQuantizedExpertsMatchTheDequantizedFusedOnes) {
  const int64_t d = 256, inter = 256, n_experts = 4;
  const int k = 2;
  struct Types {
    DType gate, up, down;
  };
  for (const std::string& level : test::simd_levels()) {
    auto b = backend_at(level);
    for (const Types t : {Types{DType::q4_k, DType::q4_k, DType::q6_k}, Types{DType::q8_0, DType::q4_k, DType::q4_0},
                          Types{DType::q5_k, DType::q6_k, DType::q8_0}, Types{DType::q4_1, DType::q4_0, DType::q4_1},
                          Types{DType::mxfp4, DType::mxfp4, DType::mxfp4}}) {
      for (const int64_t n : {int64_t{3}, int64_t{60}}) {
        SCOPED_TRACE(testing::Message() << level << " n=" << n << " " << dtype_name(t.gate) << "/" << dtype_name(t.up)
                                        << "/" << dtype_name(t.down));
        std::mt19937 rng(static_cast<uint32_t>(n * 7 + static_cast<int>(t.gate)));
        auto quantized = [&](DType type, int64_t rows, int64_t cols, std::vector<float>& values) {
          const std::vector<uint8_t> bytes = test::random_weight(type, rows, cols, rng);
          values = test::dequantized(bytes, type, rows, cols);
          auto w = make(*b, type, {rows, cols});
          std::memcpy(w.tensor.data, bytes.data(), bytes.size());
          return w;
        };
        std::vector<float> gate_f, up_f, down_f;
        auto gate = quantized(t.gate, n_experts * inter, d, gate_f);
        auto up = quantized(t.up, n_experts * inter, d, up_f);
        auto down = quantized(t.down, n_experts * d, inter, down_f);
        auto gu32 = make(*b, DType::f32, {n_experts * 2 * inter, d});
        auto down32 = make(*b, DType::f32, {n_experts * d, inter});
        for (int64_t e = 0; e < n_experts; ++e) {  // per expert its gate rows, then its up rows
          float* dst = gu32.tensor.as<float>() + e * 2 * inter * d;
          std::copy_n(gate_f.data() + e * inter * d, inter * d, dst);
          std::copy_n(up_f.data() + e * inter * d, inter * d, dst + inter * d);
        }
        std::copy(down_f.begin(), down_f.end(), down32.tensor.as<float>());
        auto x = make(*b, DType::f32, {n, d});
        test::fill_uniform(x.tensor, rng, -1, 1);
        std::vector<float> logits(static_cast<size_t>(n * n_experts));
        std::uniform_real_distribution<float> u(-3, 3);
        for (float& v : logits) v = u(rng);
        const Routed r = route(*b, logits, n, n_experts, k, true);
        auto ids = make(*b, DType::i32, {n, k}), wts = make(*b, DType::f32, {n, k});
        std::copy(r.ids.begin(), r.ids.end(), ids.tensor.as<int32_t>());
        std::copy(r.weights.begin(), r.weights.end(), wts.tensor.as<float>());
        auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(n, k, d, inter))});
        auto want = make(*b, DType::f32, {n, d}), got = make(*b, DType::f32, {n, d});
        b->moe_experts(x.tensor, gu32.tensor, down32.tensor, ids.tensor, wts.tensor, MoeExpertMlp{}, ws.tensor, want.tensor);
        auto worst_of = [&](const Tensor& gate_w, const Tensor& up_w) {
          b->moe_experts_split(x.tensor, gate_w, up_w, down.tensor, ids.tensor, wts.tensor, MoeExpertMlp{}, ws.tensor, got.tensor);
          double worst = 0.0, scale = 0.0;
          for (int64_t i = 0; i < n * d; ++i) {
            worst = std::max(worst, std::abs(get(got.tensor, i) - get(want.tensor, i)));
            scale = std::max(scale, std::abs(get(want.tensor, i)));
          }
          EXPECT_GT(scale, 0.01);  // the outputs are not trivially zero
          return worst / scale;
        };
        EXPECT_LT(worst_of(gate.tensor, up.tensor), 0.02);
        if (t.gate == t.up) {
          EXPECT_GT(worst_of(up.tensor, gate.tensor), 0.1) << "gate and up swapped";
        }
      }
    }
  }
}

// A token's result does not depend on the other tokens of the step: token 0 alone equals token 0
// in a batch of 9 whose other tokens pick the same experts and others.
TEST(CpuMoe, ATokensResultDoesNotDependOnItsBatch) {
  auto b = make_cpu_backend({2});
  const int64_t d = 32, inter = 16, n_experts = 4, n = 9;
  const int k = 2;
  std::mt19937 rng(3);
  auto x = make(*b, DType::f32, {n, d});
  auto gu = make(*b, DType::f32, {n_experts * 2 * inter, d});
  auto down = make(*b, DType::f32, {n_experts * d, inter});
  for (const auto* t : {&x, &gu, &down}) test::fill_uniform(t->tensor, rng);
  auto ids = make(*b, DType::i32, {n, k});
  auto wts = make(*b, DType::f32, {n, k});
  for (int64_t i = 0; i < n * k; ++i) {
    ids.tensor.as<int32_t>()[i] = static_cast<int32_t>((i * 3 + i / k) % n_experts);
    wts.tensor.as<float>()[i] = 0.25f + 0.05f * static_cast<float>(i % 5);
  }
  auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(n, k, d, inter))});
  auto all = make(*b, DType::f32, {n, d});
  auto one = make(*b, DType::f32, {1, d});
  b->moe_experts(x.tensor, gu.tensor, down.tensor, ids.tensor, wts.tensor, MoeExpertMlp{}, ws.tensor, all.tensor);
  b->moe_experts(x.tensor.rows(0, 1), gu.tensor, down.tensor, ids.tensor.rows(0, 1), wts.tensor.rows(0, 1), MoeExpertMlp{}, ws.tensor,
                 one.tensor);
  for (int64_t h = 0; h < d; ++h) EXPECT_EQ(one.tensor.as<float>()[h], all.tensor.as<float>()[h]);
}

// Expert parallelism (core/backend.h): routing with first_expert writes the ids relative to it,
// and the experts op over a slice of the experts skips the ids outside it, so the slices' outputs
// add up to the whole layer's, for decode-sized and BLAS-sized steps; a token none of whose
// experts are in a slice gets zeros there.
TEST(CpuMoe, ExpertParallelSlicesAddUpToTheWholeLayer) {
  auto b = make_cpu_backend({2});
  const int64_t d = 32, inter = 16, n_experts = 8;
  const int k = 2, slices = 4;
  const int64_t per = n_experts / slices;
  for (const int64_t n : {int64_t{3}, int64_t{100}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    auto x = make(*b, DType::f32, {n, d});
    auto gu = make(*b, DType::f32, {n_experts * 2 * inter, d});
    auto down = make(*b, DType::f32, {n_experts * d, inter});
    for (const auto* t : {&x, &gu, &down}) test::fill_uniform(t->tensor, rng, -0.5f, 0.5f);
    std::vector<float> logits(static_cast<size_t>(n * n_experts));
    std::uniform_real_distribution<float> u(-3, 3);
    for (float& v : logits) v = u(rng);
    auto l = make(*b, DType::f32, {n, n_experts});
    std::copy(logits.begin(), logits.end(), l.tensor.as<float>());
    auto ids = make(*b, DType::i32, {n, k}), wts = make(*b, DType::f32, {n, k});
    auto ws = make(*b, DType::u8, {static_cast<int64_t>(b->moe_workspace_bytes(n, k, d, inter))});
    auto whole = make(*b, DType::f32, {n, d}), part = make(*b, DType::f32, {n, d});
    MoeRouting r;
    r.k = k;
    r.normalize = true;
    b->moe_route(l.tensor, r, ids.tensor, wts.tensor);
    const std::vector<int32_t> global(ids.tensor.as<int32_t>(), ids.tensor.as<int32_t>() + n * k);
    b->moe_experts(x.tensor, gu.tensor, down.tensor, ids.tensor, wts.tensor, MoeExpertMlp{}, ws.tensor, whole.tensor);
    std::vector<double> sum(static_cast<size_t>(n * d), 0.0);
    for (int s = 0; s < slices; ++s) {
      r.first_expert = static_cast<int>(s * per);
      b->moe_route(l.tensor, r, ids.tensor, wts.tensor);
      for (int64_t i = 0; i < n * k; ++i) ASSERT_EQ(ids.tensor.as<int32_t>()[i], global[static_cast<size_t>(i)] - s * per);
      b->moe_experts(x.tensor, gu.tensor.rows(s * per * 2 * inter, per * 2 * inter), down.tensor.rows(s * per * d, per * d),
                     ids.tensor, wts.tensor, MoeExpertMlp{}, ws.tensor, part.tensor);
      for (int64_t t = 0; t < n; ++t) {
        bool here = false;
        for (int j = 0; j < k; ++j) here = here || global[static_cast<size_t>(t * k + j)] / per == s;
        for (int64_t h = 0; h < d; ++h) {
          const float v = part.tensor.as<float>()[t * d + h];
          if (!here) {
            ASSERT_EQ(v, 0.0f) << "token " << t << " has no expert in slice " << s;
          }
          sum[static_cast<size_t>(t * d + h)] += v;
        }
      }
    }
    for (int64_t i = 0; i < n * d; ++i) EXPECT_NEAR(sum[static_cast<size_t>(i)], whole.tensor.as<float>()[i], 1e-5) << i;
  }
}

}  // namespace
}  // namespace brigade
