// WeightLoader: turns checkpoint tensors into backend weights, checking every shape against the
// config, fusing projections that run as one matmul, and counting parameters and bytes.
// FP8 checkpoints (ModelConfig::quant): every matrix stored F8_E4M3 is dequantized with its
// scales (models/weight_quant.h) while it is staged, one weight at a time, into the float type
// asked for (f32 when none is: an fp8 checkpoint loads as f32 on the CPU with weights auto).
//
// int4 checkpoints (GPTQ, AWQ, compressed-tensors pack-quantized: models/int4_weight.h): a matrix
// whose 32-column blocks each lie in one group with f16-exact scales is repacked, when the
// backend multiplies the type (column slices on block boundaries; matrix, fused and fused_linear,
// not MoE experts): to Q4_0 bit for bit where every zero point is 8 (symmetric) and no type or
// q4_0 is asked for; else to Q4_1 (any zero point; the offset -s * z rounded once to f16) when no
// type or q4_1 is asked for (weights: q4_1 takes the symmetric ones as Q4_1 too). Every other
// int4 matrix is dequantized like fp8 (to the float type asked for, else f32; q8_0 / q4_0 asked
// for: f32 then quantized by prepare_weight).
//
// GGUF block-quantized weights (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, mxfp4 and the types only dequantized, see
// models/ggml_quant.h): a matrix or table (or a fused stack of parts of one such type) stays as
// stored, a view of the mapping for prepare_weight, when no type is asked for (or that one),
// backend.supports_weight_dtype says yes and a column slice falls on block boundaries; in every
// other case it is dequantized to the float type asked for (f32 when none is). row_blocks (MLA)
// are always dequantized, stacked experts unless keep_blocks (GGUF's, for moe_experts).
// want = q8_0 / q4_0 / q4_1 (`weights: q8_0`): the linear layers are quantized by prepare_weight (rows
// whole blocks of 32), and so are stacked experts (transformers 5's fused layout); tables
// (embedding, lm_head) stay as stored, and so does whatever is loaded while
// quantize_linear(false) (MoE routers, GGUF's experts) or through row_blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/weight_quant.h"

namespace brigade {

// A range [begin, begin + size) of one dimension; the default (size < 0) is the whole dimension.
// Tensor-parallel ranks load their shard this way (models/llama.cpp).
struct Slice {
  int64_t begin = 0;
  int64_t size = -1;
  int64_t length(int64_t full) const { return size < 0 ? full : size; }
};

// A projection's prepared weight: one tensor, or (a fused projection whose parts the backend keeps
// in different block types, such as Q4_K_M's Q4_K q|k with a Q6_K v, where
// Backend::supports_stacked_matmul) its row groups in order, one per type, that matmul multiplies
// as one projection.
struct LinearWeight {
  std::vector<OwnedTensor> groups;
  std::vector<Tensor> views;  // groups[i].tensor, as matmul_stacked takes them

  bool empty() const { return groups.empty(); }
  size_t nbytes() const;
  // out [n, rows] = x · wᵀ (+ bias): Backend::matmul for one group, matmul_stacked for several.
  void matmul(Backend& backend, const Tensor& x, const Tensor& bias, const Tensor& out) const;
};

class WeightLoader {
 public:
  // `want` is LoadOptions::weight_dtype for matrices (nullopt keeps the stored type). Tables
  // (table()) get the same, except that fp8 linear layers leave them bf16 and q8_0 / q4_0 / q4_1
  // ones as stored.
  WeightLoader(const Checkpoint& checkpoint, Backend& backend, std::optional<DType> want)
      : ck_(checkpoint), backend_(backend), want_(want) {}

