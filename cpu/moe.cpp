// Mixture-of-experts ops (core/backend.h): top-k routing (softmax or sigmoid, optional bias and
// expert groups) and the routed SwiGLU experts.
//
// moe_experts groups the step's (token, slot) pairs by expert on the host (on the CPU the routing
// is already in host memory), gathers each expert's tokens into contiguous rows and runs that
// expert's two matmuls on them with the ordinary matmul (SIMD kernels and threads; OpenBLAS from
// kBlasMinRows rows), so each expert's weights are read once per step however many tokens chose
// it. Steps of fewer pairs than kBlasMinRows (decode) run every expert's rows of a projection in
// one parallel_for instead (a dispatch per expert cost 1.5-2x the decode speed of the dense
// model with the same active weights). The weighted sum per token then runs in slot order,
// independent of the grouping.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

// Workspace rows of moe_experts, f32, for P = n * k pairs: xs [P, d] (gathered inputs),
// gate_up [P, 2I], act [P, I], ys [P, d] (each pair's expert output, in grouped order).
struct MoeWorkspace {
  float* xs;
  float* gate_up;
  float* act;
  float* ys;
};

MoeWorkspace split_workspace(const Tensor& ws, int64_t pairs, int64_t d, int64_t inter) {
  float* p = ws.as<float>();
  MoeWorkspace w{};
  w.xs = p;
  w.gate_up = w.xs + pairs * d;
  w.act = w.gate_up + pairs * 2 * inter;
  w.ys = w.act + pairs * inter;
  return w;
}

// out rows of the grouped pairs = in rows · w_eᵀ for every expert e with pairs, where w_e is rows
// [e m, (e + 1) m) of w [E m, k]: all experts' weight rows in one parallel_for (the decode case,
// where a pool dispatch per expert would cost more than its few rows). in [P, k], out [P, m] f32.
void project_grouped(const CpuContext& c, const std::vector<int64_t>& start, const Tensor& w, int64_t m,
                     const float* in, float* out) {
  const int64_t k = w.row_numel(), row_bytes = k * static_cast<int64_t>(dtype_size(w.dtype));
  std::vector<int64_t> active;
  for (size_t e = 0; e + 1 < start.size(); ++e)
    if (start[e + 1] > start[e]) active.push_back(static_cast<int64_t>(e));
  // Chunks of ~64 KiB of weights in multiples of 4 rows, as matmul's decode path takes them.
  const int64_t grain = std::max<int64_t>(4, (65536 / std::max<int64_t>(1, row_bytes)) & ~int64_t{3});
  c.pool->parallel_for(static_cast<int64_t>(active.size()) * m, grain, [&](int64_t g0, int64_t g1, int) {
    for (int64_t g = g0; g < g1;) {
      const int64_t e = active[static_cast<size_t>(g / m)], r0 = g % m, r1 = std::min(m, r0 + (g1 - g));
      MatmulArgs a;
      a.x = in + start[static_cast<size_t>(e)] * k;
      a.n = start[static_cast<size_t>(e) + 1] - start[static_cast<size_t>(e)];
      a.k = k;
      a.w = static_cast<const char*>(w.data) + e * m * row_bytes;
      a.w_dtype = w.dtype;
      a.m = m;
      a.out = out + start[static_cast<size_t>(e)] * m;
      c.kernels->matmul_rows(a, r0, r1);
      g += r1 - r0;
    }
  });
}

}  // namespace

size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter) {
  return static_cast<size_t>(n * k * (2 * d + 3 * inter)) * sizeof(float);
}

