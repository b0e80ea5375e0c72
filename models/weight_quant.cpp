#include "models/weight_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace brigade {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_float_type(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

float load_float(const uint8_t* p, DType t) {
  if (t == DType::f32) { float f; std::memcpy(&f, p, 4); return f; }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Writes values(i) for i in [0, n) into dst as `out` (a float type).
template <class Value>
void store_floats(DType out, int64_t n, uint8_t* dst, Value&& value) {
  if (out == DType::f32) {
    for (int64_t i = 0; i < n; ++i) {
      const float f = value(i);
      std::memcpy(dst + i * 4, &f, 4);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float f = value(i);
    const uint16_t h = out == DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f);
    std::memcpy(dst + i * 2, &h, 2);
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  RawTensor t;
  t.shape = s;
  return t.shape_string();
}

}  // namespace

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) {
      const float sign = (b & 0x80) ? -1.0f : 1.0f;
      const int exp = (b >> 3) & 0xf, man = b & 0x7;
      if (exp == 0xf && man == 0x7) t[static_cast<size_t>(b)] = std::copysign(NAN, sign);
      else if (exp == 0) t[static_cast<size_t>(b)] = sign * std::ldexp(static_cast<float>(man), -9);
      else t[static_cast<size_t>(b)] = sign * std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
    }
    return t;
  }();
  return table;
}

DType fp8_staging_dtype(std::optional<DType> want) {
  return want && is_float_type(*want) ? *want : DType::f32;
}

