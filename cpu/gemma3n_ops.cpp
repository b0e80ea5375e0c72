// The CPU side of Gemma 3n's ops (Backend::supports_altup; core/backend.h): AltUp's prediction
// and correction, the magnitude match of its streams, the gaussian top-k of the sparse MLPs,
// the weightless v norm and the gated per-layer input. Activations f32; rows split over the pool.
#include <cmath>

#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

// c[o] = sum_k coefs[o][k] tanh(router[k]) (+ bias) for o < n_out, k < n_in: the AltUp
// coefficients of one row from its router logits.
void altup_coefs(const float* router, const float* coefs, int n_in, int n_out, float bias, float* c) {
  float m[64];
  for (int k = 0; k < n_in; ++k) m[k] = std::tanh(router[k]);
  for (int o = 0; o < n_out; ++o) {
    float s = 0.0f;
    for (int k = 0; k < n_in; ++k) s += coefs[o * n_in + k] * m[k];
    c[o] = s + bias;
  }
}

}  // namespace

void altup_predict(const CpuContext& c, const Tensor& streams, const Tensor& router, const Tensor& coefs,
                   const Tensor& out) {
  const int64_t n_streams = streams.dim(0), n = streams.dim(1), d = streams.dim(2);
  BRIGADE_CHECK(streams.dtype == DType::f32 && out.dtype == DType::f32 && router.dtype == DType::f32 &&
                    coefs.dtype == DType::f32 && out.numel() == streams.numel() && n_streams <= 8 &&
                    router.numel() == n * n_streams && coefs.numel() == n_streams * n_streams * n_streams,
                "altup_predict: streams [N <= 8, n, d] and out f32, router [n, N], coefs [N * N, N] f32");
  const float* s = streams.as<const float>();
  float* o = out.as<float>();
  const int ns = static_cast<int>(n_streams);
  c.pool->parallel_for(n, 4, [&](int64_t b, int64_t e, int) {
    float k[64];
    for (int64_t t = b; t < e; ++t) {
      altup_coefs(router.as<const float>() + t * ns, coefs.as<const float>(), ns, ns * ns, 0.0f, k);
      for (int i = 0; i < ns; ++i) {
        float* dst = o + (i * n + t) * d;
        const float* own = s + (i * n + t) * d;
        for (int64_t x = 0; x < d; ++x) {
          float acc = 0.0f;
          for (int j = 0; j < ns; ++j) acc += k[i * ns + j] * s[(j * n + t) * d + x];
          dst[x] = own[x] + acc;
        }
      }
    }
  });
}

void altup_correct(const CpuContext& c, const Tensor& pred, const Tensor& activated, const Tensor& router,
                   const Tensor& coefs, int active) {
  const int64_t n_streams = pred.dim(0), n = pred.dim(1), d = pred.dim(2);
  BRIGADE_CHECK(pred.dtype == DType::f32 && activated.dtype == DType::f32 && router.dtype == DType::f32 &&
                    coefs.dtype == DType::f32 && activated.numel() == n * d && n_streams <= 8 &&
                    router.numel() == n * n_streams && coefs.numel() == n_streams * n_streams && active >= 0 &&
                    active < n_streams,
                "altup_correct: pred [N <= 8, n, d], activated [n, d], router [n, N] f32, coefs [N, N] f32");
  float* p = pred.as<float>();
  const float* a = activated.as<const float>();
  const int ns = static_cast<int>(n_streams);
  c.pool->parallel_for(n, 4, [&](int64_t b, int64_t e, int) {
    float k[8];
    for (int64_t t = b; t < e; ++t) {
      altup_coefs(router.as<const float>() + t * ns, coefs.as<const float>(), ns, ns, 1.0f, k);
      float* act = p + (active * n + t) * d;
      for (int64_t x = 0; x < d; ++x) {
        const float innovation = a[t * d + x] - act[x];
        for (int i = 0; i < ns; ++i) p[(i * n + t) * d + x] += k[i] * innovation;
      }
    }
  });
}

void match_rms(const CpuContext& c, const Tensor& x, const Tensor& ref, float eps) {
  BRIGADE_CHECK(x.dtype == DType::f32 && ref.dtype == DType::f32 && x.numel() == ref.numel() && x.ndim == 2,
                "match_rms: x and ref [n, d] f32");
  const int64_t n = x.dim(0), d = x.dim(1);
  c.pool->parallel_for(n, 4, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* xr = x.as<float>() + t * d;
      const float* rr = ref.as<const float>() + t * d;
      float sx = 0.0f, sr = 0.0f;
      for (int64_t i = 0; i < d; ++i) sx += xr[i] * xr[i], sr += rr[i] * rr[i];
      const float target = std::sqrt(sr / static_cast<float>(d));
      const float have = std::sqrt(std::max(sx / static_cast<float>(d), eps));
      for (int64_t i = 0; i < d; ++i) xr[i] = xr[i] * target / have;
    }
  });
}

void gaussian_topk(const CpuContext& c, const Tensor& x, int64_t cols, float k) {
  BRIGADE_CHECK(x.dtype == DType::f32 && x.ndim == 2 && cols > 0 && cols <= x.dim(1),
                "gaussian_topk: x [n, >= cols] f32");
  const int64_t n = x.dim(0), w = x.dim(1);
  c.pool->parallel_for(n, 4, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* r = x.as<float>() + t * w;
      double sum = 0.0;
      for (int64_t i = 0; i < cols; ++i) sum += r[i];
      const float mean = static_cast<float>(sum / static_cast<double>(cols));
      double var = 0.0;
      for (int64_t i = 0; i < cols; ++i) var += static_cast<double>(r[i] - mean) * (r[i] - mean);
      const float std_dev = static_cast<float>(std::sqrt(var / static_cast<double>(cols)));
      const float cutoff = mean + std_dev * k;
      for (int64_t i = 0; i < cols; ++i) r[i] = std::max(r[i] - cutoff, 0.0f);
    }
  });
}

void v_head_norm(const CpuContext& c, const Tensor& qkv, const QkvLayout& l, float eps) {
  BRIGADE_CHECK(qkv.dtype == DType::f32 && qkv.row_numel() == l.row_width(), "v_head_norm: qkv [n, row_width] f32");
  const int64_t n = qkv.dim(0), hd = l.head_dim, v0 = l.q_width() + l.kv_width();
  c.pool->parallel_for(n * l.n_kv_heads, 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* v = qkv.as<float>() + (i / l.n_kv_heads) * l.row_width() + v0 + (i % l.n_kv_heads) * hd;
      float ss = 0.0f;
      for (int64_t j = 0; j < hd; ++j) ss += v[j] * v[j];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(hd) + eps);
      for (int64_t j = 0; j < hd; ++j) v[j] *= inv;
    }
  });
}

void gelu_tanh_gate(const CpuContext& c, const Tensor& x, const Tensor& y) {
  BRIGADE_CHECK(x.dtype == DType::f32 && y.dtype == DType::f32 && x.numel() == y.numel(),
                "gelu_tanh_gate: x and y of one shape, f32");
  float* xp = x.as<float>();
  const float* yp = y.as<const float>();
  c.pool->parallel_for(x.numel(), 16384,  // in place: each element read before it is written
                       [&](int64_t b, int64_t e, int) { c.kernels->gelu_tanh_mul(xp + b, yp + b, xp + b, e - b); });
}

}  // namespace brigade::cpu
