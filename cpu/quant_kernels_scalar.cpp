// Portable quantized matmul: the reference the AVX2 kernels are tested against. The weight row is
// dequantized with core/quant.h and multiplied with the activation blocks read back as d * qs,
// which is the same sum the integer kernels compute, in another order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/quant.h"
#include "cpu/quant_kernels.h"

namespace brigade::cpu::scalar_q {

void quantize_q8(const float* x, BlockQ8* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 127.0f / amax : 0.0f;
    int sum[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(x[j] * id));
      y[b].qs[j] = static_cast<int8_t>(q);
      sum[j / 16] += q;
    }
    y[b].d = d;
    y[b].sum[0] = static_cast<int16_t>(sum[0]);
    y[b].sum[1] = static_cast<int16_t>(sum[1]);
    y[b].s = d * static_cast<float>(sum[0] + sum[1]);
  }
}

void qmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end) {
  const int64_t k = a.nb * 32;
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(k));
  for (int64_t r = m_begin; r < m_end; ++r) {
    quant::dequantize_row(static_cast<const char*>(a.w) + static_cast<size_t>(r) * a.row_bytes, a.w_dtype, w.data(), k);
    for (int64_t i = 0; i < a.n; ++i) {
      const BlockQ8* x = a.x + i * a.nb;
      float s = 0.0f;
      for (int64_t b = 0; b < a.nb; ++b) {
        float p = 0.0f;
        for (int j = 0; j < 32; ++j) p += w[static_cast<size_t>(b * 32 + j)] * static_cast<float>(x[b].qs[j]);
        s += p * x[b].d;
      }
      a.out[i * a.m + r] = s;
    }
  }
}

void quantize_q8k(const float* x, BlockQ8K* y, int64_t k) {
  for (int64_t b = 0; b < k / 256; ++b, x += 256) {
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = amax / 127.0f;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 16 * g; j < 16 * g + 16; ++j) {
        const int q = static_cast<int>(std::nearbyint(x[j] * id));
        y[b].qs[j] = static_cast<int8_t>(q);
        sum += q;
      }
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

void qkmatmul_rows(const QMatmulArgs& a, int64_t m_begin, int64_t m_end) {
  const int64_t k = a.nb * 32, nsb = a.nb / 8;
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(k));
  for (int64_t r = m_begin; r < m_end; ++r) {
    quant::dequantize_row(static_cast<const char*>(a.w) + static_cast<size_t>(r) * a.row_bytes, a.w_dtype, w.data(), k);
    for (int64_t i = 0; i < a.n; ++i) {
      const BlockQ8K* x = a.xk + i * nsb;
      float s = 0.0f;
      for (int64_t b = 0; b < nsb; ++b) {
        float p = 0.0f;
        for (int j = 0; j < 256; ++j) p += w[static_cast<size_t>(b * 256 + j)] * static_cast<float>(x[b].qs[j]);
        s += p * x[b].d;
      }
      a.out[i * a.m + r] = s;
    }
  }
}

}  // namespace brigade::cpu::scalar_q