std::vector<float> quantize_fp8(const float* w, int64_t rows, int64_t cols, WeightScaling scaling, int64_t br,
                                int64_t bc, uint8_t* q) {
  BRIGADE_CHECK(scaling != WeightScaling::none, "quantize_fp8 needs a scaling");
  if (scaling == WeightScaling::channel) br = 1, bc = cols;
  if (scaling == WeightScaling::tensor) br = rows, bc = cols;
  BRIGADE_CHECK(br > 0 && bc > 0, "positive block sizes");
  const int64_t nrb = ceil_div(rows, br), ncb = ceil_div(cols, bc);
  std::vector<float> scales(static_cast<size_t>(nrb * ncb));
  for (int64_t i = 0; i < nrb; ++i) {
    for (int64_t j = 0; j < ncb; ++j) {
      const int64_t r1 = std::min(rows, (i + 1) * br), c1 = std::min(cols, (j + 1) * bc);
      float amax = 0.0f;
      for (int64_t r = i * br; r < r1; ++r)
        for (int64_t c = j * bc; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
      scales[static_cast<size_t>(i * ncb + j)] = s;
      for (int64_t r = i * br; r < r1; ++r)
        for (int64_t c = j * bc; c < c1; ++c) q[r * cols + c] = f32_to_e4m3(w[r * cols + c] / s);
    }
  }
  return scales;
}

Expected<StoredWeight> StoredWeight::open(const Checkpoint& ck, const std::string& name,
                                          const std::vector<int64_t>& shape) {
  BRIGADE_CHECK(shape.size() == 2 || shape.size() == 3, "a stored weight is a matrix or a stack of matrices");
  StoredWeight w;
  w.items_ = shape.size() == 3 ? shape[0] : 1;
  w.rows_ = shape[shape.size() - 2];
  w.cols_ = shape.back();
  if (shape.size() == 2 && !ck.tensors().count(name) && Int4Weight::stored(ck, name)) {
    BRIGADE_ASSIGN_OR_RETURN(w.int4_, Int4Weight::open(ck, name, w.rows_, w.cols_));
    w.raw_ = w.int4_->packed();
    return w;
  }
  if (ck.config().quant.ternary_weight(name)) {
    BRIGADE_RETURN_IF_ERROR(w.open_ternary(ck, name));
    return w;
  }
  BRIGADE_ASSIGN_OR_RETURN(w.raw_, ck.tensor(name, shape));
  if (w.raw_.dtype == DType::f8e4m3) BRIGADE_RETURN_IF_ERROR(w.load_scales(ck, name));
  else if (!w.raw_.block_quantized() && !is_float_type(w.raw_.dtype))
    return corrupt(w.raw_.file + ": tensor '" + name + "' is stored " + w.raw_.type_name() +
                   "; a weight matrix must be F32, BF16, F16, F8_E4M3 or (GGUF) block-quantized");
  return w;
}

Status StoredWeight::load_scales(const Checkpoint& ck, const std::string& name) {
  const QuantConfig& q = ck.config().quant;
  const std::string where = raw_.file + ": tensor '" + name + "'";
  if (!q.quantized() || q.int4())
    return corrupt(where + " is stored F8_E4M3 but config.json has " +
                   (q.int4() ? "an int4 quantization_config (" + q.describe() + ")" : "no quantization_config") +
                   "; add the one the checkpoint was made with (quant_method fp8 or compressed-tensors)");
  if (q.ignored(name))
    return corrupt(where + " is stored F8_E4M3 but quantization_config lists its module as not quantized "
                   "(modules_to_not_convert / ignore); the checkpoint and its config.json disagree");
  scaling_ = q.scaling;
  block_rows_ = scaling_ == WeightScaling::block ? q.block_rows : scaling_ == WeightScaling::channel ? 1 : rows_;
  block_cols_ = scaling_ == WeightScaling::block ? q.block_cols : cols_;
  n_row_blocks_ = ceil_div(rows_, std::max<int64_t>(block_rows_, 1));
  n_col_blocks_ = ceil_div(cols_, std::max<int64_t>(block_cols_, 1));
  const std::string scale_name = q.scale_name(name);
  auto s = ck.tensor(scale_name);
  if (!s)
    return not_found(where + " is stored F8_E4M3 but its scale tensor '" + scale_name +
                     "' is missing (quant_method " + q.method + "); the checkpoint is incomplete");
  const std::string swhere = s->file + ": scale tensor '" + scale_name + "'";
  if (!is_float_type(s->dtype))
    return corrupt(swhere + " is " + dtype_name(s->dtype) + "; scales must be F32, BF16 or F16");
  // The shapes writers use: the scale grid with the items in front, trailing 1s allowed away.
  std::vector<int64_t> want;
  if (items_ > 1 || raw_.shape.size() == 3) want.push_back(items_);
  if (scaling_ != WeightScaling::tensor) want.push_back(n_row_blocks_);
  if (scaling_ == WeightScaling::block) want.push_back(n_col_blocks_);
  std::vector<int64_t> got;
  for (int64_t d : s->shape) got.push_back(d);
  while (!got.empty() && got.back() == 1 && got.size() > want.size()) got.pop_back();
  std::vector<int64_t> want_trimmed = want;
  while (!want_trimmed.empty() && want_trimmed.back() == 1 && want_trimmed.size() > got.size()) want_trimmed.pop_back();
  if (got != want_trimmed)
    return corrupt(swhere + " has shape " + s->shape_string() + " but weight " + raw_.shape_string() + " with " +
                   q.describe() + " needs " + shape_str(want) + "; the scales do not belong to this weight");
  scales_.resize(static_cast<size_t>(s->numel()));
  const size_t es = dtype_size(s->dtype);
  for (size_t i = 0; i < scales_.size(); ++i) {
    const float v = load_float(s->bytes.data() + i * es, s->dtype);
    if (!std::isfinite(v) || v < 0.0f)
      return corrupt(swhere + " holds " + std::to_string(v) + " at element " + std::to_string(i) +
                     "; scales must be finite and >= 0 (a corrupt or truncated checkpoint)");
    scales_[i] = v;
  }
  return Status::ok();
}

Status StoredWeight::open_ternary(const Checkpoint& ck, const std::string& name) {
  const QuantConfig& q = ck.config().quant;
  BRIGADE_ASSIGN_OR_RETURN(raw_, ck.tensor(name));
  const std::string where = raw_.file + ": tensor '" + name + "'";
  if (items_ != 1) return unsupported(where + ": stacked (expert) weights are not supported with quant_method bitnet");
  const bool packed = raw_.dtype == DType::u8;
  if (packed && q.ternary_linear == TernaryLinear::auto_online)
    return corrupt(where + " is stored U8 (packed ternary codes) but quantization_mode is online, which stores the "
                   "float weights; the checkpoint and its config.json disagree");
  if (!packed && q.ternary_linear == TernaryLinear::bitlinear)
    return corrupt(where + " is stored " + raw_.type_name() + " but linear_class bitlinear stores U8 packed ternary "
                   "codes; the checkpoint and its config.json disagree");
  if (!packed && !is_float_type(raw_.dtype))
    return corrupt(where + " is stored " + raw_.type_name() + "; a ternary linear is U8 (packed) or F32, BF16, F16");
  if (packed && rows_ % 4 != 0)
    return corrupt(where + ": a packed ternary weight holds 4 rows per stored row, so its " + std::to_string(rows_) +
                   " rows must be a multiple of 4");
  const std::vector<int64_t> want = {packed ? rows_ / 4 : rows_, cols_};
  if (raw_.shape != want)
    return corrupt(where + " has shape " + raw_.shape_string() + " but the config needs " + shape_str(want) +
                   (packed ? " (packed: 4 ternary rows per byte row)" : ""));
  if (q.ternary_linear == TernaryLinear::auto_online) {  // AutoBitLinear's WeightQuant, in f32
    double sum = 0.0;
    const size_t es = dtype_size(raw_.dtype);
    for (int64_t i = 0; i < raw_.numel(); ++i) sum += std::fabs(load_float(raw_.bytes.data() + static_cast<size_t>(i) * es, raw_.dtype));
    const float mean = static_cast<float>(sum / static_cast<double>(std::max<int64_t>(raw_.numel(), 1)));
    if (!std::isfinite(mean)) return corrupt(where + " holds a value that is not finite (a corrupt checkpoint)");
    ternary_scale_ = 1.0f / std::max(mean, 1e-5f);
    ternary_ = Ternary::online;
    ternary_dtype_ = raw_.dtype;
    return Status::ok();
  }
  const std::string scale_name = name.substr(0, name.size() - 6) + "weight_scale";  // x.weight -> x.weight_scale
  auto scale = ck.tensor(scale_name);
  if (!scale)
    return not_found(where + " is a ternary linear but its scale tensor '" + scale_name +
                     "' is missing (quant_method bitnet); the checkpoint is incomplete");
  if (!is_float_type(scale->dtype) || scale->numel() != 1)
    return corrupt(scale->file + ": scale tensor '" + scale_name + "' must be one F32, BF16 or F16 value (got " +
                   scale->type_name() + " " + scale->shape_string() + ")");
  const float v = load_float(scale->bytes.data(), scale->dtype);
  const bool divides = q.ternary_linear == TernaryLinear::bitlinear;  // BitLinear: y / weight_scale
  if (!std::isfinite(v) || (divides && !(v > 0.0f)))
    return corrupt(scale->file + ": scale tensor '" + scale_name + "' holds " + std::to_string(v) + "; it must be " +
                   (divides ? "finite and > 0 (BitLinear divides by it)" : "finite"));
  ternary_scale_ = divides ? 1.0f / v : v;
  ternary_ = packed ? Ternary::packed : Ternary::codes;
  ternary_dtype_ = packed ? scale->dtype : raw_.dtype;
  return Status::ok();
}

// transformers' unpack_weights: stored row r % (rows / 4) holds row r's code in bits
// 2 (r / (rows / 4)) and up, the value + 1 (a 3, which pack_weights never writes, reads as 2).
void StoredWeight::read_ternary(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const {
  const float m = ternary_scale_;
  if (ternary_ == Ternary::packed) {
    const int64_t stored_rows = rows_ / 4, shift = 2 * (row / stored_rows);
    const uint8_t* src = raw_.bytes.data() + static_cast<size_t>((row % stored_rows) * cols_ + col);
    store_floats(out, n, dst, [&](int64_t i) { return static_cast<float>(((src[i] >> shift) & 3) - 1) * m; });
    return;
  }
  const size_t es = dtype_size(raw_.dtype);
  const uint8_t* src = raw_.bytes.data() + static_cast<size_t>(row * cols_ + col) * es;
  auto value = [&](int64_t i) { return load_float(src + static_cast<size_t>(i) * es, raw_.dtype); };
  if (ternary_ == Ternary::codes) {
    store_floats(out, n, dst, [&](int64_t i) { return value(i) * m; });
    return;
  }
  store_floats(out, n, dst, [&](int64_t i) { return std::clamp(std::nearbyint(value(i) * m), -1.0f, 1.0f) / m; });
}

void StoredWeight::read_blocks(int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const {
  const int64_t b = raw_.block_elems();
  const uint8_t* src = raw_.bytes.data() + raw_.row_bytes(cols_) * static_cast<size_t>(row);
  if (out == raw_.dtype) {
    BRIGADE_CHECK(col % b == 0 && n % b == 0, "a quantized row is copied in whole blocks (the loader checks)");
    std::memcpy(dst, src + raw_.row_bytes(col), raw_.row_bytes(n));
    return;
  }
  BRIGADE_CHECK(is_float_type(out), "quantized weights are dequantized to f32, bf16 or f16");
  const int64_t first = col / b * b, last = (col + n + b - 1) / b * b;  // the blocks [col, col + n) lies in
  std::vector<float> values(static_cast<size_t>(last - first));
  raw_.dequantize(row * cols_ + first, last - first, values.data());
  store_floats(out, n, dst, [&](int64_t i) { return values[static_cast<size_t>(col - first + i)]; });
}

float StoredWeight::scale(int64_t item, int64_t row, int64_t col_block) const {
  const int64_t i = (item * n_row_blocks_ + row / block_rows_) * n_col_blocks_ + col_block;
  return scales_[static_cast<size_t>(i)];
}

void StoredWeight::read_row(int64_t item, int64_t row, int64_t col, int64_t n, DType out, uint8_t* dst) const {
  BRIGADE_CHECK(item >= 0 && item < items_ && row >= 0 && row < rows_ && col >= 0 && n >= 0 && col + n <= cols_,
                "read_row inside the weight (the loader checks its slices)");
  if (int4_) {
    int4_->read_row(row, col, n, out, dst);
    return;
  }
  if (ternary_ != Ternary::none) {
    BRIGADE_CHECK(is_float_type(out), "ternary weights are staged as f32, bf16 or f16");
    read_ternary(row, col, n, out, dst);
    return;
  }
  if (raw_.block_quantized()) {
    read_blocks(item * rows_ + row, col, n, out, dst);
    return;
  }
  const size_t es = dtype_size(raw_.dtype);
  const uint8_t* src = raw_.bytes.data() + static_cast<size_t>((item * rows_ + row) * cols_ + col) * es;
  if (out == raw_.dtype) {
    std::memcpy(dst, src, static_cast<size_t>(n) * es);
    return;
  }
  BRIGADE_CHECK(is_float_type(out), "weights are staged as f32, bf16 or f16");
  if (!quantized()) {
    store_floats(out, n, dst, [&](int64_t i) { return load_float(src + static_cast<size_t>(i) * es, raw_.dtype); });
    return;
  }
  const std::array<float, 256>& table = e4m3_table();
  const size_t out_es = dtype_size(out);
  for (int64_t c = col; c < col + n;) {  // one scale per column block
    const int64_t cb = c / block_cols_, end = std::min(col + n, (cb + 1) * block_cols_);
    const float s = scale(item, row, cb);
    const uint8_t* q = src + (c - col);
    store_floats(out, end - c, dst + static_cast<size_t>(c - col) * out_es, [&](int64_t i) { return table[q[i]] * s; });
    c = end;
  }
}

}  // namespace brigade
