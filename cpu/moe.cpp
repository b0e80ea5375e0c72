// Mixture-of-experts ops (core/backend.h): top-k routing (softmax or sigmoid, optional bias and
// expert groups) and the routed SwiGLU experts.
//
// moe_experts groups the step's (token, slot) pairs by expert on the host (on the CPU the routing
// is already in host memory), gathers each expert's tokens into contiguous rows and runs that
// expert's projections on them with the ordinary matmul (SIMD kernels and threads; OpenBLAS from
// kBlasMinRows rows; the integer kernels for block-quantized experts, their GEMM from
// kQuantGemmMinRows rows), so each expert's weights
// are read once per step however many tokens chose it. Experts with fewer rows than that GEMM
// path takes (every expert of a decode step, most of a batched one's) run their rows of a
// projection together in one parallel_for instead (a dispatch per expert cost 1.5-2x the decode
// speed of the dense model with the same active weights), block-
// quantized weights meeting the gathered rows quantized once per step as matmul quantizes them.
// The weighted sum per token then runs in slot order, independent of the grouping. gpt-oss's
// biases and clamped SwiGLU (MoeExpertMlp) join the activation pass and the expert outputs;
// Llama 4's weights scale the gathered inputs instead (MoeExpertMlp::weight_on_input).
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <span>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

// Workspace rows of moe_experts, f32, for P = n * k pairs: xs [P, d] (gathered inputs),
// gate_up [P, 2I] (fused experts: per pair its gate then its up values; gate and up apart: the
// gate values of all pairs [P, I], then their up values [P, I]), act [P, I], ys [P, d] (each
// pair's expert output, in grouped order).
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

// One projection of every expert: w [E m, k], expert e's rows [e m, (e + 1) m); the grouped
// pairs' outputs go to out [P, m] (row stride m), expert e's pairs at rows [start[e], start[e+1]).
struct ExpertProjection {
  Tensor w;
  int64_t m = 0;
  float* out = nullptr;
};

// The grouped input rows in [P, k] of the experts `active` (in the buffers' rows of all P pairs)
// quantized for the block-quantized projections among `ps`:
// BlockQ8 per 32 (q8_0, q4_0, q4_1, mxfp4) and BlockQ8K per 256 (K-quant decode), as matmul quantizes them.
struct QuantizedRows {
  const BlockQ8* q8 = nullptr;
  const BlockQ8K* q8k = nullptr;
};

QuantizedRows quantize_rows(const CpuContext& c, std::span<const ExpertProjection> ps, const float* in,
                            const std::vector<int64_t>& start, const std::vector<int64_t>& active, int64_t k) {
  const int64_t rows = start.back();
  thread_local std::vector<BlockQ8> q8;
  thread_local std::vector<BlockQ8K> q8k;
  bool want_q8 = false, want_q8k = false;
  for (const ExpertProjection& p : ps)
    if (is_block_quantized(p.w.dtype)) (decodes_with_q8k(p.w.dtype) ? want_q8k : want_q8) = true;
  const int64_t nb = k / 32;
  if (want_q8) q8.resize(static_cast<size_t>(rows * nb));
  if (want_q8k) q8k.resize(static_cast<size_t>(rows * (nb / 8)));
  BlockQ8* x8 = q8.data();
  BlockQ8K* x8k = q8k.data();
  // Only the rows of the `active` experts (in grouped order, each expert's contiguous).
  std::vector<int64_t> todo;
  for (const int64_t e : active)
    for (int64_t i = start[static_cast<size_t>(e)]; i < start[static_cast<size_t>(e) + 1]; ++i) todo.push_back(i);
  if (!want_q8 && !want_q8k) todo.clear();
  c.pool->parallel_for(static_cast<int64_t>(todo.size()), 1, [&](int64_t j0, int64_t j1, int) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t i = todo[static_cast<size_t>(j)];
      if (want_q8) c.kernels->quantize_q8(in + i * k, x8 + i * nb, k);
      if (want_q8k) c.kernels->quantize_q8k(in + i * k, x8k + i * (nb / 8), k);
    }
  });
  return {want_q8 ? x8 : nullptr, want_q8k ? x8k : nullptr};
}

