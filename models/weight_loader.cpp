#include "models/weight_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant.h"

namespace brigade {
namespace {

void check_slice(const Slice& s, int64_t full) {
  BRIGADE_CHECK(s.begin >= 0 && s.length(full) >= 0 && s.begin + s.length(full) <= full,
                "a weight slice lies inside its tensor (the model computes it from the config)");
}

Slice part_slice(const std::vector<Slice>& slices, size_t i) {
  BRIGADE_CHECK(slices.empty() || i < slices.size(), "one slice per part, or none");
  return slices.empty() ? Slice{} : slices[i];
}

bool is_block_type(std::optional<DType> t) { return t && is_block_quantized(*t); }

// prepare_weight's `want` for a weight staged as `staged`: a block type staged is kept as it is.
std::optional<DType> target(DType staged, std::optional<DType> want) {
  return is_block_quantized(staged) ? std::nullopt : want;
}

}  // namespace

// A GGUF block-quantized weight that cannot stay as stored (a type without kernels, such as Q5_0,
// or a fused stack of different types, such as Q4_K_M's Q4_K q|k with a Q6_K v, loaded by fused()
// rather than fused_linear()) is requantized to q8_0 where the backend multiplies q8_0, instead of going to the backend as f32: 8.5 bits per
// weight instead of 32, for at most half a q8_0 step of error per weight (weights: f32 keeps the
// dequantized values exactly). Only under weights: auto; a GPU still gets bf16.
std::optional<DType> WeightLoader::stored_blocks_target(bool all_blocks, DType staged, std::optional<DType> want,
                                                        int64_t n_cols) const {
  if (all_blocks && staged == DType::f32 && !want && n_cols % 32 == 0 && backend_.supports_weight_dtype(DType::q8_0))
    return DType::q8_0;
  return target(staged, want);
}

Expected<OwnedTensor> WeightLoader::prepare(const Tensor& host, std::optional<DType> want) {
  auto w = backend_.prepare_weight(host, want);
  if (!w) return w.status();
  n_bytes_ += static_cast<int64_t>(w->tensor.nbytes());
  return w;
}

void WeightLoader::count(const std::string& name, int64_t numel) {
  if (counted_.insert(name).second) n_params_ += numel;
}

std::optional<DType> WeightLoader::linear_want() const {
  return !quantize_linear_ && is_block_type(want_) ? std::nullopt : want_;
}

std::optional<DType> WeightLoader::float_want() const { return is_block_type(want_) ? std::nullopt : want_; }

DType WeightLoader::staging_dtype(const StoredWeight& w, std::optional<DType> want, Slice cols, int64_t full,
                                  bool keep_blocks) const {
  if (!w.quantized() && !w.blocks()) return w.raw().dtype;
  if (w.ternary_dtype() && !want) return *w.ternary_dtype();  // a bitnet linear: its model's float type
  // int4 columns repack to the block type they fit (Q4_0 where exact, else Q4_1: Int4Weight)
  // where the backend multiplies it and no other type is asked for (nor float experts:
  // quantize_linear(false)); Q4_0 columns go to q4_1 when that is asked for.
  if (w.int4() && keep_blocks && quantize_linear_) {
    std::optional<DType> to = w.int4_block_type(cols.begin, cols.length(full));
    if (to && want == DType::q4_1) to = DType::q4_1;  // Q4_0 blocks are Q4_1 ones with m = -8 d
    if (to && (!want || want == to) && backend_.supports_weight_dtype(*to)) return *to;
  }
  const RawTensor& r = w.raw();
  const int64_t b = r.block_elems();
  const bool whole_blocks = cols.begin % b == 0 && cols.length(full) % b == 0;
  if (keep_blocks && w.blocks() && is_block_quantized(r.dtype) && (!want || *want == r.dtype) && whole_blocks &&
      backend_.supports_weight_dtype(r.dtype))
    return r.dtype;
  return fp8_staging_dtype(want);  // the float type asked for, else f32
}

Expected<OwnedTensor> WeightLoader::row_blocks(const std::string& name, int64_t rows, int64_t cols, int64_t period,
                                               Slice within, bool transpose_blocks, Slice blocks) {
  BRIGADE_ASSIGN_OR_RETURN(StoredWeight t, StoredWeight::open(ck_, name, {rows, cols}));
  count(name, t.numel());
  BRIGADE_CHECK(period > 0 && rows % period == 0, "row_blocks: rows are whole blocks (the model checks the config)");
  check_slice(within, period);
  check_slice(blocks, rows / period);
  const int64_t n_blocks = blocks.length(rows / period), keep = within.length(period);
  const DType staged = staging_dtype(t, float_want(), {}, cols, /*keep_blocks=*/false);
  const size_t es = dtype_size(staged);
  std::vector<uint8_t> host(static_cast<size_t>(n_blocks * keep * cols) * es), row(static_cast<size_t>(cols) * es);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int64_t r = 0; r < keep; ++r) {
      const int64_t src_row = (blocks.begin + b) * period + within.begin + r;
      if (!transpose_blocks) {
        t.read_row(0, src_row, 0, cols, staged, host.data() + static_cast<size_t>((b * keep + r) * cols) * es);
        continue;
      }
      t.read_row(0, src_row, 0, cols, staged, row.data());
      for (int64_t c = 0; c < cols; ++c)  // element (r, c) of block b goes to row b * cols + c, column r
        std::memcpy(host.data() + static_cast<size_t>((b * cols + c) * keep + r) * es, row.data() + static_cast<size_t>(c) * es, es);
    }
  }
  const Tensor view = transpose_blocks ? Tensor(host.data(), staged, {n_blocks * cols, keep})
                                       : Tensor(host.data(), staged, {n_blocks * keep, cols});
  return prepare(view, float_want());
}

