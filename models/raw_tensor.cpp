#include "models/raw_tensor.h"

#include <cstring>

namespace brigade {

std::string RawTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor RawTensor::host_view() const {
  Tensor t;
  t.data = const_cast<uint8_t*>(bytes.data());  // read-only by contract: the mapping is PROT_READ
  t.dtype = dtype;
  BRIGADE_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), "checkpoint tensors have <= 4 dims");
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

double RawTensor::at(int64_t i) const {
  BRIGADE_CHECK(i >= 0 && i < numel(), "element index inside the tensor");
  const uint8_t* p = bytes.data() + static_cast<size_t>(i) * dtype_size(dtype);
  switch (dtype) {
    case DType::f32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::f16: { uint16_t h; std::memcpy(&h, p, 2); return f16_to_f32(h); }
    case DType::bf16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_f32(h); }
    default: break;
  }
  BRIGADE_CHECK(false, "RawTensor::at supports f32/f16/bf16 only");
  return 0.0;
}

}  // namespace brigade
