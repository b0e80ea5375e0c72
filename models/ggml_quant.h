// The ggml tensor types a GGUF file may store, and the dequantizers of the block-quantized ones
// brigade has no DType for. Byte layouts are ggml's (ggml-common.h), so gguf-py's
// gguf.quants.dequantize is the reference (tests/core/quant_test.cpp):
//
//   type  block elems bytes  layout (f16 scales; value per element)
//   Q4_0     32   18    d, qs[16]                     d * (q4 - 8)            (core/quant.h)
//   Q4_1     32   20    d, m, qs[16]                  d * q4 + m              (core/quant.h)
//   Q5_0     32   22    d, qh[4], qs[16]              d * (q5 - 16); bit 4 of element j is bit j of qh
//   Q5_1     32   24    d, m, qh[4], qs[16]           d * q5 + m
//   Q8_0     32   34    d, qs[32] int8                d * q8                  (core/quant.h)
//   Q2_K    256   84    scales[16], qs[64], d, dmin   d * (sc & 15) * q2 - dmin * (sc >> 4), per 16
//   Q3_K    256  110    hmask[32], qs[64], scales[12], d     d * (s6 - 32) * (q3 - 4), per 16
//   Q4_K    256  144    d, dmin, scales[12], qs[128]  d * sc * q4 - dmin * m, per 32  (core/quant.h)
//   Q5_K    256  176    d, dmin, scales[12], qh[32], qs[128]   as Q4_K with a 5th bit from qh (core/quant.h)
//   Q6_K    256  210    ql[128], qh[64], scales[16], d         (core/quant.h)
//   MXFP4    32   17    e (E8M0), qs[16]              e2m1(q4) * 2^(e - 127)  (core/quant.h)
//
// Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4 are DType q4_0, q4_1, q8_0, q4_k, q5_k, q6_k, mxfp4 (a
// backend may multiply them as stored); the others are only ever dequantized. Refused
// (unsupported, by name): Q8_1 and Q8_K (ggml's activation formats, never in a model file), the
// IQ* and TQ* types, NVFP4, Q1_0, and the integer and F64 types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace brigade {

struct GgmlTypeInfo {
  uint32_t id = 0;           // ggml's type id as GGUF stores it
  const char* name = "";     // "Q4_K"
  int64_t block_elems = 1;   // elements per block (1 for F32, F16, BF16)
  size_t block_bytes = 0;    // bytes per block
  std::optional<DType> dtype;  // brigade's DType for it, when there is one
};

// The type with ggml id `id` when brigade reads it; nullptr for unknown and refused ids.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
// ggml's name of any id ("IQ2_XS", "Q8_K", ...), "type N" for ids ggml never had.
std::string ggml_type_name_of(uint32_t id);
// The names of the types brigade reads, for error messages: "F32, F16, BF16, Q4_0, ...".
const char* ggml_supported_types();
// The ggml type of a DType (q4_k -> Q4_K; f32 -> F32); nullptr for types GGUF cannot hold.
const GgmlTypeInfo* ggml_type_of(DType t);

// dst[0, n) = the values of the n elements of ggml type `type` (one brigade reads) at src; n a
// multiple of its block.
void dequantize_ggml(const GgmlTypeInfo& type, const uint8_t* src, float* dst, int64_t n);

}  // namespace brigade
