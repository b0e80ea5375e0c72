// The CPU side of the state-space ops (Backend::supports_ssm; core/backend.h SsmLayout): the
// causal depthwise convolution (Mamba's, and LFM2's gated short_conv), Mamba2's selective scan
// with the gated RMSNorm and Mamba1's (ssm_scan_diag), Gated DeltaNet's (gated_delta), Kimi's KDA (kda), in f32,
// one token after another as transformers' decode paths run them (each state row's update and
// its dots through the SIMD kernels), relu_squared (Nemotron-H's MLP) and sigmoid_mul
// (Qwen3-Next's attention gate). The scans parallelise over (sequence, head or block of
// channels); the convolution over blocks of channels.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

float silu(float v) { return v / (1.0f + std::exp(-v)); }

// torch's softplus (beta 1, threshold 20): log1p(exp(x)), x itself above 20.
float softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }

struct SeqRange {
  int64_t begin = 0, end = 0;
  int32_t slot = 0;
  bool fresh = false;
  int64_t save_row = -1;  // the row after which the state is copied into save_slot (-1: none)
  int32_t save_slot = -1;
};

std::vector<SeqRange> seq_ranges(const SsmSeqs& seqs, int64_t n_rows, int64_t n_slots) {
  BRIGADE_CHECK(seqs.q_start.numel() == seqs.n_seqs + 1 && seqs.slots.numel() == seqs.n_seqs &&
                    seqs.fresh.numel() == seqs.n_seqs,
                "ssm: q_start [n_seqs + 1], slots and fresh [n_seqs]");
  const auto* q = seqs.q_start.as<const int32_t>();
  const auto* slot = seqs.slots.as<const int32_t>();
  const auto* fresh = seqs.fresh.as<const int32_t>();
  std::vector<SeqRange> out(static_cast<size_t>(seqs.n_seqs));
  for (int s = 0; s < seqs.n_seqs; ++s) {
    SeqRange& r = out[static_cast<size_t>(s)];
    r = {q[s], q[s + 1], slot[s], fresh[s] != 0};
    BRIGADE_CHECK(r.begin >= 0 && r.begin <= r.end && r.end <= n_rows, "ssm: sequence rows inside the step");
    BRIGADE_CHECK(r.slot >= 0 && r.slot < n_slots, "ssm: state slot inside the state tensor");
  }
  if (seqs.save_rows.empty()) return out;
  BRIGADE_CHECK(seqs.save_rows.numel() == seqs.n_seqs && seqs.save_slots.numel() == seqs.n_seqs,
                "ssm: save_rows and save_slots [n_seqs]");
  const auto* save_rows = seqs.save_rows.as<const int32_t>();
  const auto* save_slots = seqs.save_slots.as<const int32_t>();
  for (int s = 0; s < seqs.n_seqs; ++s) {
    SeqRange& r = out[static_cast<size_t>(s)];
    if (save_rows[s] <= 0) continue;
    BRIGADE_CHECK(save_rows[s] <= r.end - r.begin, "ssm: a snapshot after a row of its sequence");
    BRIGADE_CHECK(save_slots[s] >= 0 && save_slots[s] < n_slots && save_slots[s] != r.slot,
                  "ssm: a snapshot's slot inside the state tensor and not its sequence's");
    r.save_row = r.begin + save_rows[s] - 1;
    r.save_slot = save_slots[s];
  }
  return out;
}

