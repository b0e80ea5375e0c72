// GGUF v3 reader (llama.cpp's single-file format): metadata key/values and tensor descriptors,
// with tensor data left in the memory mapping.
//
// Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv × (string key,
// u32 type, value); n_tensors × (string name, u32 n_dims, u64 dims[n_dims] innermost first,
// u32 ggml type, u64 offset); padding to general.alignment (default 32); tensor data, each
// tensor at data_start + offset. A string is u64 length + bytes; an array is u32 element type,
// u64 count, elements.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/ggml_quant.h"
#include "models/mapped_file.h"

namespace brigade {

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// One metadata value. Scalars fill `number` (and `integer` for integer types and bool); strings
// fill `str`; arrays set elem_type and fill `strs` (string arrays) or `numbers` (numeric arrays).
struct GgufValue {
  GgufType type = GgufType::u8;
  GgufType elem_type = GgufType::u8;
  int64_t integer = 0;
  double number = 0.0;
  std::string str;
  std::vector<std::string> strs;
  std::vector<double> numbers;
  std::span<const uint8_t> raw;  // a numeric scalar's or array's elements as stored, in the mapping
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the innermost (row length)
  const GgmlTypeInfo* type = nullptr;  // its ggml type (models/ggml_quant.h), one brigade reads
  std::span<const uint8_t> bytes;  // the tensor's data in the mapping (checked to fit the file)
};

class GgufFile {
 public:
  // Parses the header, metadata and tensor table of `path`; corrupt (naming the file and the
  // offending key or tensor) on truncation or inconsistency, a row length that is not a whole
  // number of its type's blocks included; unsupported for versions other than 2 and 3 and for
  // tensor types other than ggml_supported_types() (the type named, the supported ones listed).
  static Expected<std::unique_ptr<GgufFile>> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const std::shared_ptr<MappedFile>& file() const { return file_; }

  const GgufValue* find(const std::string& key) const;
  // Whether the file holds a tensor of that name.
  bool has_tensor(const std::string& name) const;
  // Typed look-ups: not_found naming the key when absent, corrupt when of another type.
  Expected<std::string> get_string(const std::string& key) const;
  Expected<int64_t> get_int(const std::string& key) const;
  Expected<double> get_number(const std::string& key) const;
  // As above with a fallback for an absent key.
  Expected<int64_t> get_int_or(const std::string& key, int64_t fallback) const;
  Expected<double> get_number_or(const std::string& key, double fallback) const;

 private:
  Status parse();
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace brigade
