// Tensor: a non-owning, row-major, contiguous view of typed memory on one backend's device.
//
// Shapes are written outermost first, as in comments: x [n_tokens, hidden]. A Tensor never frees
// what it points to; memory is owned by a Buffer (backend allocation) or by a mapped file.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace brigade {

constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims);

  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? ndim + i : i)]; }
  // Product of the dims; 0 for an empty Tensor (no data, no dims: what Tensor() is), so an
  // absent optional weight counts no bytes. A Tensor with data and no dims is a scalar: 1.
  int64_t numel() const;
  // Block-quantized types (core/quant.h): whole blocks per row, so nbytes counts blocks.
  size_t nbytes() const { return dtype_bytes(dtype, numel()); }
  bool empty() const { return data == nullptr; }
  // Elements in one index of the first dimension (product of the other dims).
  int64_t row_numel() const { return ndim == 0 ? 1 : numel() / shape[0]; }

  template <class T> T* as() const { return static_cast<T*>(data); }

  // Rows [begin, begin + n) of the first dimension; same element type, shares memory.
  Tensor rows(int64_t begin, int64_t n) const;
  // The same memory seen with another shape of equal element count.
  Tensor reshaped(std::initializer_list<int64_t> dims) const;
  std::string shape_string() const;  // "[3, 64]"
};

// Owning device memory. The deleter is the backend's free; Buffer is movable, not copyable.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, size_t bytes, std::function<void(void*)> free_fn)
      : data_(data), bytes_(bytes), free_(std::move(free_fn)) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept { Buffer t(std::move(o)); swap(t); return *this; }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { if (data_ && free_) free_(data_); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Tensor view(DType t, std::initializer_list<int64_t> dims) const;

 private:
  void swap(Buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(free_, o.free_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> free_;
};

// A tensor together with the memory it lives in (weights, KV, scratch).
struct OwnedTensor {
  Buffer buffer;
  Tensor tensor;
};

}  // namespace brigade