// The causal depthwise convolution both ops run: channel x of row r convolves input(r, x) (the
// K - 1 inputs before r taken from the sequence's state slot, zeros when fresh) and output(r, x,
// acc) writes the sum (bias included). conv_state [slots, K - 1, C] then holds the last inputs.
template <typename Input, typename Output>
void causal_conv(const CpuContext& c, int64_t n, int64_t ch, const Tensor& weight, const Tensor& bias,
                 const SsmSeqs& seqs, const Tensor& conv_state, Input input, Output output) {
  const int64_t k = ch > 0 ? weight.numel() / ch : 0, keep = k - 1;
  BRIGADE_CHECK(weight.dtype == DType::f32 && k >= 1 && weight.numel() == ch * k, "ssm_conv / short_conv: weight [C, kernel] f32");
  BRIGADE_CHECK(bias.empty() || (bias.dtype == DType::f32 && bias.numel() == ch), "ssm_conv / short_conv: bias [C] f32");
  BRIGADE_CHECK(conv_state.dtype == DType::f32 && conv_state.row_numel() == keep * ch,
                "ssm_conv / short_conv: conv_state [slots, kernel - 1, C] f32");
  const std::vector<SeqRange> ranges = seq_ranges(seqs, n, conv_state.dim(0));
  const float* w = weight.as<const float>();
  const float* b = bias.empty() ? nullptr : bias.as<const float>();
  float* states = conv_state.as<float>();
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (ch + kBlock - 1) / kBlock;
  c.pool->parallel_for(static_cast<int64_t>(ranges.size()) * blocks, 1, [&](int64_t lo, int64_t hi, int) {
    std::vector<float> window(static_cast<size_t>(k * kBlock));
    for (int64_t task = lo; task < hi; ++task) {
      const SeqRange& r = ranges[static_cast<size_t>(task / blocks)];
      const int64_t c0 = task % blocks * kBlock, c1 = std::min(ch, c0 + kBlock), cw = c1 - c0;
      float* st = states + static_cast<int64_t>(r.slot) * keep * ch;
      // window row j (j < keep) holds the input keep - j steps back, row keep the current one.
      for (int64_t j = 0; j < keep; ++j)
        for (int64_t x = 0; x < cw; ++x) window[static_cast<size_t>(j * kBlock + x)] = r.fresh ? 0.0f : st[j * ch + c0 + x];
      for (int64_t row = r.begin; row < r.end; ++row) {
        for (int64_t x = 0; x < cw; ++x) window[static_cast<size_t>(keep * kBlock + x)] = input(row, c0 + x);
        for (int64_t x = 0; x < cw; ++x) {
          const float* wc = w + (c0 + x) * k;
          float acc = b ? b[c0 + x] : 0.0f;
          for (int64_t j = 0; j < k; ++j) acc += wc[j] * window[static_cast<size_t>(j * kBlock + x)];
          output(row, c0 + x, acc);
        }
        for (int64_t j = 0; j < keep; ++j)
          std::memcpy(&window[static_cast<size_t>(j * kBlock)], &window[static_cast<size_t>((j + 1) * kBlock)],
                      static_cast<size_t>(cw) * sizeof(float));
        if (row == r.save_row) {  // the snapshot: the last keep inputs up to this row
          float* sv = states + static_cast<int64_t>(r.save_slot) * keep * ch;
          for (int64_t j = 0; j < keep; ++j)
            std::memcpy(sv + j * ch + c0, &window[static_cast<size_t>(j * kBlock)], static_cast<size_t>(cw) * sizeof(float));
        }
      }
      for (int64_t j = 0; j < keep; ++j)
        std::memcpy(st + j * ch + c0, &window[static_cast<size_t>(j * kBlock)], static_cast<size_t>(cw) * sizeof(float));
    }
  });
}

}  // namespace

void ssm_conv(const CpuContext& c, const Tensor& in, int64_t col, const Tensor& weight, const Tensor& bias,
              const SsmSeqs& seqs, const Tensor& conv_state, const Tensor& out) {
  const int64_t n = in.dim(0), width = in.row_numel(), ch = out.row_numel();
  BRIGADE_CHECK(in.dtype == DType::f32 && out.dtype == DType::f32 && out.numel() == n * ch && col >= 0 &&
                    col + ch <= width,
                "ssm_conv: in [n, >= col + C] and out [n, C] f32");
  const float* src = in.as<const float>() + col;  // row r's channels at src + r * width
  float* dst = out.as<float>();
  causal_conv(
      c, n, ch, weight, bias, seqs, conv_state, [&](int64_t row, int64_t x) { return src[row * width + x]; },
      [&](int64_t row, int64_t x, float acc) { dst[row * ch + x] = silu(acc); });
}

