#include "models/int4_weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant.h"

namespace brigade {
namespace {

// AutoAWQ packs outputs 8j + {0, 2, 4, 6, 1, 3, 5, 7} into nibbles 0..7 of word j: output 8j + k
// sits in nibble kAwqNibble[k] (awq/utils/packing_utils.py's AWQ_REVERSE_ORDER).
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_float_type(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

uint32_t word(const RawTensor& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.bytes.data() + static_cast<size_t>(i) * 4, 4);
  return w;
}

int nibble(uint32_t w, int k) { return static_cast<int>((w >> (4 * k)) & 15u); }

float float_at(const RawTensor& t, int64_t i) {
  float f;
  t.dequantize(i, 1, &f);
  return f;
}

int64_t int_at(const RawTensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data() + static_cast<size_t>(i) * dtype_size(t.dtype);
  if (t.dtype == DType::i64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (t.dtype == DType::i8) return static_cast<int8_t>(*p);
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::string module_of(const std::string& weight) {
  return weight.ends_with(".weight") ? weight.substr(0, weight.size() - 7) : weight;
}

std::string shape_str(std::vector<int64_t> s) {
  RawTensor t;
  t.shape = std::move(s);
  return t.shape_string();
}

// Tensor `name`, of one of `dtypes` and of `shape`; errors name it and the layer it belongs to.
Expected<RawTensor> packed_tensor(const Checkpoint& ck, const std::string& name, const std::vector<DType>& dtypes,
                                  const std::vector<int64_t>& shape, const std::string& layer) {
  auto t = ck.tensor(name);
  if (!t)
    return not_found(ck.path() + ": tensor '" + name + "' of int4 layer '" + layer + "' is missing (" +
                     ck.config().quant.describe() + "); the checkpoint is incomplete");
  const std::string where = t->file + ": tensor '" + name + "'";
  bool ok = false;
  std::string names;
  for (DType d : dtypes) ok = ok || t->dtype == d, names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
  if (!ok || t->block_quantized())
    return corrupt(where + " is " + t->type_name() + "; int4 layer '" + layer + "' needs it " + names);
  if (t->shape != shape)
    return corrupt(where + " has shape " + t->shape_string() + " but int4 layer '" + layer + "' " +
                   "needs " + shape_str(shape) + " (" + ck.config().quant.describe() +
                   "); the checkpoint does not match its config.json");
  return t;
}

}  // namespace

bool Int4Weight::stored(const Checkpoint& ck, const std::string& weight) {
  const QuantConfig& q = ck.config().quant;
  if (!q.int4() || !weight.ends_with(".weight")) return false;
  const std::string m = module_of(weight);
  return ck.tensors().count(m + (q.packing == Int4Packing::pack_quantized ? ".weight_packed" : ".qweight")) > 0;
}

Expected<Int4Weight> Int4Weight::open(const Checkpoint& ck, const std::string& weight, int64_t rows, int64_t cols) {
  const QuantConfig& q = ck.config().quant;
  BRIGADE_CHECK(q.int4(), "Int4Weight needs an int4 quantization_config");
  Int4Weight w;
  w.packing_ = q.packing;
  w.symmetric_ = q.symmetric;
  w.zero_plus_one_ = q.zero_plus_one;
  w.group_size_ = q.group_size;
  w.rows_ = rows;
  w.cols_ = cols;
  w.n_groups_ = q.group_size < 0 ? 1 : ceil_div(cols, q.group_size);
  BRIGADE_RETURN_IF_ERROR(w.open_tensors(ck, weight));
  BRIGADE_RETURN_IF_ERROR(w.load_groups(ck, weight));
  w.find_blocks();
  return w;
}

// The packed tensors, their dtypes and shapes by layout (quant_config.h).
Status Int4Weight::open_tensors(const Checkpoint& ck, const std::string& weight) {
  const std::string m = module_of(weight);
  const std::vector<DType> floats = {DType::f16, DType::bf16, DType::f32}, i32 = {DType::i32};
  const int64_t g = n_groups_;
  if (packing_ != Int4Packing::pack_quantized && (rows_ % 8 != 0 || cols_ % 8 != 0))
    return corrupt(ck.path() + ": int4 layer '" + m + "' is [" + std::to_string(rows_) + ", " + std::to_string(cols_) +
                   "]; " + ck.config().quant.method + " packs 8 values per int32 along both dims, so both must be "
                   "multiples of 8");
  if (packing_ == Int4Packing::gptq) {
    BRIGADE_ASSIGN_OR_RETURN(packed_, packed_tensor(ck, m + ".qweight", i32, {cols_ / 8, rows_}, m));
    BRIGADE_ASSIGN_OR_RETURN(zeros_, packed_tensor(ck, m + ".qzeros", i32, {g, rows_ / 8}, m));
    BRIGADE_ASSIGN_OR_RETURN(scales_, packed_tensor(ck, m + ".scales", floats, {g, rows_}, m));
  } else if (packing_ == Int4Packing::awq) {
    BRIGADE_ASSIGN_OR_RETURN(packed_, packed_tensor(ck, m + ".qweight", i32, {cols_, rows_ / 8}, m));
    BRIGADE_ASSIGN_OR_RETURN(zeros_, packed_tensor(ck, m + ".qzeros", i32, {g, rows_ / 8}, m));
    BRIGADE_ASSIGN_OR_RETURN(scales_, packed_tensor(ck, m + ".scales", floats, {g, rows_}, m));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(packed_, packed_tensor(ck, m + ".weight_packed", i32, {rows_, ceil_div(cols_, 8)}, m));
    BRIGADE_ASSIGN_OR_RETURN(scales_, packed_tensor(ck, m + ".weight_scale", floats, {rows_, g}, m));
    if (ck.tensors().count(m + ".weight_shape")) {
      BRIGADE_ASSIGN_OR_RETURN(RawTensor shape, packed_tensor(ck, m + ".weight_shape", {DType::i64, DType::i32}, {2}, m));
      if (int_at(shape, 0) != rows_ || int_at(shape, 1) != cols_)
        return corrupt(shape.file + ": tensor '" + m + ".weight_shape' says [" + std::to_string(int_at(shape, 0)) +
                       ", " + std::to_string(int_at(shape, 1)) + "] but the config needs [" + std::to_string(rows_) +
                       ", " + std::to_string(cols_) + "]");
    }
    if (!symmetric_) {
      const std::string zp = m + ".weight_zero_point";
      auto t = ck.tensor(zp);
      zeros_unpacked_ = t && t->dtype == DType::i8;
      BRIGADE_ASSIGN_OR_RETURN(zeros_, zeros_unpacked_ ? packed_tensor(ck, zp, {DType::i8}, {rows_, g}, m)
                                                       : packed_tensor(ck, zp, i32, {ceil_div(rows_, 8), g}, m));
    }
  }
  return check_scales();
}

Status Int4Weight::check_scales() const {
  for (int64_t i = 0; i < scales_.numel(); ++i) {
    const float s = float_at(scales_, i);
    if (!std::isfinite(s))
      return corrupt(scales_.file + ": tensor '" + scales_.name + "' holds " + std::to_string(s) + " at element " +
                     std::to_string(i) + "; scales must be finite (a corrupt or truncated checkpoint)");
  }
  return Status::ok();
}

// Each column's group: contiguous groups of group_size, or g_idx (act-order) where stored.
Status Int4Weight::load_groups(const Checkpoint& ck, const std::string& weight) {
  const std::string m = module_of(weight);
  const std::string g_idx = m + (packing_ == Int4Packing::gptq ? ".g_idx" : ".weight_g_idx");
  group_of_.resize(static_cast<size_t>(cols_));
  const bool use_g_idx = packing_ != Int4Packing::awq && ck.tensors().count(g_idx) &&
                         (packing_ != Int4Packing::gptq || ck.config().quant.act_order);
  if (!use_g_idx) {
    for (int64_t c = 0; c < cols_; ++c) group_of_[static_cast<size_t>(c)] = static_cast<int32_t>(group_size_ < 0 ? 0 : c / group_size_);
    return Status::ok();
  }
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, packed_tensor(ck, g_idx, {DType::i32, DType::i64}, {cols_}, m));
  for (int64_t c = 0; c < cols_; ++c) {
    const int64_t v = int_at(t, c);
    if (v < 0 || v >= n_groups_)
      return corrupt(t.file + ": tensor '" + g_idx + "' holds group " + std::to_string(v) + " at column " +
                     std::to_string(c) + "; the layer has " + std::to_string(n_groups_) + " groups");
    group_of_[static_cast<size_t>(c)] = static_cast<int32_t>(v);
  }
  return Status::ok();
}

// What a 32-column block repacks to: Q4_1 when one group covers it and that group's scales are
// all exact in f16 (ggml's d) with offsets s * z that f16 holds; Q4_0 when its zero points are
// also all 8.
constexpr uint8_t kFloat = 0, kQ4_1 = 1, kQ4_0 = 2;

void Int4Weight::find_blocks() {
  std::vector<uint8_t> group_kind(static_cast<size_t>(n_groups_), kQ4_0);
  for (int64_t g = 0; g < n_groups_; ++g) {
    uint8_t& kind = group_kind[static_cast<size_t>(g)];
    for (int64_t r = 0; r < rows_ && kind != kFloat; ++r) {
      const float s = scale(r, g);
      const int z = zero(r, g);
      if (f16_to_f32(f32_to_f16(s)) != s || !std::isfinite(f16_to_f32(f32_to_f16(s * static_cast<float>(z)))))
        kind = kFloat;
      else if (z != 8)
        kind = kQ4_1;
    }
  }
  block_kind_.assign(static_cast<size_t>(cols_ / quant::kQ4_0Block), kFloat);
  for (size_t b = 0; b < block_kind_.size(); ++b) {
    const int64_t first = static_cast<int64_t>(b) * quant::kQ4_0Block;
    bool one_group = true;
    for (int64_t c = first + 1; c < first + quant::kQ4_0Block && one_group; ++c) one_group = group(c) == group(first);
    block_kind_[b] = one_group ? group_kind[static_cast<size_t>(group(first))] : kFloat;
  }
}

std::optional<DType> Int4Weight::block_type(int64_t col, int64_t n) const {
  if (col % quant::kQ4_0Block != 0 || n % quant::kQ4_0Block != 0 || col + n > cols_ || n == 0) return std::nullopt;
  uint8_t kind = kQ4_0;
  for (int64_t b = col / quant::kQ4_0Block; b < (col + n) / quant::kQ4_0Block; ++b)
    kind = std::min(kind, block_kind_[static_cast<size_t>(b)]);
  if (kind == kFloat) return std::nullopt;
  return kind == kQ4_0 ? DType::q4_0 : DType::q4_1;
}

int Int4Weight::code(int64_t row, int64_t col) const {
  switch (packing_) {
    case Int4Packing::gptq: return nibble(word(packed_, (col / 8) * rows_ + row), static_cast<int>(col % 8));
    case Int4Packing::awq: return nibble(word(packed_, col * (rows_ / 8) + row / 8), kAwqNibble[row % 8]);
    default: return nibble(word(packed_, row * ceil_div(cols_, 8) + col / 8), static_cast<int>(col % 8));
  }
}

int Int4Weight::zero(int64_t row, int64_t group) const {
  switch (packing_) {
    case Int4Packing::gptq:
      return nibble(word(zeros_, group * (rows_ / 8) + row / 8), static_cast<int>(row % 8)) + (zero_plus_one_ ? 1 : 0);
    case Int4Packing::awq: return nibble(word(zeros_, group * (rows_ / 8) + row / 8), kAwqNibble[row % 8]);
    default:
      if (symmetric_) return 8;
      if (zeros_unpacked_) return static_cast<int>(int_at(zeros_, row * n_groups_ + group)) + 8;
      return nibble(word(zeros_, (row / 8) * n_groups_ + group), static_cast<int>(row % 8));
  }
}

float Int4Weight::scale(int64_t row, int64_t group) const {
  return float_at(scales_, packing_ == Int4Packing::pack_quantized ? row * n_groups_ + group : group * rows_ + row);
}

void Int4Weight::read_row(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const {
  BRIGADE_CHECK(row >= 0 && row < rows_ && col >= 0 && n >= 0 && col + n <= cols_, "read_row inside the layer");
  if (out == DType::q4_0 || out == DType::q4_1) {
    const std::optional<DType> fits = block_type(col, n);
    BRIGADE_CHECK(fits && (out == DType::q4_1 || *fits == DType::q4_0),
                  "Q4_0 / Q4_1 rows only where the blocks hold them (the loader checks)");
    const size_t block_bytes = dtype_block_bytes(out), codes = block_bytes - 16;  // the 16 code bytes end a block
    for (int64_t b = 0; b < n / quant::kQ4_0Block; ++b) {
      const int64_t first = col + b * quant::kQ4_0Block, g = group(first);
      uint8_t* block = dst + static_cast<size_t>(b) * block_bytes;
      const float s = scale(row, g);
      const uint16_t d = f32_to_f16(s);
      std::memcpy(block, &d, 2);
      if (out == DType::q4_1) {
        const uint16_t m = f32_to_f16(-s * static_cast<float>(zero(row, g)));  // s * z exact in f32; one rounding
        std::memcpy(block + 2, &m, 2);
      }
      for (int j = 0; j < 16; ++j)
        block[codes + j] = static_cast<uint8_t>(code(row, first + j) | (code(row, first + j + 16) << 4));
    }
    return;
  }
  BRIGADE_CHECK(is_float_type(out), "int4 weights are read as f32, bf16, f16, q4_0 or q4_1");
  const size_t es = dtype_size(out);
  int64_t g = -1;
  float s = 0.0f;
  int z = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = col + i;
    if (group(c) != g) g = group(c), s = scale(row, g), z = zero(row, g);
    const float v = s * static_cast<float>(code(row, c) - z);  // f16 / bf16 scales: exact (5-bit integer)
    uint8_t* p = dst + static_cast<size_t>(i) * es;
    if (out == DType::f32) {
      std::memcpy(p, &v, 4);
    } else {
      const uint16_t h = out == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(p, &h, 2);
    }
  }
}

}  // namespace brigade
