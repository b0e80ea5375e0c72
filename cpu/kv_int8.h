// int8 KV pages (KvLayout dtype i8): the quantization scheme, and write_kv for such caches.
//
// Scheme. Each (page, kv head) of K and of V has one scale s [k_scale/v_scale, f32], a power of
// two: the smallest with absmax < 128 * s over every token written to that page and head. A value
// x is stored as q = floor(x / s), in [-128, 127], and read back as (q + 0.5) * s, so the error is
// at most s / 2 <= absmax / 128 (the symmetric levels +-0.5 s .. +-127.5 s).
//
// Why floor and powers of two: tokens reach a page a few at a time (a prefill chunk, then one
// per decode step) and the page's scale must grow when a later token is larger. Growing s to
// s * 2^k requantizes the stored tokens as q >> k (an arithmetic shift, i.e. floor), and
// floor(floor(x / s) / 2^k) = floor(x / (s * 2^k)) exactly. So a page's bytes do not depend on
// how its tokens were split into writes: chunked prefill, decode and one big prefill store the
// same page, and a prefix cache can hand out a page that decode wrote in place of one a prefill
// would have written. The price is a scale up to 2x the ideal absmax / 127 (half a bit on
// average); docs/perf.md ("KV int8") measures what that costs in logits.
//
// Limit: that is exact for the same K/V values. In a model, layers after the first compute K/V
// from attention outputs, and attention reads a page's earlier tokens at the page's scale at
// read time: within one prefill chunk that scale already covers the chunk's later tokens, while
// a decode step sees only the tokens so far. So a sequence prefilled at once and the same
// sequence decoded token by token (e.g. recomputed after a preemption) can differ slightly from
// layer 1 on. Making that exact would need prefill attention to read each row's page-mates at
// the page's running scale as of that row.
#pragma once

#include <cstdint>

#include "cpu/ops.h"

namespace brigade::cpu {

// Scale exponents are clamped to [kKvInt8MinExp, kKvInt8MaxExp]: 2^-126 is the smallest normal
// f32 (an all-zero head gets it), and 128 * 2^120 is still finite.
constexpr int kKvInt8MinExp = -126;
constexpr int kKvInt8MaxExp = 120;

// The smallest power of two s with absmax < 128 * s (clamped as above; NaN counts as 0).
float kv_int8_scale(float absmax);
// max |x[i]| over n values, ignoring NaN.
float kv_int8_absmax(const float* x, int64_t n);
// q[i] = floor(x[i] / scale), saturated to [-128, 127] (only non-finite x or a scale below
// kv_int8_scale(|x|) saturate); scale is a power of two, so x / scale is exact.
void kv_int8_quantize(const float* x, float scale, int8_t* q, int64_t n);
// Re-expresses q [n] stored at power-of-two `from` in the larger power of two `to`.
void kv_int8_requantize(int8_t* q, float from, float to, int64_t n);
inline float kv_int8_dequantize(int8_t q, float scale) { return (static_cast<float>(q) + 0.5f) * scale; }

// Backend::write_kv for an i8 cache (contract in core/backend.h): tokens are grouped by page, and
// each (page, kv head) of K and V is one work item that grows the page's scale to cover the new
// tokens (requantizing the tokens already there: at most page_size x head_dim bytes), then
// quantizes the new tokens. A group that writes offset 0 starts its page afresh.
void write_kv_int8(const CpuContext& c, const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
                   const Tensor& slots);

}  // namespace brigade::cpu