void moe_route(const CpuContext& c, const Tensor& router_logits, const MoeRouting& r, const Tensor& ids,
               const Tensor& weights) {
  const int64_t n = router_logits.dim(0), n_experts = router_logits.row_numel();
  const int k = r.k;
  BRIGADE_CHECK(router_logits.dtype == DType::f32 && ids.dtype == DType::i32 && weights.dtype == DType::f32,
                "moe_route: router_logits f32, ids i32, weights f32");
  BRIGADE_CHECK(k >= 1 && k <= n_experts && ids.numel() == n * k && weights.numel() == n * k,
                "moe_route: 1 <= k <= E, ids and weights [n, k]");
  BRIGADE_CHECK(r.bias.empty() || (r.bias.dtype == DType::f32 && r.bias.numel() == n_experts), "moe_route: bias [E] f32");
  const bool grouped = r.group_score != MoeGroupScore::none && r.n_group > 1;
  BRIGADE_CHECK(!grouped || (n_experts % r.n_group == 0 && r.topk_group >= 1 && r.topk_group <= r.n_group &&
                             k <= r.topk_group * (n_experts / r.n_group)),
                "moe_route: E a multiple of n_group, topk_group in [1, n_group], k <= the allowed experts");
  const float* bias = r.bias.empty() ? nullptr : r.bias.as<const float>();
  // torch.topk's order: larger first, the lower index first among equal values.
  auto by_value = [](const std::vector<float>& v) {
    return [&v](int32_t a, int32_t z) {
      const float va = v[static_cast<size_t>(a)], vz = v[static_cast<size_t>(z)];
      return va > vz || (va == vz && a < z);
    };
  };
  c.pool->parallel_for(n, std::max<int64_t>(1, 4096 / n_experts), [&](int64_t b, int64_t e, int) {
    std::vector<float> p(static_cast<size_t>(n_experts)), choice(static_cast<size_t>(n_experts));
    std::vector<int32_t> order(static_cast<size_t>(n_experts));
    std::vector<float> group_score(static_cast<size_t>(std::max(r.n_group, 1)));
    std::vector<int32_t> groups(group_score.size());
    for (int64_t t = b; t < e; ++t) {
      const float* l = router_logits.as<const float>() + t * n_experts;
      if (r.scoring == MoeScoring::softmax) {
        const float mx = *std::max_element(l, l + n_experts);
        float sum = 0.0f;
        for (int64_t i = 0; i < n_experts; ++i) sum += (p[static_cast<size_t>(i)] = std::exp(l[i] - mx));
        for (float& v : p) v /= sum;
      } else {
        for (int64_t i = 0; i < n_experts; ++i) p[static_cast<size_t>(i)] = 1.0f / (1.0f + std::exp(-l[i]));
      }
      for (int64_t i = 0; i < n_experts; ++i)
        choice[static_cast<size_t>(i)] = p[static_cast<size_t>(i)] + (bias != nullptr ? bias[i] : 0.0f);
      std::iota(order.begin(), order.end(), 0);
      auto candidates = order.end();
      if (grouped) {
        // Score each group, keep the experts of the topk_group best ones (in id order).
        const int64_t size = n_experts / r.n_group;
        for (int g = 0; g < r.n_group; ++g) {
          std::vector<float> part(choice.begin() + g * size, choice.begin() + (g + 1) * size);
          std::partial_sort(part.begin(), part.begin() + (r.group_score == MoeGroupScore::max ? 1 : 2), part.end(),
                            std::greater<float>());
          group_score[static_cast<size_t>(g)] = r.group_score == MoeGroupScore::max ? part[0] : part[0] + part[1];
        }
        std::iota(groups.begin(), groups.end(), 0);
        std::partial_sort(groups.begin(), groups.begin() + r.topk_group, groups.end(), by_value(group_score));
        std::sort(groups.begin(), groups.begin() + r.topk_group);
        auto dst = order.begin();
        for (int j = 0; j < r.topk_group; ++j, dst += size)
          std::iota(dst, dst + size, static_cast<int32_t>(groups[static_cast<size_t>(j)] * size));
        candidates = dst;
      }
      std::partial_sort(order.begin(), order.begin() + k, candidates, by_value(choice));
      float top = 0.0f;
      for (int j = 0; j < k; ++j) top += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
      for (int j = 0; j < k; ++j) {
        const int32_t ex = order[static_cast<size_t>(j)];
        const float w = r.normalize ? p[static_cast<size_t>(ex)] / top : p[static_cast<size_t>(ex)];
        ids.as<int32_t>()[t * k + j] = ex - r.first_expert;
        weights.as<float>()[t * k + j] = w * r.scale;
      }
    }
  });
}