void short_conv(const CpuContext& c, const Tensor& in, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                const Tensor& conv_state, const Tensor& out) {
  const int64_t n = in.dim(0), ch = out.row_numel();
  BRIGADE_CHECK(in.dtype == DType::f32 && out.dtype == DType::f32 && out.numel() == n * ch && in.numel() == n * 3 * ch,
                "short_conv: in [n, 3 C] (B | C | x) and out [n, C] f32");
  const float* bcx = in.as<const float>();  // row r: B at bcx + 3 C r, C at + C, x at + 2 C
  float* dst = out.as<float>();
  causal_conv(
      c, n, ch, weight, bias, seqs, conv_state,
      [&](int64_t row, int64_t x) { return bcx[row * 3 * ch + x] * bcx[row * 3 * ch + 2 * ch + x]; },
      [&](int64_t row, int64_t x, float acc) { dst[row * ch + x] = bcx[row * 3 * ch + ch + x] * acc; });
}

void ssm_scan(const CpuContext& c, const Tensor& proj, const Tensor& xbc, const SsmLayout& l, const SsmParams& p,
              const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = proj.dim(0), width = l.proj_width(), ch = l.conv_dim(), d_inner = l.d_inner();
  const int64_t heads = l.n_heads, hd = l.head_dim, ns = l.state_size, groups = l.n_groups;
  BRIGADE_CHECK(proj.dtype == DType::f32 && xbc.dtype == DType::f32 && out.dtype == DType::f32 &&
                    proj.numel() == n * width && xbc.numel() == n * ch && out.numel() == n * d_inner,
                "ssm_scan: proj [n, proj_width], xbc [n, conv_dim] and out [n, d_inner] f32");
  BRIGADE_CHECK(groups >= 1 && heads % groups == 0, "ssm_scan: heads a multiple of groups");
  BRIGADE_CHECK(p.a.numel() == heads && p.d.numel() == heads && p.dt_bias.numel() == heads &&
                    p.a.dtype == DType::f32 && p.d.dtype == DType::f32 && p.dt_bias.dtype == DType::f32,
                "ssm_scan: A, D and dt_bias [heads] f32");
  BRIGADE_CHECK(p.norm_weight.empty() || (p.norm_weight.dtype == DType::f32 && p.norm_weight.numel() == d_inner),
                "ssm_scan: norm weight [d_inner] f32");
  BRIGADE_CHECK(state.dtype == DType::f32 && state.row_numel() == heads * hd * ns,
                "ssm_scan: state [slots, heads, head_dim, state_size] f32");
  const std::vector<SeqRange> ranges = seq_ranges(seqs, n, state.dim(0));
  const float* pr = proj.as<const float>();
  const float* xb = xbc.as<const float>();
  const float* a = p.a.as<const float>();
  const float* dskip = p.d.as<const float>();
  const float* dt_bias = p.dt_bias.as<const float>();
  float* y = out.as<float>();
  float* st_all = state.as<float>();
  const int64_t per_group = heads / groups;
  const float dt_max = p.dt_max > 0.0f ? p.dt_max : INFINITY;
  c.pool->parallel_for(static_cast<int64_t>(ranges.size()) * heads, 1, [&](int64_t lo, int64_t hi, int) {
    for (int64_t task = lo; task < hi; ++task) {
      const SeqRange& r = ranges[static_cast<size_t>(task / heads)];
      const int64_t h = task % heads, g = h / per_group;
      float* st = st_all + (static_cast<int64_t>(r.slot) * heads + h) * hd * ns;
      if (r.fresh) std::fill(st, st + hd * ns, 0.0f);
      for (int64_t row = r.begin; row < r.end; ++row) {
        const float dt = std::clamp(softplus(pr[row * width + d_inner + ch + h] + dt_bias[h]), p.dt_min, dt_max);
        const float decay = std::exp(dt * a[h]);
        const float* x = xb + row * ch + h * hd;
        const float* bv = xb + row * ch + d_inner + g * ns;
        const float* cv = xb + row * ch + d_inner + groups * ns + g * ns;
        float* yr = y + row * d_inner + h * hd;
        for (int64_t i = 0; i < hd; ++i) {  // S_i = decay S_i + (dt x_i) B;  y_i = S_i . C + D x_i
          float* s = st + i * ns;
          c.kernels->scale_axpy(s, decay, dt * x[i], bv, ns);
          yr[i] = c.kernels->dot(s, cv, ns) + dskip[h] * x[i];
        }
        if (row == r.save_row)
          std::copy(st, st + hd * ns, st_all + (static_cast<int64_t>(r.save_slot) * heads + h) * hd * ns);
      }
    }
  });
  // y * silu(z), RMS-normalised over groups of d_inner / G when there is a norm weight.
  const float* nw = p.norm_weight.empty() ? nullptr : p.norm_weight.as<const float>();
  const int64_t gsize = d_inner / groups;
  c.pool->parallel_for(n, std::max<int64_t>(1, 4096 / d_inner), [&](int64_t lo, int64_t hi, int) {
    for (int64_t row = lo; row < hi; ++row) {
      float* yr = y + row * d_inner;
      const float* z = pr + row * width;
      for (int64_t i = 0; i < d_inner; ++i) yr[i] *= silu(z[i]);
      if (!nw) continue;
      for (int64_t g0 = 0; g0 < d_inner; g0 += gsize) {
        float sq = 0.0f;
        for (int64_t i = g0; i < g0 + gsize; ++i) sq += yr[i] * yr[i];
        const float inv = 1.0f / std::sqrt(sq / static_cast<float>(gsize) + p.norm_eps);
        for (int64_t i = g0; i < g0 + gsize; ++i) yr[i] = nw[i] * (yr[i] * inv);
      }
    }
  });
}

