// int8 KV pages (KvLayout dtype i8): the quantization scheme, and write_kv for such caches.
//
// Scheme. Every row of K and of V (one token, one kv head: head_dim values) has its own f32 scale
// s = absmax / 127 (k_scale/v_scale [n_pages, page_size, n_kv_heads]); a value x is stored as
// q = round(x / s) in [-127, 127] and read back as q * s, so the error is at most s / 2 =
// absmax / 254 of that row.
//
// Why per row: a row is quantized once, when its token is written, from its own values only.
// So a page's bytes and every value attention reads do not depend on how a sequence was split
// into writes (chunked prefill, one big prefill, decode one token at a time, a recompute after a
// preemption) nor on which tokens share the page: int8 outputs are identical with the prefix
// cache on or off, exactly as for f32 and bf16 KV. (The earlier scheme, one power-of-two scale
// per page, stored split-independent bytes but let a prefill chunk read a page-mate at a scale
// that already covered the chunk's later tokens, so outputs depended on the split.) The price
// is 4 bytes of scale per head_dim bytes of values: 0.53x of bf16 at head_dim 64, 0.52x at 128.
#pragma once

#include <cstdint>

#include "cpu/ops.h"

namespace brigade::cpu {

// absmax / 127: 0 when absmax is 0 or NaN (the row stores zeros), FLT_MAX / 127 when it is
// infinite (finite values keep a usable step; infinities saturate).
float kv_int8_scale(float absmax);
// max |x[i]| over n values, ignoring NaN.
float kv_int8_absmax(const float* x, int64_t n);
// q[i] = round-to-nearest-even(x[i] / scale), saturated to [-127, 127]; NaN (and a zero scale)
// store 0.
void kv_int8_quantize(const float* x, float scale, int8_t* q, int64_t n);
inline float kv_int8_dequantize(int8_t q, float scale) { return static_cast<float>(q) * scale; }

// Backend::write_kv for an i8 cache (contract in core/backend.h): each (token, kv head) of K and
// V is quantized alone into its slot with its own scale.
void write_kv_int8(const CpuContext& c, const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
                   const Tensor& slots);

}  // namespace brigade::cpu
