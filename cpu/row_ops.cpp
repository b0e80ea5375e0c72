// Row-wise ops: embedding, add, silu_mul, gelu_tanh_mul, gelu_mul, relu2_mul, quantize_rows_int8, xielu, scale,
// softcap, clamp, write_kv, gather_rows.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant.h"
#include "cpu/kv_int8.h"
#include "cpu/ops.h"

namespace brigade::cpu {
namespace {

int64_t row_grain(int64_t row_elems) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elems)); }

}  // namespace

void embedding(const CpuContext& c, const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t n = ids.numel(), d = table.row_numel(), vocab = table.dim(0);
  BRIGADE_CHECK(out.dtype == DType::f32 && out.numel() == n * d, "embedding: out [n, d] f32");
  const auto* id = ids.as<const int32_t>();
  const size_t row_bytes = dtype_bytes(table.dtype, d);
  const bool quantized = is_block_quantized(table.dtype);
  c.pool->parallel_for(n, row_grain(d), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      BRIGADE_CHECK(id[i] >= 0 && id[i] < vocab, "embedding: token id inside the vocabulary");
      const char* src = static_cast<const char*>(table.data) + static_cast<size_t>(id[i]) * row_bytes;
      if (quantized) quant::dequantize_row(src, table.dtype, out.as<float>() + i * d, d);
      else c.kernels->to_f32(src, table.dtype, out.as<float>() + i * d, d);
    }
  });
}

void add(const CpuContext& c, const Tensor& a, const Tensor& b) {
  BRIGADE_CHECK(a.numel() == b.numel() && a.dtype == DType::f32 && b.dtype == DType::f32,
                "add: a and b [n, d] f32");
  float* ap = a.as<float>();
  const float* bp = b.as<const float>();
  c.pool->parallel_for(a.numel(), 16384, [&](int64_t s, int64_t e, int) {
    for (int64_t i = s; i < e; ++i) ap[i] += bp[i];
  });
}

void add_row_bias(const CpuContext& c, const Tensor& x, const Tensor& bias) {
  const int64_t d = x.row_numel();
  BRIGADE_CHECK(x.dtype == DType::f32 && bias.dtype == DType::f32 && bias.numel() == d,
                "add_row_bias: x [n, d] f32, bias [d] f32");
  float* xp = x.as<float>();
  const float* bp = bias.as<const float>();
  c.pool->parallel_for(x.dim(0), std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)), [&](int64_t s, int64_t e, int) {
    for (int64_t i = s; i < e; ++i)
      for (int64_t j = 0; j < d; ++j) xp[i * d + j] += bp[j];
  });
}

namespace {

// out [n, I] = act(gate_up[:, :I]) * gate_up[:, I:], rows split over the pool; row(gate, up, out,
// I) does one row.
template <class Row>
void gated_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out, Row row) {
  const int64_t n = gate_up.dim(0), inter = gate_up.row_numel() / 2;
  BRIGADE_CHECK(gate_up.row_numel() == 2 * inter && out.numel() == n * inter && gate_up.dtype == DType::f32 &&
                    out.dtype == DType::f32,
                "silu_mul / gelu_tanh_mul: gate_up [n, 2I], out [n, I] f32");
  const float* g = gate_up.as<const float>();
  float* o = out.as<float>();
  c.pool->parallel_for(n, row_grain(inter), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) row(g + i * 2 * inter, g + i * 2 * inter + inter, o + i * inter, inter);
  });
}

}  // namespace

void silu_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out) {
  gated_mul(c, gate_up, out,
            [&](const float* g, const float* u, float* o, int64_t k) { c.kernels->silu_mul(g, u, o, k); });
}

void gelu_tanh_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out) {
  gated_mul(c, gate_up, out,
            [&](const float* g, const float* u, float* o, int64_t k) { c.kernels->gelu_tanh_mul(g, u, o, k); });
}

// The exact GELU of the gate (the kernels' gelu_erf, torch's approximate='none'), times up.
void gelu_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out) {
  gated_mul(c, gate_up, out, [&](const float* g, const float* u, float* o, int64_t k) {
    std::copy_n(g, k, o);
    c.kernels->gelu_erf(o, k);
    for (int64_t j = 0; j < k; ++j) o[j] *= u[j];
  });
}

// BitNet's gated relu2 (transformers' ReLUSquaredActivation of the gate), times up.
void relu2_mul(const CpuContext& c, const Tensor& gate_up, const Tensor& out) {
  gated_mul(c, gate_up, out, [](const float* g, const float* u, float* o, int64_t k) {
    for (int64_t j = 0; j < k; ++j) {
      const float r = std::max(g[j], 0.0f);
      o[j] = r * r * u[j];
    }
  });
}