void ssm_scan_diag(const CpuContext& c, const Tensor& x, const Tensor& dt_in, const Tensor& b, const Tensor& cm,
                   const Tensor& z, int64_t z_col, const Tensor& a, const Tensor& skip, const SsmSeqs& seqs,
                   const Tensor& state, const Tensor& out) {
  const int64_t n = x.dim(0), dim = x.row_numel(), ns = b.row_numel(), zw = z.row_numel();
  BRIGADE_CHECK(x.dtype == DType::f32 && dt_in.dtype == DType::f32 && b.dtype == DType::f32 && cm.dtype == DType::f32 &&
                    z.dtype == DType::f32 && out.dtype == DType::f32,
                "ssm_scan_diag: activations f32");
  BRIGADE_CHECK(dt_in.numel() == n * dim && out.numel() == n * dim && b.numel() == n * ns && cm.numel() == n * ns &&
                    z.dim(0) == n && z_col >= 0 && z_col + dim <= zw,
                "ssm_scan_diag: x, dt_in, out [n, D], b and c [n, N], z [n, >= z_col + D]");
  BRIGADE_CHECK(a.dtype == DType::f32 && a.numel() == dim * ns && skip.dtype == DType::f32 && skip.numel() == dim,
                "ssm_scan_diag: a [D, N] and skip [D] f32");
  BRIGADE_CHECK(state.dtype == DType::f32 && state.row_numel() == dim * ns, "ssm_scan_diag: state [slots, D, N] f32");
  const std::vector<SeqRange> ranges = seq_ranges(seqs, n, state.dim(0));
  const float *xp = x.as<const float>(), *dtp = dt_in.as<const float>(), *bp = b.as<const float>();
  const float *cp = cm.as<const float>(), *zp = z.as<const float>(), *ap = a.as<const float>();
  const float* dp = skip.as<const float>();
  float* yp = out.as<float>();
  float* st_all = state.as<float>();
  // Tasks: (sequence, block of channels); each channel's state row is its own.
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (dim + kBlock - 1) / kBlock;
  c.pool->parallel_for(static_cast<int64_t>(ranges.size()) * blocks, 1, [&](int64_t lo, int64_t hi, int) {
    float dts[kBlock];
    for (int64_t task = lo; task < hi; ++task) {
      const SeqRange& r = ranges[static_cast<size_t>(task / blocks)];
      const int64_t d0 = task % blocks * kBlock, nd = std::min(dim, d0 + kBlock) - d0;
      float* st = st_all + static_cast<int64_t>(r.slot) * dim * ns;
      if (r.fresh) std::fill(st + d0 * ns, st + (d0 + nd) * ns, 0.0f);
      for (int64_t row = r.begin; row < r.end; ++row) {
        for (int64_t i = 0; i < nd; ++i) dts[i] = softplus(dtp[row * dim + d0 + i]);
        const float* xr = xp + row * dim + d0;
        float* yr = yp + row * dim + d0;
        // S_d = exp(dt_d A_d) S_d + (dt_d x_d) B, y_d = S_d . C for the block's channels.
        c.kernels->ssm_diag_rows(st + d0 * ns, ap + d0 * ns, dts, xr, bp + row * ns, cp + row * ns, nd, ns, yr);
        for (int64_t i = 0; i < nd; ++i) yr[i] = (yr[i] + dp[d0 + i] * xr[i]) * silu(zp[row * zw + z_col + d0 + i]);
        if (row == r.save_row)
          std::copy(st + d0 * ns, st + (d0 + nd) * ns, st_all + static_cast<int64_t>(r.save_slot) * dim * ns + d0 * ns);
      }
    }
  });
}