  // Matrix `name` [rows, cols] (checked), of which rows `row_slice` and columns `col_slice` are
  // prepared for matmul. The slices must lie inside the matrix.
  Expected<OwnedTensor> matrix(const std::string& name, int64_t rows, int64_t cols, Slice row_slice = {},
                               Slice col_slice = {});
  // Matrix `name` [rows, cols] whole, for embedding lookup and the lm_head matmul (which may be
  // the same tied tensor): never quantized to fp8.
  Expected<OwnedTensor> table(const std::string& name, int64_t rows, int64_t cols);
  // Matrices names[i] [rows[i], cols] (checked), of each the rows row_slices[i] (all rows when
  // row_slices is empty), stacked along rows into one weight, so a fused projection (q|k|v,
  // gate|up) is one matmul. Parts of different dtypes are staged as f32.
  // With col_slice, every part keeps only those columns (a tensor-parallel rank's slice of each
  // expert's down_proj).
  Expected<OwnedTensor> fused(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                              int64_t cols, const std::vector<Slice>& row_slices = {}, Slice col_slice = {});
  // fused() (columns col_slice, all by default) with part i's rows multiplied by scales[i] (Falcon-H1's muP
  // multipliers folded into its weights): staged as f32 to scale, then prepared as the type asked
  // for, else the first part's float type as stored (f32 for a block-quantized one). All scales 1:
  // fused() (a block-quantized part stays so).
  Expected<OwnedTensor> scaled(const std::vector<std::string>& names, const std::vector<int64_t>& rows, int64_t cols,
                               const std::vector<Slice>& row_slices, const std::vector<float>& scales,
                               Slice col_slice = {});
  // fused(), except that block-quantized parts of different types stay as they are (or q8_0 for
  // a type the backend does not multiply) in row groups of one type each, where the backend
  // supports_stacked_matmul and no type is asked for: Q4_K_M's q|k|v keeps its 4.5 and 6.5 bits
  // per weight instead of becoming 8.5-bit q8_0.
  Expected<LinearWeight> fused_linear(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                                      int64_t cols, const std::vector<Slice>& row_slices = {});
  // Tensor `name` of shape [n, rows, cols] (checked: n matrices stacked, as transformers 5 keeps a
  // layer's experts) prepared as one matrix: of the matrices `items`, of each the rows
  // row_slices (concatenated in their order; all rows when empty) and the columns col_slice.
  // The whole tensor by default: [n * rows, cols]. keep_blocks: a block-quantized tensor stays as
  // stored (as matrix() keeps one; q8_0 for a type without kernels), else it is dequantized.
  Expected<OwnedTensor> stacked(const std::string& name, int64_t n, int64_t rows, int64_t cols, Slice items = {},
                                const std::vector<Slice>& row_slices = {}, Slice col_slice = {},
                                bool keep_blocks = false);
  // Tensor `name` of shape [n, cols, rows] holding n matrices [rows, cols] transposed (gpt-oss
  // keeps its experts so, for x · W) prepared as [rows, cols] matrices stacked: of the matrices
  // `items`, of each the rows listed in `rows_kept` (indices in [0, rows), in that order: a
  // rank's columns, gpt-oss's interleaved gate and up columns taken apart) and the columns
  // col_slice. Float tensors only; quantized under weights: q8_0 / q4_0 / q4_1 as stacked() is.
  Expected<OwnedTensor> stacked_transposed(const std::string& name, int64_t n, int64_t rows, int64_t cols, Slice items,
                                           const std::vector<int64_t>& rows_kept, Slice col_slice = {});
  // gpt-oss's MXFP4 experts (quant_method mxfp4): W [n, rows, cols] stored as `name`_blocks u8
  // [n, rows, cols / 32, 16] and `name`_scales u8 [n, rows, cols / 32], transformers' layout
  // (element 2k of a block in the low nibble of byte k, 2k + 1 in the high one; value =
  // E2M1(nibble) * 2^(scale - 127)), prepared as stacked() prepares a float tensor: of the
  // matrices `items`, of each the rows `rows_kept` in that order and the columns col_slice.
  // Each row is repacked exactly into ggml's MXFP4 blocks (quant::repack_hf_mxfp4) and kept so
  // where the backend multiplies mxfp4, no other type is asked for and col_slice is whole
  // blocks; else dequantized exactly to f32 (then quantized when a block type is asked for).
  Expected<OwnedTensor> stacked_mxfp4(const std::string& name, int64_t n, int64_t rows, int64_t cols, Slice items,
                                      const std::vector<int64_t>& rows_kept, Slice col_slice = {});
  // Checks that tensor `name` has `shape` and counts its parameters without loading it: an
  // expert that another expert-parallel rank holds, so every rank reports the model's size.
  Status skip(const std::string& name, const std::vector<int64_t>& shape);
  // Matrix `name` [rows, cols] seen as blocks of `period` rows (rows a multiple of it): of each
  // block the rows `within` (a slice of [0, period)), stacked into [n_blocks * within, cols]; or,
  // with transpose_blocks, each block's rows transposed, stacked into [n_blocks * cols, within].
  // DeepSeek's kv_b_proj [H (nope + v), R] splits this way into the per-head W_UK^T [H R, nope]
  // and W_UV [H v, R] of the absorbed attention, and q_b_proj into its nope and rope rows.
  // `blocks` keeps only those blocks (a tensor-parallel rank's heads).
  Expected<OwnedTensor> row_blocks(const std::string& name, int64_t rows, int64_t cols, int64_t period, Slice within,
                                   bool transpose_blocks = false, Slice blocks = {});
  // While false, matrix(), fused() and stacked() load as if want were nullopt when it is a block
  // type (a MoE block's router stays float under `weights: q8_0`). True by default.
  void quantize_linear(bool on) { quantize_linear_ = on; }
  // Whether the checkpoint holds a tensor called `name` (to tell one layout from another).
  bool has(const std::string& name) const { return ck_.tensors().count(name) > 0 || Int4Weight::stored(ck_, name); }
  // Vectors names[i] [sizes[i]] (checked), of each the elements slices[i] (all when slices is
  // empty), concatenated and uploaded as f32 (norm weights, biases), each element plus `offset`
  // (added in f32: Gemma's norms scale by 1 + w).
  Expected<OwnedTensor> vector_f32(const std::vector<std::string>& names, const std::vector<int64_t>& sizes,
                                   const std::vector<Slice>& slices = {}, float offset = 0.0f);
  // A vector [size] of `value`, uploaded as f32: a weight the checkpoint does not store (OLMo 1's
  // LayerNorms without weights take unit ones).
  Expected<OwnedTensor> constant_f32(int64_t size, float value) {
    return upload_f32(std::vector<float>(static_cast<size_t>(size), value));
  }
  // A scalar parameter (shape [] or [1], a float type) read to the host: Apertus's xIELU
  // parameters. corrupt naming it when absent, of another shape or not finite.
  Expected<float> scalar_f32(const std::string& name);

