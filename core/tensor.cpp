#include "core/tensor.h"

namespace brigade {

Tensor::Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
  BRIGADE_CHECK(dims.size() <= kMaxDims, "at most 4 dimensions");
  ndim = static_cast<int>(dims.size());
  size_t i = 0;
  for (int64_t v : dims) shape[i++] = v;
}

int64_t Tensor::numel() const {
  if (data == nullptr && ndim == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

Tensor Tensor::rows(int64_t begin, int64_t n) const {
  BRIGADE_CHECK(ndim >= 1 && begin >= 0 && begin + n <= shape[0], "row range inside the tensor");
  Tensor t = *this;
  t.shape[0] = n;
  t.data = static_cast<char*>(data) + dtype_bytes(dtype, begin * row_numel());
  return t;
}

Tensor Tensor::reshaped(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, dims);
  BRIGADE_CHECK(t.numel() == numel(), "reshape keeps the element count");
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[static_cast<size_t>(i)]);
  }
  return s + "]";
}

Tensor Buffer::view(DType t, std::initializer_list<int64_t> dims) const {
  Tensor v(data_, t, dims);
  BRIGADE_CHECK(v.nbytes() <= bytes_, "view fits inside the buffer");
  return v;
}

}  // namespace brigade
