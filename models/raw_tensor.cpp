#include "models/raw_tensor.h"

#include <cstring>
#include <vector>

#include "models/ggml_quant.h"

namespace brigade {

std::string RawTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string RawTensor::type_name() const { return ggml ? ggml->name : dtype_name(dtype); }

int64_t RawTensor::block_elems() const { return ggml ? ggml->block_elems : 1; }

size_t RawTensor::row_bytes(int64_t n) const {
  if (!ggml) return static_cast<size_t>(n) * dtype_size(dtype);
  BRIGADE_CHECK(n % ggml->block_elems == 0, "a block-quantized row is whole blocks");
  return static_cast<size_t>(n / ggml->block_elems) * ggml->block_bytes;
}

Tensor RawTensor::host_view() const {
  BRIGADE_CHECK(!ggml || ggml->dtype, "only block types brigade has a DType for are viewed as Tensors");
  Tensor t;
  t.data = const_cast<uint8_t*>(bytes.data());  // read-only by contract: the mapping is PROT_READ
  t.dtype = dtype;
  BRIGADE_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), "checkpoint tensors have <= 4 dims");
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

void RawTensor::dequantize(int64_t first, int64_t n, float* dst) const {
  BRIGADE_CHECK(first >= 0 && n >= 0 && first + n <= numel(), "elements inside the tensor");
  if (ggml) {
    BRIGADE_CHECK(first % ggml->block_elems == 0 && n % ggml->block_elems == 0, "whole blocks");
    dequantize_ggml(*ggml, bytes.data() + row_bytes(first), dst, n);
    return;
  }
  BRIGADE_CHECK(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16,
                "RawTensor::dequantize reads float and ggml types only");
  const size_t es = dtype_size(dtype);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes.data() + static_cast<size_t>(first + i) * es;
    if (dtype == DType::f32) {
      std::memcpy(dst + i, p, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    dst[i] = dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

double RawTensor::at(int64_t i) const {
  BRIGADE_CHECK(i >= 0 && i < numel(), "element index inside the tensor");
  const int64_t b = block_elems();
  std::vector<float> block(static_cast<size_t>(b));
  dequantize(i / b * b, b, block.data());
  return block[static_cast<size_t>(i % b)];
}

}  // namespace brigade