Expected<OwnedTensor> WeightLoader::matrix(const std::string& name, int64_t rows, int64_t cols, Slice row_slice,
                                           Slice col_slice) {
  return load_matrix(name, rows, cols, row_slice, col_slice, linear_want());
}

Expected<OwnedTensor> WeightLoader::table(const std::string& name, int64_t rows, int64_t cols) {
  // fp8 linear layers leave the tables bf16; q8_0 / q4_0 / q4_1 ones leave them as stored.
  const bool fp8 = want_ == DType::f8e4m3;
  return load_matrix(name, rows, cols, {}, {}, fp8 ? std::optional<DType>(DType::bf16) : float_want());
}

Expected<OwnedTensor> WeightLoader::load_matrix(const std::string& name, int64_t rows, int64_t cols, Slice row_slice,
                                                Slice col_slice, std::optional<DType> want) {
  BRIGADE_ASSIGN_OR_RETURN(StoredWeight t, StoredWeight::open(ck_, name, {rows, cols}));
  count(name, t.numel());
  check_slice(row_slice, rows);
  check_slice(col_slice, cols);
  const int64_t n_rows = row_slice.length(rows), n_cols = col_slice.length(cols);
  const DType staged = staging_dtype(t, want, col_slice, cols, /*keep_blocks=*/true);
  // Whole rows as stored are contiguous: a view of the mapping (not of a ternary linear's floats,
  // which read_row ternarizes or scales).
  if (n_cols == cols && staged == t.raw().dtype && !t.quantized()) {
    const uint8_t* first = t.raw().bytes.data() + t.raw().row_bytes(cols) * static_cast<size_t>(row_slice.begin);
    return prepare(Tensor(const_cast<uint8_t*>(first), staged, {n_rows, n_cols}), target(staged, want));
  }
  const size_t row_bytes = dtype_bytes(staged, n_cols);
  std::vector<uint8_t> host(static_cast<size_t>(n_rows) * row_bytes);
  for (int64_t r = 0; r < n_rows; ++r)
    t.read_row(0, row_slice.begin + r, col_slice.begin, n_cols, staged, host.data() + static_cast<size_t>(r) * row_bytes);
  return prepare(Tensor(host.data(), staged, {n_rows, n_cols}), stored_blocks_target(t.blocks(), staged, want, n_cols));
}

