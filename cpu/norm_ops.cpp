// Normalisation and rotary ops: rms_norm, add_rms_norm, qk_head_norm, rope.
//
// Arithmetic follows llama2.c's run.c in f32 (ss = sum(x*x) / d + eps; x * (1 / sqrtf(ss)) * w;
// rope angle = pos * inv_freq in f32 through cosf/sinf) so that greedy decoding reproduces it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

// Rows per parallel chunk: enough elements that a chunk outweighs the hand-off.
int64_t row_grain(int64_t row_elems) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elems)); }

void rms_row(const float* x, const float* w, float eps, float* out, int64_t d) {
  float ss = 0.0f;
  for (int64_t j = 0; j < d; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(d);
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  for (int64_t j = 0; j < d; ++j) out[j] = w[j] * (ss * x[j]);
}

}  // namespace

const float* as_f32(const CpuContext& c, const Tensor& t, float* dst) {
  if (t.dtype == DType::f32) return t.as<const float>();
  c.kernels->to_f32(t.data, t.dtype, dst, t.numel());
  return dst;
}

void rms_norm(const CpuContext& c, const Tensor& x, const Tensor& weight, float eps,
              const Tensor& out) {
  const int64_t n = x.dim(0), d = x.row_numel();
  BRIGADE_CHECK(weight.numel() == d && out.numel() == x.numel(), "rms_norm: weight [d], out [n, d]");
  std::vector<float> wbuf(static_cast<size_t>(d));
  const float* w = as_f32(c, weight, wbuf.data());
  const float* xp = x.as<const float>();
  float* op = out.as<float>();
  c.pool->parallel_for(n, row_grain(d), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) rms_row(xp + i * d, w, eps, op + i * d, d);
  });
}

void add_rms_norm(const CpuContext& c, const Tensor& residual, const Tensor& x,
                  const Tensor& weight, float eps, const Tensor& out) {
  const int64_t n = residual.dim(0), d = residual.row_numel();
  BRIGADE_CHECK(x.numel() == residual.numel() && out.numel() == residual.numel() &&
                    weight.numel() == d, "add_rms_norm: residual, x, out [n, d]; weight [d]");
  std::vector<float> wbuf(static_cast<size_t>(d));
  const float* w = as_f32(c, weight, wbuf.data());
  float* rp = residual.as<float>();
  const float* xp = x.as<const float>();
  float* op = out.as<float>();
  c.pool->parallel_for(n, row_grain(d), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* r = rp + i * d;
      for (int64_t j = 0; j < d; ++j) r[j] += xp[i * d + j];
      rms_row(r, w, eps, op + i * d, d);
    }
  });
}

void qk_head_norm(const CpuContext& c, const Tensor& qkv, const QkvLayout& l,
                  const Tensor& q_weight, const Tensor& k_weight, float eps) {
  const int64_t n = qkv.dim(0), d = l.head_dim;
  // Whole-width weights norm q's heads together and k's together: one "head" each.
  const bool whole = q_weight.numel() == l.q_width() && k_weight.numel() == l.kv_width();
  BRIGADE_CHECK(qkv.row_numel() == l.row_width() && (whole || (q_weight.numel() == d && k_weight.numel() == d)),
                "qk_head_norm: qkv [n, row_width], weights [head_dim] or [n_heads * head_dim] and [n_kv_heads * head_dim]");
  const int64_t qd = whole ? l.q_width() : d, kd = whole ? l.kv_width() : d;
  const int qh = whole ? 1 : l.n_heads, kh = whole ? 1 : l.n_kv_heads;
  std::vector<float> qbuf(static_cast<size_t>(qd)), kbuf(static_cast<size_t>(kd));
  const float* qw = as_f32(c, q_weight, qbuf.data());
  const float* kw = as_f32(c, k_weight, kbuf.data());
  float* base = qkv.as<float>();
  c.pool->parallel_for(n, row_grain(l.row_width()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* row = base + i * l.row_width();
      for (int h = 0; h < qh; ++h) rms_row(row + h * qd, qw, eps, row + h * qd, qd);
      for (int h = 0; h < kh; ++h) {
        float* k = row + l.q_width() + h * kd;
        rms_row(k, kw, eps, k, kd);
      }
    }
  });
}

