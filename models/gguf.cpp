#include "models/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace brigade {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxCount = 1ull << 28;  // no real file has more keys/elements/tensors

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const MappedFile& f) : f_(f) {}
  uint64_t pos() const { return pos_; }
  void seek(uint64_t p) { pos_ = p; }
  const std::string& path() const { return f_.path(); }

  template <typename T>
  Status read(T& out, const std::string& what) {
    BRIGADE_ASSIGN_OR_RETURN(auto b, f_.bytes(pos_, sizeof(T), what));
    std::memcpy(&out, b.data(), sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }
  // The bytes [from, pos()) already read (checked to fit when they were read).
  std::span<const uint8_t> since(uint64_t from) const { return *f_.bytes(from, pos_ - from, ""); }
  Status read_string(std::string& out, const std::string& what) {
    uint64_t n = 0;
    BRIGADE_RETURN_IF_ERROR(read(n, what));
    BRIGADE_ASSIGN_OR_RETURN(auto b, f_.bytes(pos_, n, what));
    out.assign(reinterpret_cast<const char*>(b.data()), b.size());
    pos_ += n;
    return Status::ok();
  }

 private:
  const MappedFile& f_;
  uint64_t pos_ = 0;
};

template <typename T>
Status read_num(Cursor& c, GgufValue& v, const std::string& what, bool integer) {
  T x{};
  BRIGADE_RETURN_IF_ERROR(c.read(x, what));
  v.number = static_cast<double>(x);
  if (integer) v.integer = static_cast<int64_t>(x);
  return Status::ok();
}

// Reads one scalar of `type` into v (number/integer or str).
Status read_scalar(Cursor& c, GgufType type, GgufValue& v, const std::string& what) {
  switch (type) {
    case GgufType::u8: return read_num<uint8_t>(c, v, what, true);
    case GgufType::i8: return read_num<int8_t>(c, v, what, true);
    case GgufType::u16: return read_num<uint16_t>(c, v, what, true);
    case GgufType::i16: return read_num<int16_t>(c, v, what, true);
    case GgufType::u32: return read_num<uint32_t>(c, v, what, true);
    case GgufType::i32: return read_num<int32_t>(c, v, what, true);
    case GgufType::u64: return read_num<uint64_t>(c, v, what, true);
    case GgufType::i64: return read_num<int64_t>(c, v, what, true);
    case GgufType::f32: return read_num<float>(c, v, what, false);
    case GgufType::f64: return read_num<double>(c, v, what, false);
    case GgufType::boolean: {
      uint8_t b = 0;
      BRIGADE_RETURN_IF_ERROR(c.read(b, what));
      if (b > 1) return corrupt(c.path() + ": " + what + ": bool value " + std::to_string(b) + " is not 0 or 1");
      v.integer = b;
      v.number = b;
      return Status::ok();
    }
    case GgufType::string: return c.read_string(v.str, what);
    case GgufType::array: break;
  }
  return corrupt(c.path() + ": " + what + ": unknown value type " + std::to_string(static_cast<uint32_t>(type)));
}

Status read_value(Cursor& c, GgufValue& v, const std::string& what) {
  uint32_t t = 0;
  BRIGADE_RETURN_IF_ERROR(c.read(t, what));
  v.type = static_cast<GgufType>(t);
  const uint64_t start = c.pos();
  if (v.type != GgufType::array) {
    BRIGADE_RETURN_IF_ERROR(read_scalar(c, v.type, v, what));
    if (v.type != GgufType::string) v.raw = c.since(start);
    return Status::ok();
  }
  uint32_t et = 0;
  uint64_t n = 0;
  BRIGADE_RETURN_IF_ERROR(c.read(et, what));
  BRIGADE_RETURN_IF_ERROR(c.read(n, what));
  if (n > kMaxCount) return corrupt(c.path() + ": " + what + ": array of " + std::to_string(n) + " elements is implausible");
  v.elem_type = static_cast<GgufType>(et);
  if (v.elem_type == GgufType::array) return unsupported(c.path() + ": " + what + ": nested arrays are not supported");
  GgufValue e;
  const uint64_t elements = c.pos();
  for (uint64_t i = 0; i < n; ++i) {
    BRIGADE_RETURN_IF_ERROR(read_scalar(c, v.elem_type, e, what));
    if (v.elem_type == GgufType::string) v.strs.push_back(std::move(e.str));
    else v.numbers.push_back(e.number);
  }
  if (v.elem_type != GgufType::string) v.raw = c.since(elements);
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  BRIGADE_ASSIGN_OR_RETURN(g->file_, MappedFile::open(path));
  BRIGADE_RETURN_IF_ERROR(g->parse());
  return g;
}

