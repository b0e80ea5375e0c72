// Int4Weight: one linear layer W [rows = out_features, cols = in_features] of an int4 weight-only
// checkpoint (QuantConfig::int4(): GPTQ, AWQ gemm, compressed-tensors pack-quantized), read in
// place from its packed tensors (layouts in quant_config.h): element (r, c) is
// s[r, g] * (q[r, c] - z[r, g]) with g = c's group (g_idx where stored, else c / group_size).
//
// Rows are either dequantized (f32 / bf16 / f16, s * (q - z) computed exactly in f32 then
// rounded once) or, where a 32-column block is exactly ggml Q4_0 — one group over the block,
// zero point 8 and a scale that f16 holds exactly — repacked to Q4_0 bit for bit (d = s, nibble
// q): symmetric GPTQ / compressed-tensors groups of a multiple of 32 run on the CPU's Q4_0
// kernels with no requantization.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/checkpoint.h"

namespace brigade {

class Int4Weight {
 public:
  // Whether the checkpoint stores `weight` ("x.weight") int4-packed (its "x.qweight" or
  // "x.weight_packed" exists) rather than as a plain tensor.
  static bool stored(const Checkpoint& ck, const std::string& weight);
  // Opens the packed tensors of `weight` [rows, cols] and checks their dtypes and shapes against
  // the config (corrupt naming the tensor otherwise), the scales finite, the g_idx in range.
  static Expected<Int4Weight> open(const Checkpoint& ck, const std::string& weight, int64_t rows, int64_t cols);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t numel() const { return rows_ * cols_; }
  const RawTensor& packed() const { return packed_; }  // qweight / weight_packed
  // Whether columns [col, col + n) are whole Q4_0 blocks that hold exactly (see above).
  bool q4_0_exact(int64_t col, int64_t n) const;
  // Writes columns [col, col + n) of row `row` into dst as `out`: f32, bf16 or f16; or q4_0
  // (q4_0_exact(col, n) must hold; n / 32 blocks of 18 bytes).
  void read_row(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const;

 private:
  Status open_tensors(const Checkpoint& ck, const std::string& weight);
  Status load_groups(const Checkpoint& ck, const std::string& weight);
  Status check_scales() const;
  void find_q4_0_blocks();
  int code(int64_t row, int64_t col) const;   // q in [0, 16)
  int zero(int64_t row, int64_t group) const; // z in [0, 17) (gptq's original format adds 1)
  float scale(int64_t row, int64_t group) const;
  int64_t group(int64_t col) const { return group_of_[static_cast<size_t>(col)]; }

  Int4Packing packing_ = Int4Packing::none;
  bool symmetric_ = true, zero_plus_one_ = false;
  int64_t group_size_ = -1;
  int64_t rows_ = 0, cols_ = 0, n_groups_ = 0;
  RawTensor packed_, zeros_, scales_;     // zeros_ unused for symmetric compressed-tensors
  bool zeros_unpacked_ = false;           // compressed-tensors' int8 [rows, groups] zero points
  std::vector<int32_t> group_of_;         // [cols]
  std::vector<uint8_t> q4_0_block_;       // [cols / 32]: block b holds exactly as Q4_0
};

}  // namespace brigade