void qk_head_layer_norm(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight,
                        const Tensor& k_weight, float eps) {
  const int64_t n = qkv.dim(0), d = l.head_dim;
  BRIGADE_CHECK(qkv.dtype == DType::f32 && qkv.row_numel() == l.row_width() && q_weight.numel() == l.q_width() &&
                    k_weight.numel() == l.kv_width(),
                "qk_head_layer_norm: qkv [n, row_width] f32, weights [n_heads * head_dim] and [n_kv_heads * head_dim]");
  std::vector<float> qbuf(static_cast<size_t>(l.q_width())), kbuf(static_cast<size_t>(l.kv_width()));
  const float* qw = as_f32(c, q_weight, qbuf.data());
  const float* kw = as_f32(c, k_weight, kbuf.data());
  float* base = qkv.as<float>();
  c.pool->parallel_for(n, row_grain(l.row_width()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* row = base + i * l.row_width();  // q heads, then k heads: their weights in the same order
      for (int h = 0; h < l.n_heads; ++h) layer_norm_row(row + h * d, qw + h * d, nullptr, eps, row + h * d, d);
      for (int h = 0; h < l.n_kv_heads; ++h) {
        float* k = row + l.q_width() + h * d;
        layer_norm_row(k, kw + h * d, nullptr, eps, k, d);
      }
    }
  });
}

void qk_sum_squares(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& sums) {
  const int64_t n = qkv.dim(0);
  BRIGADE_CHECK(qkv.dtype == DType::f32 && qkv.row_numel() == l.row_width() && sums.dtype == DType::f32 &&
                    sums.numel() == 2 * n,
                "qk_sum_squares: qkv [n, row_width] f32, sums [n, 2] f32");
  const float* base = qkv.as<const float>();
  float* out = sums.as<float>();
  c.pool->parallel_for(n, row_grain(l.row_width()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float* row = base + i * l.row_width();
      float q = 0.0f, k = 0.0f;  // as rms_row sums, in order
      for (int64_t j = 0; j < l.q_width(); ++j) q += row[j] * row[j];
      for (int64_t j = 0; j < l.kv_width(); ++j) k += row[l.q_width() + j] * row[l.q_width() + j];
      out[2 * i] = q;
      out[2 * i + 1] = k;
    }
  });
}

void qk_norm_by_sums(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& sums, int64_t q_total,
                     int64_t k_total, const Tensor& q_weight, const Tensor& k_weight, float eps) {
  const int64_t n = qkv.dim(0);
  BRIGADE_CHECK(qkv.dtype == DType::f32 && qkv.row_numel() == l.row_width() && sums.dtype == DType::f32 &&
                    sums.numel() == 2 * n && q_weight.numel() == l.q_width() && k_weight.numel() == l.kv_width() &&
                    q_total >= l.q_width() && k_total >= l.kv_width(),
                "qk_norm_by_sums: qkv [n, row_width] f32, sums [n, 2] f32, weights [q_width] and [kv_width]");
  std::vector<float> qbuf(static_cast<size_t>(l.q_width())), kbuf(static_cast<size_t>(l.kv_width()));
  const float* qw = as_f32(c, q_weight, qbuf.data());
  const float* kw = as_f32(c, k_weight, kbuf.data());
  const float* in = sums.as<const float>();
  float* base = qkv.as<float>();
  c.pool->parallel_for(n, row_grain(l.row_width()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* row = base + i * l.row_width();
      const float qs = 1.0f / sqrtf(in[2 * i] / static_cast<float>(q_total) + eps);
      const float ks = 1.0f / sqrtf(in[2 * i + 1] / static_cast<float>(k_total) + eps);
      for (int64_t j = 0; j < l.q_width(); ++j) row[j] = qw[j] * (qs * row[j]);
      float* k = row + l.q_width();
      for (int64_t j = 0; j < l.kv_width(); ++j) k[j] = kw[j] * (ks * k[j]);
    }
  });
}