Expected<OwnedTensor> WeightLoader::stacked(const std::string& name, int64_t n, int64_t rows, int64_t cols, Slice items,
                                            const std::vector<Slice>& row_slices, Slice col_slice, bool keep_blocks) {
  BRIGADE_ASSIGN_OR_RETURN(StoredWeight t, StoredWeight::open(ck_, name, {n, rows, cols}));
  count(name, t.numel());
  check_slice(items, n);
  check_slice(col_slice, cols);
  const std::vector<Slice> within = row_slices.empty() ? std::vector<Slice>{Slice{}} : row_slices;
  int64_t kept_rows = 0;
  for (const Slice& s : within) {
    check_slice(s, rows);
    kept_rows += s.length(rows);
  }
  const int64_t n_items = items.length(n), n_cols = col_slice.length(cols);
  const std::optional<DType> want = linear_want();
  const DType staged = staging_dtype(t, want, col_slice, cols, keep_blocks);
  if (kept_rows == rows && n_cols == cols && staged == t.raw().dtype && !t.quantized()) {  // whole matrices: a view
    const uint8_t* first = t.raw().bytes.data() + t.raw().row_bytes(cols) * static_cast<size_t>(items.begin * rows);
    return prepare(Tensor(const_cast<uint8_t*>(first), staged, {n_items * rows, cols}), target(staged, want));
  }
  const size_t row_bytes = dtype_bytes(staged, n_cols);
  std::vector<uint8_t> host(static_cast<size_t>(n_items * kept_rows) * row_bytes);
  uint8_t* dst = host.data();
  for (int64_t i = 0; i < n_items; ++i)
    for (const Slice& s : within)
      for (int64_t r = s.begin; r < s.begin + s.length(rows); ++r, dst += row_bytes)
        t.read_row(items.begin + i, r, col_slice.begin, n_cols, staged, dst);
  const std::optional<DType> to = keep_blocks ? stored_blocks_target(t.blocks(), staged, want, n_cols) : want;
  return prepare(Tensor(host.data(), staged, {n_items * kept_rows, n_cols}), to);
}

Expected<OwnedTensor> WeightLoader::stacked_transposed(const std::string& name, int64_t n, int64_t rows, int64_t cols,
                                                       Slice items, const std::vector<int64_t>& rows_kept,
                                                       Slice col_slice) {
  BRIGADE_ASSIGN_OR_RETURN(StoredWeight t, StoredWeight::open(ck_, name, {n, cols, rows}));
  count(name, t.numel());
  if (t.quantized() || t.blocks())
    return unsupported(name + ": a transposed expert tensor must be stored as floats (got " +
                       dtype_name(t.raw().dtype) + ")");
  check_slice(items, n);
  check_slice(col_slice, cols);
  for (int64_t r : rows_kept) BRIGADE_CHECK(r >= 0 && r < rows, "stacked_transposed: kept rows lie inside the matrix");
  const int64_t n_items = items.length(n), n_cols = col_slice.length(cols), kept = static_cast<int64_t>(rows_kept.size());
  const DType staged = t.raw().dtype;
  const size_t es = dtype_size(staged);
  std::vector<uint8_t> host(static_cast<size_t>(n_items * kept * n_cols) * es), stored_row(static_cast<size_t>(rows) * es);
  for (int64_t i = 0; i < n_items; ++i) {
    uint8_t* matrix = host.data() + static_cast<size_t>(i * kept * n_cols) * es;
    for (int64_t c = 0; c < n_cols; ++c) {  // stored row c is column c of the matrix
      t.read_row(items.begin + i, col_slice.begin + c, 0, rows, staged, stored_row.data());
      for (int64_t r = 0; r < kept; ++r)
        std::memcpy(matrix + static_cast<size_t>(r * n_cols + c) * es,
                    stored_row.data() + static_cast<size_t>(rows_kept[static_cast<size_t>(r)]) * es, es);
    }
  }
  return prepare(Tensor(host.data(), staged, {n_items * kept, n_cols}), linear_want());
}