// Rows [r0, r1) of expert e's part of projection p for its pairs' rows of in [P, k] (or of their
// quantized copies xq).
void project_rows(const CpuContext& c, const std::vector<int64_t>& start, const ExpertProjection& p, int64_t e,
                  const float* in, int64_t k, const QuantizedRows& xq, int64_t r0, int64_t r1) {
  const int64_t s0 = start[static_cast<size_t>(e)], rows = start[static_cast<size_t>(e) + 1] - s0;
  const size_t row_bytes = dtype_bytes(p.w.dtype, k);
  const char* w = static_cast<const char*>(p.w.data) + static_cast<size_t>(e * p.m) * row_bytes;
  if (!is_block_quantized(p.w.dtype)) {
    MatmulArgs a;
    a.x = in + s0 * k;
    a.n = rows;
    a.k = k;
    a.w = w;
    a.w_dtype = p.w.dtype;
    a.m = p.m;
    a.out = p.out + s0 * p.m;
    c.kernels->matmul_rows(a, r0, r1);
    return;
  }
  const int64_t nb = k / 32;
  QMatmulArgs q;
  q.n = rows;
  q.nb = nb;
  q.w = w;
  q.w_dtype = p.w.dtype;
  q.row_bytes = row_bytes;
  q.m = p.m;
  q.out = p.out + s0 * p.m;
  if (decodes_with_q8k(p.w.dtype)) {
    q.xk = xq.q8k + s0 * (nb / 8);
    c.kernels->qkmatmul_rows(q, r0, r1);
  } else {
    q.x = xq.q8 + s0 * nb;
    c.kernels->qmatmul_rows(q, r0, r1);
  }
}

// The projections `ps` of the experts `active` (each with pairs) for the grouped rows in [P, k]:
// all of their weight rows in one parallel_for, through the decode kernels (experts with fewer
// rows than the GEMM paths take, where a pool dispatch per expert would cost more than its rows).
void project_grouped(const CpuContext& c, const std::vector<int64_t>& start, const std::vector<int64_t>& active,
                     std::span<const ExpertProjection> ps, const float* in, int64_t k) {
  if (active.empty()) return;
  const QuantizedRows xq = quantize_rows(c, ps, in, start, active, k);
  // Work item g counts the rows of ps[0] of every active expert, then those of ps[1], ...
  int64_t total = 0, min_row_bytes = INT64_MAX;
  for (const ExpertProjection& p : ps) {
    total += static_cast<int64_t>(active.size()) * p.m;
    min_row_bytes = std::min(min_row_bytes, static_cast<int64_t>(dtype_bytes(p.w.dtype, k)));
  }
  // Chunks of ~64 KiB of weights in multiples of 4 rows, as matmul's decode path takes them.
  const int64_t grain = std::max<int64_t>(4, (65536 / std::max<int64_t>(1, min_row_bytes)) & ~int64_t{3});
  c.pool->parallel_for(total, grain, [&](int64_t g0, int64_t g1, int) {
    for (int64_t g = g0; g < g1;) {
      size_t i = 0;
      int64_t h = g;  // g's index within ps[i]
      while (h >= static_cast<int64_t>(active.size()) * ps[i].m) h -= static_cast<int64_t>(active.size()) * ps[i++].m;
      const ExpertProjection& p = ps[i];
      const int64_t r0 = h % p.m, r1 = std::min(p.m, r0 + (g1 - g));
      project_rows(c, start, p, active[static_cast<size_t>(h / p.m)], in, k, xq, r0, r1);
      g += r1 - r0;
    }
  });
}

// Each expert's projections `ps` on its own pairs' rows of in [P, k] through matmul (the prefill
// case: OpenBLAS from kBlasMinRows rows or the quantized prefill kernel from kQuantGemmMinRows, one
// dispatch per expert).
void project_each(const CpuContext& c, const std::vector<int64_t>& start, const std::vector<int64_t>& experts,
                  std::span<const ExpertProjection> ps, const float* in, int64_t k) {
  for (const int64_t e : experts) {
    const int64_t s0 = start[static_cast<size_t>(e)], rows = start[static_cast<size_t>(e) + 1] - s0;
    const Tensor x(const_cast<float*>(in) + s0 * k, DType::f32, {rows, k});
    for (const ExpertProjection& p : ps)
      matmul(c, x, p.w.rows(static_cast<int64_t>(e) * p.m, p.m), Tensor(), Tensor(p.out + s0 * p.m, DType::f32, {rows, p.m}));
  }
}