// out [n] = x [n] * scale / sqrt(|x|^2 + 1e-6): FLA's l2norm of the delta rules' q and k (in f32,
// as transformers' torch fallbacks after their casts), times q's N^-1/2.
void l2_normalized(const float* x, int64_t n, float scale, float* out) {
  float sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) sq += x[i] * x[i];
  const float s = scale / std::sqrt(sq + 1e-6f);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

// Gated DeltaNet (Backend::gated_delta), as transformers' torch_recurrent_gated_delta_rule runs
// it token by token, with the state kept transposed, S [P, N] per value head: row j of S is
// value channel j's, so each row updates alone, S_j = decay S_j + delta_j k with delta_j =
// beta (v_j - decay S_j . k), and o_j = S_j . q (one dot, one scaled axpy, one dot per row).
// Tasks: (sequence, value head); the gated RMSNorm follows over all rows.
void gated_delta(const CpuContext& c, const Tensor& qkv, const Tensor& proj, int64_t z_col, const SsmLayout& l,
                 const SsmParams& p, const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = qkv.dim(0), ch = l.conv_dim(), heads = l.n_heads, pv = l.head_dim, nk = l.state_size;
  const int64_t groups = l.n_groups, vd = l.d_inner(), width = proj.row_numel();
  BRIGADE_CHECK(qkv.dtype == DType::f32 && proj.dtype == DType::f32 && out.dtype == DType::f32 && qkv.numel() == n * ch &&
                    proj.dim(0) == n && z_col >= 0 && z_col + vd + 2 * heads <= width && out.numel() == n * vd,
                "gated_delta: qkv [n, conv_dim], proj [n, >= z_col + H P + 2 H] and out [n, H P] f32");
  BRIGADE_CHECK(groups >= 1 && heads % groups == 0, "gated_delta: value heads a multiple of key heads");
  BRIGADE_CHECK(p.a.dtype == DType::f32 && p.a.numel() == heads && p.dt_bias.dtype == DType::f32 &&
                    p.dt_bias.numel() == heads && p.norm_weight.dtype == DType::f32 && p.norm_weight.numel() == pv,
                "gated_delta: a and dt_bias [H], norm weight [P] f32");
  BRIGADE_CHECK(state.dtype == DType::f32 && state.row_numel() == heads * pv * nk,
                "gated_delta: state [slots, H, P, N] f32");
  const std::vector<SeqRange> ranges = seq_ranges(seqs, n, state.dim(0));
  const float* x_all = qkv.as<const float>();
  const float* pr = proj.as<const float>();
  const float* a = p.a.as<const float>();
  const float* dt_bias = p.dt_bias.as<const float>();
  float* y = out.as<float>();
  float* st_all = state.as<float>();
  const int64_t per_key = heads / groups, kd = groups * nk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(nk));
  c.pool->parallel_for(static_cast<int64_t>(ranges.size()) * heads, 1, [&](int64_t lo, int64_t hi, int) {
    std::vector<float> q(static_cast<size_t>(nk)), k(static_cast<size_t>(nk));
    for (int64_t task = lo; task < hi; ++task) {
      const SeqRange& r = ranges[static_cast<size_t>(task / heads)];
      const int64_t h = task % heads, g = l.tiled_heads ? h % groups : h / per_key;
      float* st = st_all + (static_cast<int64_t>(r.slot) * heads + h) * pv * nk;
      if (r.fresh) std::fill(st, st + pv * nk, 0.0f);
      for (int64_t row = r.begin; row < r.end; ++row) {
        const float* xr = x_all + row * ch;
        l2_normalized(xr + g * nk, nk, q_scale, q.data());
        l2_normalized(xr + kd + g * nk, nk, 1.0f, k.data());
        const float* v = xr + 2 * kd + h * pv;
        const float* zba = pr + row * width + z_col;
        const float beta = 1.0f / (1.0f + std::exp(-zba[vd + h]));
        const float decay = std::exp(a[h] * softplus(zba[vd + heads + h] + dt_bias[h]));
        float* yr = y + row * vd + h * pv;
        for (int64_t j = 0; j < pv; ++j) {
          float* s = st + j * nk;
          const float delta = beta * (v[j] - decay * c.kernels->dot(s, k.data(), nk));
          c.kernels->scale_axpy(s, decay, delta, k.data(), nk);
          yr[j] = c.kernels->dot(s, q.data(), nk);
        }
        if (row == r.save_row)
          std::copy(st, st + pv * nk, st_all + (static_cast<int64_t>(r.save_slot) * heads + h) * pv * nk);
      }
    }
  });
  // Per value head: RMSNorm(o_h) * weight * silu(z_h) (Qwen3NextRMSNormGated: the norm before the gate).
  const float* nw = p.norm_weight.as<const float>();
  c.pool->parallel_for(n, std::max<int64_t>(1, 4096 / vd), [&](int64_t lo, int64_t hi, int) {
    for (int64_t row = lo; row < hi; ++row) {
      const float* z = pr + row * width + z_col;
      for (int64_t h = 0; h < heads; ++h) {
        float* o = y + row * vd + h * pv;
        float sq = 0.0f;
        for (int64_t j = 0; j < pv; ++j) sq += o[j] * o[j];
        const float inv = 1.0f / std::sqrt(sq / static_cast<float>(pv) + p.norm_eps);
        for (int64_t j = 0; j < pv; ++j) o[j] = nw[j] * (o[j] * inv) * silu(z[h * pv + j]);
      }
    }
  });
}