Expected<OwnedTensor> WeightLoader::stacked_mxfp4(const std::string& name, int64_t n, int64_t rows, int64_t cols,
                                                  Slice items, const std::vector<int64_t>& rows_kept, Slice col_slice) {
  if (cols % 32 != 0) return corrupt(name + ": MXFP4 rows are whole blocks of 32 values (got " + std::to_string(cols) + ")");
  const int64_t groups = cols / 32;
  BRIGADE_ASSIGN_OR_RETURN(RawTensor blocks, ck_.tensor(name + "_blocks", {n, rows, groups, 16}));
  BRIGADE_ASSIGN_OR_RETURN(RawTensor scales, ck_.tensor(name + "_scales", {n, rows, groups}));
  for (const RawTensor* t : {&blocks, &scales})
    if (t->dtype != DType::u8 && t->dtype != DType::i8)
      return corrupt(t->file + ": tensor '" + t->name + "' is stored " + t->type_name() + "; MXFP4 blocks and scales are U8");
  count(name, n * rows * cols);
  counted_.insert(name + "_scales");
  check_slice(items, n);
  check_slice(col_slice, cols);
  for (int64_t r : rows_kept) BRIGADE_CHECK(r >= 0 && r < rows, "stacked_mxfp4: kept rows lie inside the matrix");
  const int64_t n_items = items.length(n), n_cols = col_slice.length(cols), kept = static_cast<int64_t>(rows_kept.size());
  // Kept as MXFP4 where the backend multiplies it, no other type is asked for and the columns are
  // whole blocks (each row repacked into ggml's blocks, exactly); else dequantized to f32.
  const std::optional<DType> want = linear_want();
  const bool native = (!want || *want == DType::mxfp4) && backend_.supports_weight_dtype(DType::mxfp4) &&
                      col_slice.begin % 32 == 0 && n_cols % 32 == 0;
  const size_t row_bytes = dtype_bytes(DType::mxfp4, n_cols), full_row_bytes = dtype_bytes(DType::mxfp4, cols);
  std::vector<uint8_t> repacked(full_row_bytes);
  std::vector<float> row(native ? 0 : static_cast<size_t>(cols));
  std::vector<uint8_t> host(static_cast<size_t>(n_items * kept) * (native ? row_bytes : n_cols * sizeof(float)));
  for (int64_t i = 0; i < n_items; ++i) {
    for (int64_t r = 0; r < kept; ++r) {
      const int64_t src = (items.begin + i) * rows + rows_kept[static_cast<size_t>(r)];
      quant::repack_hf_mxfp4(blocks.bytes.data() + src * groups * 16, scales.bytes.data() + src * groups, 1, cols,
                             repacked.data());
      const int64_t dst = i * kept + r;
      if (native) {
        std::memcpy(host.data() + static_cast<size_t>(dst) * row_bytes,
                    repacked.data() + dtype_bytes(DType::mxfp4, col_slice.begin), row_bytes);
        continue;
      }
      quant::dequantize_row(repacked.data(), DType::mxfp4, row.data(), cols);
      std::memcpy(host.data() + static_cast<size_t>(dst * n_cols) * sizeof(float), row.data() + col_slice.begin,
                  static_cast<size_t>(n_cols) * sizeof(float));
    }
  }
  if (native) return prepare(Tensor(host.data(), DType::mxfp4, {n_items * kept, n_cols}), std::nullopt);
  return prepare(Tensor(host.data(), DType::f32, {n_items * kept, n_cols}), want);
}

Status WeightLoader::skip(const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.size() == 2 && Int4Weight::stored(ck_, name)) {  // checks the packed tensors' shapes
    BRIGADE_ASSIGN_OR_RETURN(StoredWeight w, StoredWeight::open(ck_, name, shape));
    count(name, w.numel());
    return Status::ok();
  }
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(name, shape));
  count(name, t.numel());
  return Status::ok();
}

