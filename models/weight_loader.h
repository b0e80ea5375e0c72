// WeightLoader: turns checkpoint tensors into backend weights, checking every shape against the
// config, fusing projections that run as one matmul, and counting parameters and bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "models/checkpoint.h"

namespace brigade {

class WeightLoader {
 public:
  // `want` is LoadOptions::weight_dtype for matrices (nullopt keeps the stored type).
  WeightLoader(const Checkpoint& checkpoint, Backend& backend, std::optional<DType> want)
      : ck_(checkpoint), backend_(backend), want_(want) {}

  // Matrix `name` [rows, cols], prepared for matmul or embedding lookup.
  Expected<OwnedTensor> matrix(const std::string& name, int64_t rows, int64_t cols);
  // Matrices names[i] [rows[i], cols] stacked along rows into one [sum(rows), cols] weight, so a
  // fused projection (q|k|v, gate|up) is one matmul. Parts of different dtypes are staged as f32.
  Expected<OwnedTensor> fused(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                              int64_t cols);
  // Vectors names[i] [sizes[i]] concatenated and uploaded as f32 (norm weights, biases).
  Expected<OwnedTensor> vector_f32(const std::vector<std::string>& names, const std::vector<int64_t>& sizes);

  int64_t n_params() const { return n_params_; }  // elements read from the checkpoint
  int64_t n_bytes() const { return n_bytes_; }    // bytes of the prepared weights

 private:
  Expected<OwnedTensor> prepare(const Tensor& host, std::optional<DType> want);
  const Checkpoint& ck_;
  Backend& backend_;
  std::optional<DType> want_;
  int64_t n_params_ = 0;
  int64_t n_bytes_ = 0;
};

}  // namespace brigade