  // Matrices `names` [rows, cols] each (checked; floats) uploaded as f32: of the rows `row_slice`,
  // row by row, of each matrix in turn the elements `kept` (column indices, in that order):
  // [row_slice rows * names * kept]. gpt-oss's per-expert biases: the Hub's [E, 2I] (gate and up
  // interleaved) and [E, hidden]; GGUF's gate and up [E, I] each, joined per expert; Command R+'s
  // per-head q/k norm weights [heads, head_dim], a rank's heads.
  Expected<OwnedTensor> gathered_f32(const std::vector<std::string>& names, int64_t rows, int64_t cols,
                                     Slice row_slice, const std::vector<int64_t>& kept);
  // Matrix `name` [rows, cols] (checked; floats) with its columns in the order `kept` (indices
  // in [0, cols)), staged as f32 and prepared for matmul as matrix() prepares it:
  // [rows, kept.size()]. Mistral 3's patch merger, whose input unfolds channel-major, read
  // patch-major.
  Expected<OwnedTensor> matrix_columns(const std::string& name, int64_t rows, int64_t cols,
                                       const std::vector<int64_t>& kept);

  // Matrix `name` [rows, cols] (a vector [rows] when cols is 0; floats) with row r times
  // `scale`[r] (a float vector [rows]), staged as f32: a matrix prepared as matrix() prepares it,
  // a vector uploaded f32. A layer scale folded into the linear layer before it (InternViT's
  // lambda_1 / lambda_2: lambda * (W x + b) = (lambda W) x + lambda b).
  Expected<OwnedTensor> rows_scaled(const std::string& name, int64_t rows, int64_t cols, const std::string& scale);

  // Elements of the checkpoint tensors loaded, counted whole even when only a slice is kept (so
  // every tensor-parallel rank reports the model's size) and once however many parts of a
  // tensor are loaded.
  int64_t n_params() const { return n_params_; }
  int64_t n_bytes() const { return n_bytes_; }  // bytes of the prepared weights (this rank's shard)

 private:
  Expected<OwnedTensor> prepare(const Tensor& host, std::optional<DType> want);
  // host uploaded as an f32 vector [host.size()] (norm weights, biases), its bytes counted.
  Expected<OwnedTensor> upload_f32(const std::vector<float>& host);
  // gathered_f32's elements on the host: [row_slice rows * names * kept] f32.
  Expected<std::vector<float>> gather_host(const std::vector<std::string>& names, int64_t rows, int64_t cols,
                                           Slice row_slice, const std::vector<int64_t>& kept);
  // The parts names[i] [rows[i], cols] opened (checked) into parts, their row_slices checked;
  // the rows they keep in all.
  Expected<int64_t> open_parts(const std::vector<std::string>& names, const std::vector<int64_t>& rows, int64_t cols,
                               const std::vector<Slice>& row_slices, std::vector<StoredWeight>& parts);
  // The type weight w is staged in on the host for `want` when columns `cols` of its `full` are
  // kept: the stored type for float weights; for block types the stored one where keep_blocks
  // and the rules above allow, else (and for fp8) the float type asked for or f32.
  DType staging_dtype(const StoredWeight& w, std::optional<DType> want, Slice cols, int64_t full,
                      bool keep_blocks) const;
  std::optional<DType> stored_blocks_target(bool all_blocks, DType staged, std::optional<DType> want,
                                            int64_t n_cols) const;
  std::optional<DType> linear_want() const;  // want_, less a block type while !quantize_linear_
  std::optional<DType> float_want() const;   // want_ unless it is a block type
  void count(const std::string& name, int64_t numel);
  Expected<OwnedTensor> load_matrix(const std::string& name, int64_t rows, int64_t cols, Slice row_slice,
                                    Slice col_slice, std::optional<DType> want);
  const Checkpoint& ck_;
  Backend& backend_;
  std::optional<DType> want_;
  bool quantize_linear_ = true;
  int64_t n_params_ = 0;
  std::set<std::string> counted_;  // names already in n_params_
  int64_t n_bytes_ = 0;
};

}  // namespace brigade