// Kimi Delta Attention (Backend::kda), as transformers' recurrent_kimi_delta_attention runs it
// token by token, with the state kept transposed as gated_delta's, S [P, N] per head: row j of S
// is value channel j's, so each row updates alone, S_j = decay * S_j (per key channel), delta_j =
// beta (v_j - S_j . k), S_j += delta_j k, o_j = S_j . q. Tasks: (sequence, head).
void kda(const CpuContext& c, const Tensor& qkv, const Tensor& f, const Tensor& beta, const SsmLayout& l,
         const SsmParams& p, const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = qkv.dim(0), heads = l.n_heads, pv = l.head_dim, nk = l.state_size, kd = heads * nk;
  const int64_t ch = 2 * kd + heads * pv, vd = l.d_inner();
  BRIGADE_CHECK(l.n_groups == l.n_heads, "kda: one key head per value head (n_groups = n_heads)");
  BRIGADE_CHECK(qkv.dtype == DType::f32 && f.dtype == DType::f32 && beta.dtype == DType::f32 && out.dtype == DType::f32 &&
                    qkv.numel() == n * ch && f.numel() == n * kd && beta.numel() == n * heads && out.numel() == n * vd,
                "kda: qkv [n, 2 H N + H P], f [n, H N], beta [n, H] and out [n, H P] f32");
  BRIGADE_CHECK(p.a.dtype == DType::f32 && p.a.numel() == heads && p.dt_bias.dtype == DType::f32 && p.dt_bias.numel() == kd,
                "kda: a [H] and dt_bias [H N] f32");
  BRIGADE_CHECK(state.dtype == DType::f32 && state.row_numel() == heads * pv * nk, "kda: state [slots, H, P, N] f32");
  const std::vector<SeqRange> ranges = seq_ranges(seqs, n, state.dim(0));
  const float* x_all = qkv.as<const float>();
  const float* f_all = f.as<const float>();
  const float* b_all = beta.as<const float>();
  const float* a = p.a.as<const float>();
  const float* dt_bias = p.dt_bias.as<const float>();
  float* y = out.as<float>();
  float* st_all = state.as<float>();
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(nk));
  c.pool->parallel_for(static_cast<int64_t>(ranges.size()) * heads, 1, [&](int64_t lo, int64_t hi, int) {
    std::vector<float> q(static_cast<size_t>(nk)), k(static_cast<size_t>(nk)), decay(static_cast<size_t>(nk));
    for (int64_t task = lo; task < hi; ++task) {
      const SeqRange& r = ranges[static_cast<size_t>(task / heads)];
      const int64_t h = task % heads;
      float* st = st_all + (static_cast<int64_t>(r.slot) * heads + h) * pv * nk;
      if (r.fresh) std::fill(st, st + pv * nk, 0.0f);
      for (int64_t row = r.begin; row < r.end; ++row) {
        const float* xr = x_all + row * ch;
        l2_normalized(xr + h * nk, nk, q_scale, q.data());
        l2_normalized(xr + kd + h * nk, nk, 1.0f, k.data());
        const float* fr = f_all + row * kd + h * nk;
        for (int64_t i = 0; i < nk; ++i)
          decay[static_cast<size_t>(i)] = std::exp(a[h] * softplus(fr[i] + dt_bias[h * nk + i]));
        const float* v = xr + 2 * kd + h * pv;
        const float b = 1.0f / (1.0f + std::exp(-b_all[row * heads + h]));
        float* yr = y + row * vd + h * pv;
        for (int64_t j = 0; j < pv; ++j) {
          float* s = st + j * nk;
          for (int64_t i = 0; i < nk; ++i) s[i] *= decay[static_cast<size_t>(i)];
          const float delta = b * (v[j] - c.kernels->dot(s, k.data(), nk));
          c.kernels->scale_axpy(s, 1.0f, delta, k.data(), nk);
          yr[j] = c.kernels->dot(s, q.data(), nk);
        }
        if (row == r.save_row)
          std::copy(st, st + pv * nk, st_all + (static_cast<int64_t>(r.save_slot) * heads + h) * pv * nk);
      }
    }
  });
}