// BitNet's per-row int8 quantization and back (Backend::quantize_rows_int8): std::nearbyint in the
// default rounding mode is torch.round's half to even.
void quantize_rows_int8(const CpuContext& c, const Tensor& x) {
  BRIGADE_CHECK(x.dtype == DType::f32, "quantize_rows_int8: x [n, d] f32");
  const int64_t d = x.row_numel();
  float* p = x.as<float>();
  c.pool->parallel_for(x.dim(0), row_grain(d), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* r = p + i * d;
      float amax = 0.0f;
      for (int64_t j = 0; j < d; ++j) amax = std::max(amax, std::fabs(r[j]));
      const float s = 127.0f / std::max(amax, 1e-5f);
      for (int64_t j = 0; j < d; ++j) r[j] = std::clamp(std::nearbyint(r[j] * s), -128.0f, 127.0f) / s;
    }
  });
}

// transformers' XIELUActivation (its Python path), elementwise on f32.
void xielu(const CpuContext& c, const Tensor& x, const XieluParams& p) {
  BRIGADE_CHECK(x.dtype == DType::f32, "xielu: x f32");
  float* v = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float t = v[i];
      v[i] = t > 0.0f ? p.alpha_p * t * t + p.beta * t : (std::expm1(std::min(t, p.eps)) - t) * p.alpha_n + p.beta * t;
    }
  });
}

void scale(const CpuContext& c, const Tensor& x, float s) {
  BRIGADE_CHECK(x.dtype == DType::f32, "scale: x f32");
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i] *= s;
  });
}

void softcap(const CpuContext& c, const Tensor& x, float cap) {
  BRIGADE_CHECK(x.dtype == DType::f32 && cap > 0.0f, "softcap: x f32, cap > 0");
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i] = std::tanh(p[i] / cap) * cap;
  });
}

void clamp(const CpuContext& c, const Tensor& x, float lo, float hi) {
  BRIGADE_CHECK(x.dtype == DType::f32 && !(lo > hi), "clamp: x f32, lo <= hi");
  float* p = x.as<float>();
  c.pool->parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i] = p[i] < lo ? lo : (p[i] > hi ? hi : p[i]);  // NaN stays NaN
  });
}

void write_kv(const CpuContext& c, const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
              const Tensor& slots) {
  const int64_t n = qkv.dim(0), page_size = cache.k.dim(1), n_pages = cache.k.dim(0);
  BRIGADE_CHECK(qkv.row_numel() == l.row_width() && slots.numel() == n,
                "write_kv: qkv [n, row_width], slots [n]");
  BRIGADE_CHECK(cache.k.row_numel() == page_size * l.kv_width(), "KV page holds page_size x kv_width");
  if (cache.k.dtype == DType::i8) {
    write_kv_int8(c, cache, qkv, l, slots);
    return;
  }
  const auto* slot = slots.as<const int32_t>();
  const float* base = qkv.as<const float>();
  const int64_t w = l.kv_width();
  const size_t esize = dtype_size(cache.k.dtype);
  c.pool->parallel_for(n, row_grain(2 * w), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      if (slot[i] < 0) continue;
      BRIGADE_CHECK(slot[i] < n_pages * page_size, "write_kv: slot inside the KV pool");
      const float* k = base + i * l.row_width() + l.q_width();
      const size_t off = static_cast<size_t>(slot[i]) * static_cast<size_t>(w) * esize;
      c.kernels->from_f32(k, cache.k.dtype, static_cast<char*>(cache.k.data) + off, w);
      c.kernels->from_f32(k + w, cache.v.dtype, static_cast<char*>(cache.v.data) + off, w);
    }
  });
}

void gather_rows(const CpuContext& c, const Tensor& x, const Tensor& rows, const Tensor& out) {
  const int64_t r = rows.numel(), n = x.dim(0);
  BRIGADE_CHECK(out.dtype == x.dtype && out.numel() == r * x.row_numel(), "gather_rows: out [r, d]");
  const size_t row_bytes = static_cast<size_t>(x.row_numel()) * dtype_size(x.dtype);
  const auto* idx = rows.as<const int32_t>();
  c.pool->parallel_for(r, row_grain(x.row_numel()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      BRIGADE_CHECK(idx[i] >= 0 && idx[i] < n, "gather_rows: row index inside x");
      std::memcpy(static_cast<char*>(out.data) + static_cast<size_t>(i) * row_bytes,
                  static_cast<const char*>(x.data) + static_cast<size_t>(idx[i]) * row_bytes, row_bytes);
    }
  });
}

}  // namespace brigade::cpu
