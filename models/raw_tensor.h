// RawTensor: one tensor as stored in a checkpoint file, viewed in place (no copy).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace brigade {

struct RawTensor {
  std::string name;
  std::string file;                // the file it lives in (for error messages)
  DType dtype = DType::f32;
  std::vector<int64_t> shape;      // outermost first
  std::span<const uint8_t> bytes;  // exactly numel() * dtype_size(dtype) bytes of the mapping

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string shape_string() const;
  // A read-only host Tensor over the mapped bytes (callers must not write through it).
  // Needs shape.size() <= kMaxDims (checked at parse time).
  Tensor host_view() const;
  // Element i converted to double (f32/f16/bf16 only); i < numel(). For tests and references.
  double at(int64_t i) const;
};

}  // namespace brigade