Status GgufFile::parse() {
  const std::string& p = file_->path();
  Cursor c(*file_);
  uint32_t magic = 0;
  BRIGADE_RETURN_IF_ERROR(c.read(magic, "GGUF header"));
  if (magic != kMagic) return corrupt(p + ": not a GGUF file (bad magic)");
  BRIGADE_RETURN_IF_ERROR(c.read(version_, "GGUF header"));
  if (version_ != 2 && version_ != 3)
    return unsupported(p + ": GGUF version " + std::to_string(version_) + " is not supported; supported: 2, 3");
  uint64_t n_tensors = 0, n_kv = 0;
  BRIGADE_RETURN_IF_ERROR(c.read(n_tensors, "GGUF header"));
  BRIGADE_RETURN_IF_ERROR(c.read(n_kv, "GGUF header"));
  if (n_tensors > kMaxCount || n_kv > kMaxCount) return corrupt(p + ": implausible tensor or key count");
  // A key/value takes at least 13 bytes (u64 length, u32 type, one value byte) and a tensor
  // descriptor at least 32 (u64 length, u32 n_dims, one u64 dim, u32 type, u64 offset).
  if (n_kv * 13 + n_tensors * 32 > file_->size() - c.pos())
    return corrupt(p + ": the header claims " + std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                   " keys, more than the file's " + std::to_string(file_->size()) + " bytes can hold (truncated or corrupt file)");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    BRIGADE_RETURN_IF_ERROR(c.read_string(key, "metadata key #" + std::to_string(i)));
    GgufValue v;
    BRIGADE_RETURN_IF_ERROR(read_value(c, v, "metadata '" + key + "'"));
    kv_[key] = std::move(v);
  }
  struct Pending { GgufTensorInfo info; uint64_t offset; };
  std::vector<Pending> pending;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Pending t;
    BRIGADE_RETURN_IF_ERROR(c.read_string(t.info.name, "tensor #" + std::to_string(i)));
    const std::string what = "tensor '" + t.info.name + "'";
    uint32_t n_dims = 0;
    BRIGADE_RETURN_IF_ERROR(c.read(n_dims, what));
    if (n_dims == 0 || n_dims > 4) return corrupt(p + ": " + what + " has " + std::to_string(n_dims) + " dims (1..4)");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t n = 0;
      BRIGADE_RETURN_IF_ERROR(c.read(n, what));
      if (n == 0 || n > (1ull << 40) || static_cast<uint64_t>(numel) > (1ull << 40) / n)
        return corrupt(p + ": " + what + " has an implausible shape");
      t.info.dims.push_back(static_cast<int64_t>(n));
      numel *= static_cast<int64_t>(n);
    }
    uint32_t type = 0;
    BRIGADE_RETURN_IF_ERROR(c.read(type, what));
    BRIGADE_RETURN_IF_ERROR(c.read(t.offset, what));
    t.info.type = ggml_type_info(type);
    if (!t.info.type)
      return unsupported(p + ": " + what + " has " + (ggml_type_name_of(type).starts_with("type ") ? "unknown ggml " : "ggml type ") +
                         ggml_type_name_of(type) + ", which brigade cannot read; supported: " + ggml_supported_types() +
                         " (re-quantize the model to one of them, e.g. Q4_K_M)");
    if (t.info.dims[0] % t.info.type->block_elems != 0)
      return corrupt(p + ": " + what + " has rows of " + std::to_string(t.info.dims[0]) + " elements, which " +
                     t.info.type->name + " (blocks of " + std::to_string(t.info.type->block_elems) +
                     ") cannot hold; the file is corrupt");
    pending.push_back(std::move(t));
  }
  BRIGADE_ASSIGN_OR_RETURN(const int64_t alignment, get_int_or("general.alignment", 32));
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    return corrupt(p + ": general.alignment must be a power of two");
  const uint64_t a = static_cast<uint64_t>(alignment);
  const uint64_t data_start = (c.pos() + a - 1) / a * a;
  for (auto& t : pending) {
    int64_t numel = 1;
    for (int64_t d : t.info.dims) numel *= d;
    const uint64_t n = static_cast<uint64_t>(numel / t.info.type->block_elems) * t.info.type->block_bytes;
    if (t.offset % a != 0) return corrupt(p + ": tensor '" + t.info.name + "' offset is not aligned");
    if (t.offset > std::numeric_limits<uint64_t>::max() - data_start)  // the sum below would wrap
      return corrupt(p + ": tensor '" + t.info.name + "' offset " + std::to_string(t.offset) + " is past the end of the file");
    auto b = file_->bytes(data_start + t.offset, n, "tensor '" + t.info.name + "' data");
    if (!b) return b.status();
    t.info.bytes = *b;
    tensors_.push_back(std::move(t.info));
  }
  return Status::ok();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

bool GgufFile::has_tensor(const std::string& name) const {
  return std::any_of(tensors_.begin(), tensors_.end(), [&](const GgufTensorInfo& t) { return t.name == name; });
}

Expected<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return not_found(path() + ": metadata '" + key + "' is missing");
  if (v->type != GgufType::string) return corrupt(path() + ": metadata '" + key + "' must be a string");
  return v->str;
}

Expected<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return not_found(path() + ": metadata '" + key + "' is missing");
  if (v->type == GgufType::string || v->type == GgufType::array || v->type == GgufType::f32 ||
      v->type == GgufType::f64)
    return corrupt(path() + ": metadata '" + key + "' must be an integer");
  return v->integer;
}

Expected<double> GgufFile::get_number(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return not_found(path() + ": metadata '" + key + "' is missing");
  if (v->type == GgufType::string || v->type == GgufType::array)
    return corrupt(path() + ": metadata '" + key + "' must be a number");
  return v->number;
}

Expected<int64_t> GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  return find(key) ? get_int(key) : Expected<int64_t>(fallback);
}

Expected<double> GgufFile::get_number_or(const std::string& key, double fallback) const {
  return find(key) ? get_number(key) : Expected<double>(fallback);
}

}  // namespace brigade
