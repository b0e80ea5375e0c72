// Weight dequantization at load: a stored weight, plain, FP8 E4M3 with scales (QuantConfig), int4
// packed (GPTQ / AWQ / compressed-tensors, models/int4_weight.h) or a GGUF block type
// (models/ggml_quant.h), read back row by row as floats (or as stored), so every WeightLoader path (slices of rows and columns, fused
// parts, stacked experts, row blocks) picks exactly the scales its elements were quantized with.
// Nothing is dequantized ahead of need: a caller stages one tensor (or one slice) at a time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include "core/status.h"
#include "models/checkpoint.h"
#include "models/int4_weight.h"
#include "models/quant_config.h"

namespace brigade {

// FP8 E4M3 ("e4m3fn", OCP 8-bit floating point): the f32 value of every byte, as
// torch.float8_e4m3fn converts it: subnormals (exponent 0) are man * 2^-9, S.1111.111 is NaN,
// there are no infinities.
const std::array<float, 256>& e4m3_table();

// Element type one FP8 weight is staged in for `want` (LoadOptions::weight_dtype): the float
// type asked for (f32, bf16, f16), else f32 (auto, or fp8 re-quantized by the backend).
DType fp8_staging_dtype(std::optional<DType> want);

// Quantizes w [rows, cols] (f32, row-major) to FP8 E4M3 codes `q` [rows, cols] and the scales
// [n_row_blocks, n_col_blocks] of `scaling` (block: br x bc, the grid's last blocks partial):
// scale = amax(block) / 448 (1 for an all-zero block), q = e4m3(w / scale) rounded to nearest
// even, so q * scale dequantizes. transformers' FineGrainedFP8 quantizer stores this scale as
// weight_scale_inv, compressed-tensors as weight_scale. For synthetic checkpoints (make-model).
std::vector<float> quantize_fp8(const float* w, int64_t rows, int64_t cols, WeightScaling scaling, int64_t br,
                                int64_t bc, uint8_t* q);

// One stored weight: `items` matrices of [rows, cols] (items = 1 for a plain matrix; n for
// transformers 5's stacked experts [n, rows, cols]).
class StoredWeight {
 public:
  // Looks `name` up (shape checked; a packed ternary linear's is [rows / 4, cols]: open_ternary)
  // and, when it is stored F8_E4M3, its scale tensor
  // (config.quant.scale_name(name)): F32/BF16/F16, of the shape the scaling needs
  // (block: [items..., ceil(rows / br), ceil(cols / bc)]; channel: [items..., rows] or
  // [items..., rows, 1]; tensor: one element per item, shaped [], [1], [items] or [items, 1]),
  // every scale finite and >= 0. A matrix "x.weight" that an int4 checkpoint stores packed
  // (Int4Weight::stored) opens those tensors instead. Errors name the tensor, what was wrong and
  // what to do.
  static Expected<StoredWeight> open(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape);

  // The stored tensor (an int4 layer's: its packed qweight / weight_packed).
  const RawTensor& raw() const { return raw_; }
  bool quantized() const { return raw_.dtype == DType::f8e4m3 || int4() || ternary_ != Ternary::none; }
  bool int4() const { return int4_.has_value(); }
  // A bitnet ternary linear's float type as the checkpoint keeps its model (the weight_scale's of a
  // packed one, else the stored weight's): what it is staged in when no type is asked for, so a
  // bf16 checkpoint's ternary weights take bf16's memory, as its other weights do. nullopt otherwise.
  std::optional<DType> ternary_dtype() const {
    return ternary_ == Ternary::none ? std::nullopt : std::optional<DType>(ternary_dtype_);
  }
  // The block type (q4_0, q4_1) columns [col, col + n) of every row repack to (int4 only:
  // Int4Weight::block_type).
  std::optional<DType> int4_block_type(int64_t col, int64_t n) const {
    return int4_ ? int4_->block_type(col, n) : std::nullopt;
  }
  int64_t numel() const { return items_ * rows_ * cols_; }  // the weight's elements (parameters)
  // Whether the weight is a GGUF block-quantized one (raw().ggml).
  bool blocks() const { return raw_.block_quantized(); }
  // Writes elements [col, col + n) of row `row` of matrix `item` into `dst` as `out`: out equal
  // to the stored type copies the bytes (of a block type: col and n whole blocks); otherwise the
  // values are converted (fp8: q * scale; ggml blocks: dequantized; rounded once to `out`); out
  // must then be a float type (f32, bf16, f16). int4: float types, or q4_0 / q4_1 as int4_block_type.
  void read_row(int64_t item, int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const;

 private:
  Status load_scales(const Checkpoint& ck, const std::string& name);
  // A bitnet checkpoint's ternary linear (QuantConfig::ternary_weight): its codes, packed or
  // not, and the multiplier W = t * ternary_scale_ (online: the float weights and their s).
  Status open_ternary(const Checkpoint& ck, const std::string& name);
  void read_ternary(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const;
  enum class Ternary { none, packed, codes, online };
  Ternary ternary_ = Ternary::none;
  float ternary_scale_ = 1.0f;  // packed / codes: W = t * this; online: s (W = clamp(round(w s)) / s)
  DType ternary_dtype_ = DType::f32;
  void read_blocks(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const;  // row of all rows
  float scale(int64_t item, int64_t row, int64_t col_block) const;
  RawTensor raw_;
  std::optional<Int4Weight> int4_;
  int64_t items_ = 1, rows_ = 0, cols_ = 0;
  WeightScaling scaling_ = WeightScaling::none;
  int64_t block_rows_ = 0, block_cols_ = 0;   // block: the block; channel: 1 x cols; tensor: rows x cols
  int64_t n_row_blocks_ = 1, n_col_blocks_ = 1;
  std::vector<float> scales_;                 // [items, n_row_blocks, n_col_blocks]
};

}  // namespace brigade
