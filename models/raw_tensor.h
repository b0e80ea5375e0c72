// RawTensor: one tensor as stored in a checkpoint file, viewed in place (no copy).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace brigade {

struct GgmlTypeInfo;

struct RawTensor {
  std::string name;
  std::string file;                // the file it lives in (for error messages)
  DType dtype = DType::f32;
  std::vector<int64_t> shape;      // outermost first
  std::span<const uint8_t> bytes;  // exactly the bytes of numel() elements (row_bytes per row)
  // GGUF tensors of a block-quantized ggml type (models/ggml_quant.h): how `bytes` encode the
  // elements, whole blocks per row. dtype is then that type's DType where brigade has one
  // (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, mxfp4), else u8: such data is only read through dequantize. nullptr for
  // element types.
  const GgmlTypeInfo* ggml = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string shape_string() const;
  bool block_quantized() const { return ggml != nullptr; }
  // The stored type's name: "Q5_K" for a GGUF block type, else dtype_name ("bf16").
  std::string type_name() const;
  int64_t block_elems() const;  // elements per block (1 for element types)
  // Bytes of n elements of one row (n a multiple of block_elems()).
  size_t row_bytes(int64_t n) const;
  // dst[0, n) = elements [first, first + n) as f32, any element type or block type; for a block
  // type first and n are multiples of block_elems(). f32, f16, bf16 and the ggml types only.
  void dequantize(int64_t first, int64_t n, float* dst) const;
  // A read-only host Tensor over the mapped bytes (callers must not write through it).
  // Needs shape.size() <= kMaxDims (checked at parse time).
  Tensor host_view() const;
  // Element i converted to double (f32/f16/bf16 and the ggml types); i < numel(). For tests,
  // references and small tensors.
  double at(int64_t i) const;
};

}  // namespace brigade