// Lightning attention (Backend::lightning_attention), as transformers' MiniMaxLightningAttention
// decodes, S = exp(-slope) S + k^T v, o = q S, token by token, with the state kept transposed as
// kda's, S [P, N] per head: row j of S is value channel j's, S_j = decay S_j + v_j k, o_j = S_j . q.
// (transformers' prefill runs the same sum in blocks, the decays as powers of exp(-slope): equal up
// to rounding.) Tasks: (sequence, head).
void lightning_attention(const CpuContext& c, const Tensor& qkv, const Tensor& decay, const SsmLayout& l,
                         const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = qkv.dim(0), heads = l.n_heads, d = l.head_dim, vd = l.d_inner();
  BRIGADE_CHECK(l.n_groups == l.n_heads && l.state_size == l.head_dim,
                "lightning_attention: one key head per value head of as many channels (n_groups = n_heads, N = P)");
  BRIGADE_CHECK(qkv.dtype == DType::f32 && out.dtype == DType::f32 && qkv.numel() == n * 3 * vd && out.numel() == n * vd,
                "lightning_attention: qkv [n, 3 H D] and out [n, H D] f32");
  BRIGADE_CHECK(decay.dtype == DType::f32 && decay.numel() == heads, "lightning_attention: decay [H] f32");
  BRIGADE_CHECK(state.dtype == DType::f32 && state.row_numel() == heads * d * d,
                "lightning_attention: state [slots, H, D, D] f32");
  const std::vector<SeqRange> ranges = seq_ranges(seqs, n, state.dim(0));
  const float* x_all = qkv.as<const float>();
  const float* dec = decay.as<const float>();
  float* y = out.as<float>();
  float* st_all = state.as<float>();
  c.pool->parallel_for(static_cast<int64_t>(ranges.size()) * heads, 1, [&](int64_t lo, int64_t hi, int) {
    std::vector<float> qkv_h(static_cast<size_t>(3 * d));
    for (int64_t task = lo; task < hi; ++task) {
      const SeqRange& r = ranges[static_cast<size_t>(task / heads)];
      const int64_t h = task % heads;
      float* st = st_all + (static_cast<int64_t>(r.slot) * heads + h) * d * d;
      if (r.fresh) std::fill(st, st + d * d, 0.0f);
      for (int64_t row = r.begin; row < r.end; ++row) {
        const float* xr = x_all + row * 3 * vd + h * 3 * d;
        for (int64_t i = 0; i < 3 * d; ++i) qkv_h[static_cast<size_t>(i)] = silu(xr[i]);
        const float *q = qkv_h.data(), *k = q + d, *v = k + d;
        float* yr = y + row * vd + h * d;
        for (int64_t j = 0; j < d; ++j) {
          float* s = st + j * d;
          c.kernels->scale_axpy(s, dec[h], v[j], k, d);
          yr[j] = c.kernels->dot(s, q, d);
        }
        if (row == r.save_row)
          std::copy(st, st + d * d, st_all + (static_cast<int64_t>(r.save_slot) * heads + h) * d * d);
      }
    }
  });
}

// x *= sigmoid(gate), both [n, d] f32.
void sigmoid_mul(const CpuContext& c, const Tensor& x, const Tensor& gate) {
  BRIGADE_CHECK(x.dtype == DType::f32 && gate.dtype == DType::f32 && x.numel() == gate.numel(),
                "sigmoid_mul: x and gate of one shape, f32");
  float* xp = x.as<float>();
  const float* gp = gate.as<const float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) xp[i] *= 1.0f / (1.0f + std::exp(-gp[i]));
  });
}

// torch's relu(x) ** 2 (transformers' ReLUSquaredActivation), x f32.
void relu_squared(const CpuContext& c, const Tensor& x) {
  BRIGADE_CHECK(x.dtype == DType::f32, "relu_squared: x f32");
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float r = p[i] > 0.0f ? p[i] : 0.0f;
      p[i] = r * r;
    }
  });
}

}  // namespace brigade::cpu