Expected<int64_t> WeightLoader::open_parts(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                                           int64_t cols, const std::vector<Slice>& row_slices,
                                           std::vector<StoredWeight>& parts) {
  int64_t total_rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(StoredWeight t, StoredWeight::open(ck_, names[i], {rows[i], cols}));
    check_slice(part_slice(row_slices, i), rows[i]);
    total_rows += part_slice(row_slices, i).length(rows[i]);
    parts.push_back(std::move(t));
  }
  return total_rows;
}

Expected<OwnedTensor> WeightLoader::fused(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                                          int64_t cols, const std::vector<Slice>& row_slices, Slice col_slice) {
  BRIGADE_CHECK(names.size() == rows.size() && !names.empty(), "one row count per part");
  check_slice(col_slice, cols);
  const int64_t n_cols = col_slice.length(cols);
  std::vector<StoredWeight> parts;
  BRIGADE_ASSIGN_OR_RETURN(const int64_t total_rows, open_parts(names, rows, cols, row_slices, parts));
  // Parts staged alike keep that type (a block type the backend multiplies, or fp8 parts: the
  // float type asked for); mixed parts go f32.
  const std::optional<DType> want = linear_want();
  DType staged = staging_dtype(parts[0], want, col_slice, cols, /*keep_blocks=*/true);
  for (const auto& p : parts)
    staged = staging_dtype(p, want, col_slice, cols, /*keep_blocks=*/true) == staged ? staged : DType::f32;
  const size_t row_bytes = dtype_bytes(staged, n_cols);
  std::vector<uint8_t> host(static_cast<size_t>(total_rows) * row_bytes);
  uint8_t* dst = host.data();
  for (size_t i = 0; i < parts.size(); ++i) {
    count(names[i], parts[i].numel());
    const Slice s = part_slice(row_slices, i);
    for (int64_t r = s.begin; r < s.begin + s.length(rows[i]); ++r, dst += row_bytes)
      parts[i].read_row(0, r, col_slice.begin, n_cols, staged, dst);
  }
  // Without an explicit target the backend keeps the staged type (a GPU makes it bf16).
  const bool all_blocks = std::all_of(parts.begin(), parts.end(), [](const StoredWeight& p) { return p.blocks(); });
  return prepare(Tensor(host.data(), staged, {total_rows, n_cols}), stored_blocks_target(all_blocks, staged, want, n_cols));
}

Expected<OwnedTensor> WeightLoader::scaled(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                                           int64_t cols, const std::vector<Slice>& row_slices,
                                           const std::vector<float>& scales, Slice col_slice) {
  BRIGADE_CHECK(names.size() == rows.size() && names.size() == scales.size() && !names.empty(), "one row count and scale per part");
  // Nothing to scale (a GGUF file's, whose converter folded them in): as fused(), block types kept.
  if (std::all_of(scales.begin(), scales.end(), [](float s) { return s == 1.0f; }))
    return fused(names, rows, cols, row_slices, col_slice);
  check_slice(col_slice, cols);
  const int64_t n_cols = col_slice.length(cols);
  std::vector<StoredWeight> parts;
  BRIGADE_ASSIGN_OR_RETURN(const int64_t total_rows, open_parts(names, rows, cols, row_slices, parts));
  std::vector<float> host(static_cast<size_t>(total_rows * n_cols));
  float* dst = host.data();
  for (size_t i = 0; i < parts.size(); ++i) {
    count(names[i], parts[i].numel());
    const Slice s = part_slice(row_slices, i);
    for (int64_t r = s.begin; r < s.begin + s.length(rows[i]); ++r, dst += n_cols) {
      parts[i].read_row(0, r, col_slice.begin, n_cols, DType::f32, reinterpret_cast<uint8_t*>(dst));
      for (int64_t c = 0; c < n_cols; ++c) dst[c] *= scales[i];
    }
  }
  std::optional<DType> to = linear_want();
  if (!to && !parts[0].blocks() && !parts[0].quantized()) to = parts[0].raw().dtype;
  return prepare(Tensor(host.data(), DType::f32, {total_rows, n_cols}), to);
}