// What moe_experts and moe_experts_split share: the projections (gate|up fused or apart) and
// where each pair's gate and up values land in the workspace.
struct ExpertWeights {
  Tensor gate_up;  // fused [E * 2I, d], or empty
  Tensor gate;     // apart: [E * I, d] each
  Tensor up;
  Tensor down;     // [E * d, I]
};

// act [inter] = the experts' activation of one pair's gate and up values (MoeExpertMlp), with
// its expert's gate and up biases (gb, ub: null without them).
void activate(const CpuContext& c, const MoeExpertMlp& mlp, const float* gate, const float* up, const float* gb,
              const float* ub, float* act, int64_t inter) {
  if (mlp.relu2) {  // Nemotron 3: no gate
    for (int64_t i = 0; i < inter; ++i) act[i] = up[i] > 0.0f ? up[i] * up[i] : 0.0f;
    return;
  }
  if (mlp.gelu_tanh) {  // Gemma 4
    c.kernels->gelu_tanh_mul(gate, up, act, inter);
    return;
  }
  if (mlp.swiglu_limit <= 0.0f && gb == nullptr) {
    c.kernels->silu_mul(gate, up, act, inter);
    return;
  }
  const float limit = mlp.swiglu_limit, alpha = mlp.swiglu_alpha;
  for (int64_t i = 0; i < inter; ++i) {
    float g = gate[i] + (gb != nullptr ? gb[i] : 0.0f), u = up[i] + (ub != nullptr ? ub[i] : 0.0f);
    if (limit <= 0.0f) {
      act[i] = g / (1.0f + std::exp(-g)) * u;
      continue;
    }
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
    act[i] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
  }
}