void attention_temperature(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& positions,
                           float floor_scale, float scale, float offset) {
  const int64_t n = qkv.dim(0), q_width = l.q_width();
  BRIGADE_CHECK(qkv.dtype == DType::f32 && qkv.row_numel() == l.row_width() && positions.numel() == n &&
                    positions.dtype == DType::i32 && floor_scale > 0.0f,
                "attention_temperature: qkv [n, row_width] f32, positions [n] i32, floor_scale > 0");
  const auto* pos = positions.as<const int32_t>();
  float* base = qkv.as<float>();
  c.pool->parallel_for(n, row_grain(l.row_width()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      // transformers: log1p(floor((pos + offset) / floor_scale)) * attn_scale + 1.0, in f32.
      const float t = std::log1p(std::floor((static_cast<float>(pos[i]) + offset) / floor_scale)) * scale + 1.0f;
      float* q = base + i * l.row_width();
      for (int64_t j = 0; j < q_width; ++j) q[j] *= t;
    }
  });
}

void rope(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, const Tensor& positions,
          const RopeConfig& cfg) {
  const int64_t n = qkv.dim(0);
  const int half = cfg.rotary_dim / 2;
  BRIGADE_CHECK(cfg.rotary_dim % 2 == 0 && cfg.rotary_dim <= l.head_dim &&
                    static_cast<int>(cfg.inv_freq.size()) == half,
                "rope: even rotary_dim <= head_dim and inv_freq [rotary_dim / 2]");
  const int64_t planes = cfg.sections.empty() ? 1 : static_cast<int64_t>(cfg.sections.size());
  BRIGADE_CHECK(qkv.row_numel() == l.row_width() && positions.numel() == n * planes,
                "rope: qkv [n, row_width], positions [n] (a plane of n per section)");
  // plane_of[f]: the plane whose positions rotate frequency pair f (RopeConfig::sections).
  std::vector<int64_t> plane_of(static_cast<size_t>(half), 0);
  if (!cfg.sections.empty()) {
    int sum = 0;
    for (int s : cfg.sections) sum += s;
    BRIGADE_CHECK(sum == half, "rope: sections sum to rotary_dim / 2");
    BRIGADE_CHECK(!cfg.interleaved || cfg.sections.size() == 3, "rope: interleaved sections are 3 (t, h, w)");
    size_t f = 0;
    for (size_t k = 0; k < cfg.sections.size(); ++k)
      for (int j = 0; j < cfg.sections[k] && f < plane_of.size(); ++j) plane_of[f++] = static_cast<int64_t>(k) * n;
    if (cfg.interleaved)
      for (int g = 0; g < half; ++g)
        plane_of[static_cast<size_t>(g)] = (g % 3 == 1 && g < 3 * cfg.sections[1])   ? n
                                           : (g % 3 == 2 && g < 3 * cfg.sections[2]) ? 2 * n
                                                                                     : 0;
  }
  const auto* pos = positions.as<const int32_t>();
  float* base = qkv.as<float>();
  const bool neox = cfg.style == RopeStyle::neox;
  // Query heads then key heads are contiguous at the start of each row.
  const int n_rot_heads = l.n_heads + l.n_kv_heads;
  c.pool->parallel_for(n, row_grain(l.row_width()), [&](int64_t b, int64_t e, int) {
    thread_local std::vector<float> cs;
    cs.resize(static_cast<size_t>(2 * half));
    for (int64_t i = b; i < e; ++i) {
      for (int f = 0; f < half; ++f) {
        const float val = static_cast<float>(pos[plane_of[static_cast<size_t>(f)] + i]) * cfg.inv_freq[static_cast<size_t>(f)];
        cs[static_cast<size_t>(2 * f)] = cosf(val) * cfg.attention_factor;
        cs[static_cast<size_t>(2 * f + 1)] = sinf(val) * cfg.attention_factor;
      }
      float* row = base + i * l.row_width();
      for (int h = 0; h < n_rot_heads; ++h) {
        float* v = row + static_cast<int64_t>(h) * l.head_dim;
        for (int f = 0; f < half; ++f) {
          const int a = neox ? f : 2 * f;
          const int bb = neox ? f + half : 2 * f + 1;
          const float fc = cs[static_cast<size_t>(2 * f)], fs = cs[static_cast<size_t>(2 * f + 1)];
          const float v0 = v[a], v1 = v[bb];
          v[a] = v0 * fc - v1 * fs;
          v[bb] = v0 * fs + v1 * fc;
        }
      }
    }
  });
}

}  // namespace brigade::cpu