Expected<LinearWeight> WeightLoader::fused_linear(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                                                  int64_t cols, const std::vector<Slice>& row_slices) {
  BRIGADE_CHECK(names.size() == rows.size() && !names.empty(), "one row count per part");
  const std::optional<DType> want = linear_want();
  // Each part's staged type, and the groups of consecutive parts staged alike.
  std::vector<DType> staged;
  bool all_blocks = true;
  for (size_t i = 0; i < names.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(StoredWeight t, StoredWeight::open(ck_, names[i], {rows[i], cols}));
    all_blocks = all_blocks && t.blocks();
    staged.push_back(staging_dtype(t, want, {}, cols, /*keep_blocks=*/true));
  }
  const bool mixed = std::any_of(staged.begin(), staged.end(), [&](DType t) { return t != staged[0]; });
  auto block_target = [&](DType t) {
    const std::optional<DType> to = is_block_quantized(t) ? t : stored_blocks_target(true, t, want, cols);
    return to && is_block_quantized(*to);
  };
  LinearWeight out;
  if (!mixed || want || !all_blocks || !backend_.supports_stacked_matmul() ||
      !std::all_of(staged.begin(), staged.end(), block_target)) {
    BRIGADE_ASSIGN_OR_RETURN(OwnedTensor w, fused(names, rows, cols, row_slices));
    out.groups.push_back(std::move(w));
  } else {
    for (size_t b = 0; b < names.size();) {
      size_t e = b + 1;
      while (e < names.size() && staged[e] == staged[b]) ++e;
      const auto part = [&](const auto& v) { return std::vector(v.begin() + static_cast<std::ptrdiff_t>(b), v.begin() + static_cast<std::ptrdiff_t>(e)); };
      BRIGADE_ASSIGN_OR_RETURN(OwnedTensor w, fused(part(names), part(rows), cols, row_slices.empty() ? row_slices : part(row_slices)));
      out.groups.push_back(std::move(w));
      b = e;
    }
  }
  for (const OwnedTensor& g : out.groups) out.views.push_back(g.tensor);
  return out;
}

size_t LinearWeight::nbytes() const {
  size_t n = 0;
  for (const OwnedTensor& g : groups) n += g.tensor.nbytes();
  return n;
}

void LinearWeight::matmul(Backend& backend, const Tensor& x, const Tensor& bias, const Tensor& out) const {
  if (views.size() == 1) backend.matmul(x, views[0], bias, out);
  else backend.matmul_stacked(x, views, bias, out);
}

Expected<OwnedTensor> WeightLoader::upload_f32(const std::vector<float>& host) {
  const size_t bytes = host.size() * sizeof(float);
  BRIGADE_ASSIGN_OR_RETURN(Buffer buf, backend_.allocate(std::max<size_t>(bytes, 1)));
  OwnedTensor out;
  out.tensor = buf.view(DType::f32, {static_cast<int64_t>(host.size())});
  out.buffer = std::move(buf);
  backend_.upload(out.tensor, host.data());
  n_bytes_ += static_cast<int64_t>(bytes);
  return out;
}

Expected<OwnedTensor> WeightLoader::gathered_f32(const std::vector<std::string>& names, int64_t rows, int64_t cols,
                                                 Slice row_slice, const std::vector<int64_t>& kept) {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<float> host, gather_host(names, rows, cols, row_slice, kept));
  return upload_f32(host);
}

Expected<OwnedTensor> WeightLoader::matrix_columns(const std::string& name, int64_t rows, int64_t cols,
                                                   const std::vector<int64_t>& kept) {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<float> host, gather_host({name}, rows, cols, Slice{}, kept));
  return prepare(Tensor(host.data(), DType::f32, {rows, static_cast<int64_t>(kept.size())}), linear_want());
}