void run_experts(const CpuContext& c, const Tensor& x, const ExpertWeights& ew, const Tensor& ids,
                 const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace, const Tensor& out) {
  const bool fused = !ew.gate_up.empty();
  const Tensor& first = fused ? ew.gate_up : ew.gate;
  const int64_t n = x.dim(0), d = x.row_numel(), inter = ew.down.row_numel();
  const int64_t k = n > 0 ? ids.numel() / n : 0, pairs = n * k;
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32 && out.numel() == n * d,
                "moe_experts: x and out [n, d] f32");
  BRIGADE_CHECK(!mlp.relu2 || (fused && mlp.gate_up_bias.empty() && mlp.down_bias.empty() && mlp.swiglu_limit <= 0.0f),
                "moe_experts: relu2 experts hold their up rows in gate_up, without biases or a clamp");
  BRIGADE_CHECK(!mlp.gelu_tanh || (!mlp.relu2 && mlp.gate_up_bias.empty() && mlp.swiglu_limit <= 0.0f),
                "moe_experts: gelu_tanh experts have no gate_up biases, clamp or relu2");
  const int64_t per_expert = fused && !mlp.relu2 ? 2 * inter : inter;
  BRIGADE_CHECK(inter > 0 && first.row_numel() == d && first.dim(0) % per_expert == 0,
                "moe_experts: gate_up [E * 2I, d] (relu2: [E * I, d]; or gate and up [E * I, d]), down [E * d, I]");
  const int64_t n_experts = first.dim(0) / per_expert;
  BRIGADE_CHECK(fused || (ew.up.row_numel() == d && ew.up.dim(0) == n_experts * inter),
                "moe_experts_split: gate and up [E * I, d]");
  BRIGADE_CHECK(ew.down.dim(0) == n_experts * d && weights.numel() == pairs && ids.dtype == DType::i32 &&
                    weights.dtype == DType::f32, "moe_experts: down [E * d, I], ids and weights [n, k]");
  BRIGADE_CHECK(workspace.nbytes() >= moe_workspace_bytes(n, static_cast<int>(k), d, inter),
                "moe_experts: workspace of moe_workspace_bytes");
  BRIGADE_CHECK((mlp.gate_up_bias.empty() ||
                 (mlp.gate_up_bias.dtype == DType::f32 && mlp.gate_up_bias.numel() == n_experts * 2 * inter)) &&
                    (mlp.down_bias.empty() ||
                     (mlp.down_bias.dtype == DType::f32 && mlp.down_bias.numel() == n_experts * d)),
                "moe_experts: gate_up_bias [E * 2I] and down_bias [E * d] f32");
  for (const Tensor* t : {&ew.gate_up, &ew.gate, &ew.up, &ew.down})
    BRIGADE_CHECK(t->empty() || !is_block_quantized(t->dtype) || t->row_numel() % dtype_block_elems(t->dtype) == 0,
                  "moe_experts: a block-quantized expert's rows are whole blocks");
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
  const float* wt = weights.as<const float>();
  c.pool->parallel_for(pairs, std::max<int64_t>(1, 16384 / d), [&](int64_t b, int64_t e, int) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t slot = slot_of[static_cast<size_t>(p)];
      if (slot < 0) continue;
      float* xs = w.xs + slot * d;
      std::copy_n(xp + (p / k) * d, d, xs);
      if (mlp.weight_on_input)  // Llama 4: the routing weight scales the expert's input
        for (int64_t i = 0; i < d; ++i) xs[i] *= wt[p];
    }
  });
  // Pair s's gate values at gate + s * stride, its up values at up + s * stride (relu2: up only):
  // a pair's first-projection row is as wide as an expert's rows of it.
  float* gate = w.gate_up;
  float* up = mlp.relu2 ? w.gate_up : fused ? w.gate_up + inter : w.gate_up + pairs * inter;
  const int64_t stride = per_expert;
  std::vector<ExpertProjection> first_ps;
  if (fused) first_ps = {{ew.gate_up, per_expert, w.gate_up}};
  else first_ps = {{ew.gate, inter, gate}, {ew.up, inter, up}};
  const ExpertProjection down{ew.down, d, w.ys};
  // Experts with fewer rows than matmul's GEMM path takes (kQuantGemmMinRows for block-quantized
  // experts, kBlasMinRows for float ones) run the decode kernels matmul would run on them, all in
  // one dispatch per projection (a decode step's experts, most of a batch's); the others one
  // matmul each. Either way an expert's rows go through the kernel its own row count picks.
  const int64_t gemm_rows = is_block_quantized(first.dtype) ? kQuantGemmMinRows : kBlasMinRows;
  std::vector<int64_t> few, many;
  for (int64_t e = 0; e < n_experts; ++e) {
    const int64_t rows = start[static_cast<size_t>(e) + 1] - start[static_cast<size_t>(e)];
    if (rows > 0) (rows < gemm_rows ? few : many).push_back(e);
  }
  project_grouped(c, start, few, first_ps, w.xs, d);
  project_each(c, start, many, first_ps, w.xs, d);
  // The expert of grouped slot s, for its biases.
  std::vector<int32_t> expert_of(static_cast<size_t>(local));
  for (size_t e = 0; e + 1 < start.size(); ++e)
    std::fill(expert_of.begin() + start[e], expert_of.begin() + start[e + 1], static_cast<int32_t>(e));
  const float* gu_bias = mlp.gate_up_bias.empty() ? nullptr : mlp.gate_up_bias.as<const float>();
  c.pool->parallel_for(local, std::max<int64_t>(1, 16384 / inter), [&](int64_t b, int64_t e, int) {
    for (int64_t s = b; s < e; ++s) {
      const float* gb = gu_bias != nullptr ? gu_bias + expert_of[static_cast<size_t>(s)] * 2 * inter : nullptr;
      activate(c, mlp, gate + s * stride, up + s * stride, gb, gb != nullptr ? gb + inter : nullptr, w.act + s * inter,
               inter);
    }
  });
  project_grouped(c, start, few, {&down, 1}, w.act, inter);
  project_each(c, start, many, {&down, 1}, w.act, inter);
  if (!mlp.down_bias.empty()) {
    const float* db = mlp.down_bias.as<const float>();
    c.pool->parallel_for(local, std::max<int64_t>(1, 16384 / d), [&](int64_t b, int64_t e, int) {
      for (int64_t s = b; s < e; ++s) {
        const float* bias = db + expert_of[static_cast<size_t>(s)] * d;
        float* y = w.ys + s * d;
        for (int64_t i = 0; i < d; ++i) y[i] += bias[i];
      }
    });
  }
  c.pool->parallel_for(n, std::max<int64_t>(1, 16384 / (d * k)), [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* o = out.as<float>() + t * d;
      std::fill_n(o, d, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = t * k + j, slot = slot_of[static_cast<size_t>(p)];
        if (slot >= 0) c.kernels->scale_axpy(o, 1.0f, mlp.weight_on_input ? 1.0f : wt[p], w.ys + slot * d, d);
      }
    }
  });
}