void moe_experts(const CpuContext& c, const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                 const Tensor& weights, const Tensor& workspace, const Tensor& out) {
  const int64_t n = x.dim(0), d = x.row_numel(), inter = down.row_numel();
  const int64_t k = n > 0 ? ids.numel() / n : 0, pairs = n * k;
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32 && out.numel() == n * d,
                "moe_experts: x and out [n, d] f32");
  BRIGADE_CHECK(inter > 0 && gate_up.row_numel() == d && gate_up.dim(0) % (2 * inter) == 0,
                "moe_experts: gate_up [E * 2I, d], down [E * d, I]");
  const int64_t n_experts = gate_up.dim(0) / (2 * inter);
  BRIGADE_CHECK(down.dim(0) == n_experts * d && weights.numel() == pairs && ids.dtype == DType::i32 &&
                    weights.dtype == DType::f32, "moe_experts: down [E * d, I], ids and weights [n, k]");
  BRIGADE_CHECK(workspace.nbytes() >= moe_workspace_bytes(n, static_cast<int>(k), d, inter),
                "moe_experts: workspace of moe_workspace_bytes");
  if (n == 0) return;
  const int32_t* id = ids.as<const int32_t>();
  // Pairs p = t * k + j of the experts held here, ordered by expert (stable: by token within an
  // expert); slot_of[p] is where pair p's rows sit in the grouped order, -1 for a pair whose
  // expert another expert-parallel rank holds.
  auto here = [&](int64_t p) { return id[p] >= 0 && id[p] < n_experts; };
  std::vector<int64_t> start(static_cast<size_t>(n_experts) + 1, 0);
  for (int64_t p = 0; p < pairs; ++p)
    if (here(p)) ++start[static_cast<size_t>(id[p]) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  const int64_t local = start.back();
  std::vector<int64_t> fill(start.begin(), start.end() - 1), slot_of(static_cast<size_t>(pairs), -1);
  for (int64_t p = 0; p < pairs; ++p)
    if (here(p)) slot_of[static_cast<size_t>(p)] = fill[static_cast<size_t>(id[p])]++;
  const MoeWorkspace w = split_workspace(workspace, pairs, d, inter);
  const float* xp = x.as<const float>();
  c.pool->parallel_for(pairs, std::max<int64_t>(1, 16384 / d), [&](int64_t b, int64_t e, int) {
    for (int64_t p = b; p < e; ++p)
      if (slot_of[static_cast<size_t>(p)] >= 0) std::copy_n(xp + (p / k) * d, d, w.xs + slot_of[static_cast<size_t>(p)] * d);
  });
  if (local < kBlasMinRows) {
    // No expert can reach the BLAS path: the same kernels matmul would run, in two dispatches.
    project_grouped(c, start, gate_up, 2 * inter, w.xs, w.gate_up);
    for (int64_t p = 0; p < local; ++p)
      c.kernels->silu_mul(w.gate_up + p * 2 * inter, w.gate_up + p * 2 * inter + inter, w.act + p * inter, inter);
    project_grouped(c, start, down, d, w.act, w.ys);
  }
  for (int64_t ex = 0; ex < n_experts && local >= kBlasMinRows; ++ex) {
    const int64_t s0 = start[static_cast<size_t>(ex)], rows = start[static_cast<size_t>(ex) + 1] - s0;
    if (rows == 0) continue;
    const Tensor xs(w.xs + s0 * d, DType::f32, {rows, d});
    const Tensor gu(w.gate_up + s0 * 2 * inter, DType::f32, {rows, 2 * inter});
    const Tensor act(w.act + s0 * inter, DType::f32, {rows, inter});
    const Tensor ys(w.ys + s0 * d, DType::f32, {rows, d});
    matmul(c, xs, gate_up.rows(ex * 2 * inter, 2 * inter), Tensor(), gu);
    silu_mul(c, gu, act);
    matmul(c, act, down.rows(ex * d, d), Tensor(), ys);
  }
  const float* wt = weights.as<const float>();
  c.pool->parallel_for(n, std::max<int64_t>(1, 16384 / (d * k)), [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* o = out.as<float>() + t * d;
      std::fill_n(o, d, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = t * k + j, slot = slot_of[static_cast<size_t>(p)];
        if (slot >= 0) c.kernels->scale_axpy(o, 1.0f, wt[p], w.ys + slot * d, d);
      }
    }
  });
}

}  // namespace brigade::cpu