Expected<std::vector<float>> WeightLoader::gather_host(const std::vector<std::string>& names, int64_t rows,
                                                       int64_t cols, Slice row_slice,
                                                       const std::vector<int64_t>& kept) {
  BRIGADE_CHECK(!names.empty(), "gathered_f32: at least one matrix");
  std::vector<RawTensor> parts;
  for (const std::string& name : names) {
    BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(name, {rows, cols}));
    if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
      return corrupt(t.file + ": tensor '" + name + "' is stored " + t.type_name() + "; biases and norm weights must be F32, BF16 or F16");
    count(name, t.numel());
    parts.push_back(std::move(t));
  }
  check_slice(row_slice, rows);
  for (int64_t c : kept) BRIGADE_CHECK(c >= 0 && c < cols, "gathered_f32: kept columns lie inside the matrix");
  std::vector<float> host;
  host.reserve(static_cast<size_t>(row_slice.length(rows)) * kept.size() * parts.size());
  for (int64_t r = row_slice.begin; r < row_slice.begin + row_slice.length(rows); ++r)
    for (const RawTensor& t : parts)
      for (int64_t c : kept) host.push_back(static_cast<float>(t.at(r * cols + c)));
  return host;
}

Expected<OwnedTensor> WeightLoader::rows_scaled(const std::string& name, int64_t rows, int64_t cols,
                                                const std::string& scale) {
  auto read = [&](const std::string& n, const std::vector<int64_t>& shape) -> Expected<std::vector<float>> {
    BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(n, shape));
    if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
      return corrupt(t.file + ": tensor '" + n + "' is stored " + t.type_name() + "; a layer-scaled weight must be F32, BF16 or F16");
    count(n, t.numel());
    std::vector<float> host(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) host[static_cast<size_t>(i)] = static_cast<float>(t.at(i));
    return host;
  };
  BRIGADE_ASSIGN_OR_RETURN(std::vector<float> s, read(scale, {rows}));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<float> host, read(name, cols > 0 ? std::vector<int64_t>{rows, cols}
                                                                         : std::vector<int64_t>{rows}));
  const int64_t width = std::max<int64_t>(cols, 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) host[static_cast<size_t>(r * width + c)] *= s[static_cast<size_t>(r)];
  if (cols == 0) return upload_f32(host);
  return prepare(Tensor(host.data(), DType::f32, {rows, cols}), linear_want());
}

Expected<float> WeightLoader::scalar_f32(const std::string& name) {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(name));
  if (t.numel() != 1 || t.shape.size() > 1 || t.block_quantized() ||
      (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
    return corrupt(t.file + ": tensor '" + name + "' must be one F32, BF16 or F16 value (shape [] or [1]); it is " +
                   t.type_name() + " " + t.shape_string());
  count(name, 1);
  const float v = static_cast<float>(t.at(0));
  if (!std::isfinite(v)) return corrupt(t.file + ": tensor '" + name + "' is not a finite number");
  return v;
}

Expected<OwnedTensor> WeightLoader::vector_f32(const std::vector<std::string>& names,
                                               const std::vector<int64_t>& sizes, const std::vector<Slice>& slices,
                                               float offset) {
  BRIGADE_CHECK(names.size() == sizes.size() && !names.empty(), "one size per part");
  std::vector<float> host;
  for (size_t i = 0; i < names.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck_.tensor(names[i], {sizes[i]}));
    if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
      return corrupt(t.file + ": tensor '" + names[i] + "' is stored " + t.type_name() +
                     "; norm weights and biases must be F32, BF16 or F16 (only linear weights may be fp8 or "
                     "block-quantized)");
    count(names[i], t.numel());
    const Slice s = part_slice(slices, i);
    check_slice(s, sizes[i]);
    for (int64_t k = s.begin; k < s.begin + s.length(sizes[i]); ++k) host.push_back(static_cast<float>(t.at(k)) + offset);
  }
  return upload_f32(host);
}

}  // namespace brigade