// Backend::moe_route's sparsemixer rule for one token's logits l [E]: ids and weights [2].
void route_sparsemixer(const float* l, int64_t n_experts, float jitter_eps, int first_expert, int32_t* ids,
                       float* weights) {
  int64_t chosen = -1;  // the first expert, out of the second one's choice and softmax
  for (int j = 0; j < 2; ++j) {
    int64_t m = -1;
    for (int64_t i = 0; i < n_experts; ++i)
      if (i != chosen && (m < 0 || l[i] > l[m])) m = i;
    const float top = l[m];
    float sum = 0.0f;
    for (int64_t i = 0; i < n_experts; ++i)
      if (i != chosen && !((top - l[i]) / std::max(std::fabs(l[i]), top) > 2.0f * jitter_eps))
        sum += std::exp(l[i] - top);
    ids[j] = static_cast<int32_t>(m) - first_expert;
    weights[j] = 1.0f / sum;  // exp(l[m] - top) / sum
    chosen = m;
  }
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
  BRIGADE_CHECK(r.expert_scale.empty() || (r.expert_scale.dtype == DType::f32 && r.expert_scale.numel() == n_experts &&
                                           r.scoring != MoeScoring::sparsemixer),
                "moe_route: expert_scale [E] f32 (not with sparsemixer)");
  const float* expert_scale = r.expert_scale.empty() ? nullptr : r.expert_scale.as<const float>();
  const bool grouped = r.group_score != MoeGroupScore::none && r.n_group > 1;
  BRIGADE_CHECK(!grouped || (n_experts % r.n_group == 0 && r.topk_group >= 1 && r.topk_group <= r.n_group &&
                             k <= r.topk_group * (n_experts / r.n_group)),
                "moe_route: E a multiple of n_group, topk_group in [1, n_group], k <= the allowed experts");
  const float* bias = r.bias.empty() ? nullptr : r.bias.as<const float>();
  if (r.scoring == MoeScoring::sparsemixer) {
    BRIGADE_CHECK(k == 2 && bias == nullptr && !grouped, "moe_route: sparsemixer routes top-2, without bias or groups");
    c.pool->parallel_for(n, std::max<int64_t>(1, 4096 / n_experts), [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t)
        route_sparsemixer(router_logits.as<const float>() + t * n_experts, n_experts, r.jitter_eps, r.first_expert,
                          ids.as<int32_t>() + t * 2, weights.as<float>() + t * 2);
    });
    return;
  }
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
        choice[static_cast<size_t>(i)] = (r.select_on_logits ? l[i] : p[static_cast<size_t>(i)]) + (bias != nullptr ? bias[i] : 0.0f);
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
        weights.as<float>()[t * k + j] = w * r.scale * (expert_scale != nullptr ? expert_scale[ex] : 1.0f);
      }
    }
  });
}

void moe_experts(const CpuContext& c, const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                 const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace, const Tensor& out) {
  run_experts(c, x, {gate_up, Tensor(), Tensor(), down}, ids, weights, mlp, workspace, out);
}

void moe_experts_split(const CpuContext& c, const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down,
                       const Tensor& ids, const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace,
                       const Tensor& out) {
  BRIGADE_CHECK(!gate.empty() && !up.empty(), "moe_experts_split: gate and up");
  run_experts(c, x, {Tensor(), gate, up, down}, ids, weights, mlp, workspace, out);
}

void moe_identity_experts(const CpuContext& c, const Tensor& x, const Tensor& ids, const Tensor& weights,
                          int n_experts, const Tensor& out) {
  const int64_t n = x.dim(0), d = x.row_numel();
  const int64_t k = n > 0 ? ids.numel() / n : 0;
  BRIGADE_CHECK(x.dtype == DType::f32 && out.dtype == DType::f32 && out.numel() == n * d,
                "moe_identity_experts: x and out [n, d] f32");
  BRIGADE_CHECK(ids.dtype == DType::i32 && weights.dtype == DType::f32 && ids.numel() == n * k &&
                    weights.numel() == n * k && n_experts >= 0,
                "moe_identity_experts: ids and weights [n, k]");
  const int32_t* id = ids.as<const int32_t>();
  const float* wt = weights.as<const float>();
  c.pool->parallel_for(n, std::max<int64_t>(1, 16384 / d), [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float w = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        if (id[t * k + j] >= n_experts) w += wt[t * k + j];
      if (w != 0.0f) c.kernels->scale_axpy(out.as<float>() + t * d, 1.0f, w, x.as<const float>() + t * d, d);
    }
  });
}

}  // namespace brigade::cpu
