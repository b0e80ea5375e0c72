// Int4Weight: one linear layer W [rows = out_features, cols = in_features] of an int4 weight-only
// checkpoint (QuantConfig::int4(): GPTQ, AWQ gemm, compressed-tensors pack-quantized), read in
// place from its packed tensors (layouts in quant_config.h): element (r, c) is
// s[r, g] * (q[r, c] - z[r, g]) with g = c's group (g_idx where stored, else c / group_size).
//
// Rows are either dequantized (f32 / bf16 / f16, s * (q - z) computed exactly in f32 then
// rounded once) or repacked block by block, where one group covers a 32-column block and f16
// holds its scales exactly:
//   - Q4_0 where the block's zero points are all 8: bit for bit (d = s, nibble q), so symmetric
//     GPTQ / compressed-tensors groups of a multiple of 32 run on the CPU's Q4_0 kernels with no
//     requantization;
//   - Q4_1 for any zero point (AWQ, GPTQ sym=false, compressed-tensors asymmetric): d = s, nibble
//     q and m = f16(-s * z). d and the codes are exact; the offset is rounded once, s * z (exact
//     in f32: an 11-bit scale times a 5-bit integer) to f16, so each element is off by the same
//     |m - (-s * z)| <= 2^-11 |s * z| <= s / 128 (a 128th of a quantization step) within the
//     block (tests/models/int4_checkpoint_test.cpp measures it). A block whose offset f16 cannot
//     hold (beyond 65504) stays dequantized.
// Blocks split by act-order groups (g_idx) are neither, and stay dequantized.
#pragma once

#include <cstdint>
#include <optional>
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
  // The block type columns [col, col + n) repack to (see above): q4_0 where every block holds
  // exactly as Q4_0, else q4_1 where every block is one group with f16 scales; nullopt when a
  // block is neither or the columns are not whole blocks of 32.
  std::optional<DType> block_type(int64_t col, int64_t n) const;
  // Writes columns [col, col + n) of row `row` into dst as `out`: f32, bf16 or f16; q4_0 where
  // block_type(col, n) is q4_0 (n / 32 blocks of 18 bytes), or q4_1 where it is either (20 bytes).
  void read_row(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const;

 private:
  Status open_tensors(const Checkpoint& ck, const std::string& weight);
  Status load_groups(const Checkpoint& ck, const std::string& weight);
  Status check_scales() const;
  void find_blocks();
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
  std::vector<uint8_t> block_kind_;       // [cols / 32]: kQ4_0 / kQ4_1 / kFloat (int4_weight.cpp)
};

}  // namespace brigade
