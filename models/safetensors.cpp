#include "models/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace brigade {
namespace {

using json = nlohmann::json;

Expected<DType> safetensors_dtype(const std::string& s, const std::string& where) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "I32") return DType::i32;  // int4 checkpoints: packed weights and zero points, g_idx
  if (s == "I64") return DType::i64;  // compressed-tensors' weight_shape
  if (s == "I8") return DType::i8;
  if (s == "U8") return DType::u8;
  if (s == "BOOL") return DType::u8;  // one byte each: EAGLE-3 heads' t2d mask (not loaded)
  if (s == "F8_E4M3") return DType::f8e4m3;  // fp8 weights: dequantized at load with their scales (weight_quant.h)
  if (s == "F8_E5M2")
    return unsupported(where + ": dtype F8_E5M2 (fp8 e5m2) is not supported; brigade loads fp8 checkpoints stored "
                       "as F8_E4M3 (quant_method fp8 or compressed-tensors)");
  return unsupported(where + ": dtype '" + s + "' is not supported; supported: F32, F16, BF16, F8_E4M3, I32, I64, I8, U8, BOOL");
}

Expected<RawTensor> parse_entry(const MappedFile& file, const std::string& name, const json& e,
                                uint64_t data_start) {
  const std::string where = file.path() + ": tensor '" + name + "'";
  if (!e.is_object()) return corrupt(where + ": header entry is not an object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string() || sh == e.end() || !sh->is_array() || off == e.end() ||
      !off->is_array() || off->size() != 2)
    return corrupt(where + ": header entry needs dtype, shape and data_offsets [begin, end]");
  RawTensor t;
  t.name = name;
  t.file = file.path();
  BRIGADE_ASSIGN_OR_RETURN(t.dtype, safetensors_dtype(dt->get<std::string>(), where));
  // Up to 8 dimensions are read (a Conv3d weight has 5, the Qwen2-VL patch embedding's); the
  // dimensions past the fourth fold into it, row-major, so that the tensor fits a Tensor.
  if (sh->size() > 8) return unsupported(where + ": " + std::to_string(sh->size()) + " dimensions (at most 8 supported)");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return corrupt(where + ": shape must hold non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v > (1ull << 40) || (v != 0 && numel > (1ull << 40) / v))
      return corrupt(where + ": shape is implausibly large");
    numel *= v;
    if (t.shape.size() < static_cast<size_t>(kMaxDims)) t.shape.push_back(static_cast<int64_t>(v));
    else t.shape.back() *= static_cast<int64_t>(v);
  }
  if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
    return corrupt(where + ": data_offsets must be non-negative integers");
  const uint64_t begin = (*off)[0].get<uint64_t>();
  const uint64_t end = (*off)[1].get<uint64_t>();
  if (end < begin) return corrupt(where + ": data_offsets end < begin");
  if (end - begin != numel * dtype_size(t.dtype))
    return corrupt(where + ": shape " + t.shape_string() + " x " + dtype_name(t.dtype) + " needs " +
                   std::to_string(numel * dtype_size(t.dtype)) + " bytes but data_offsets span " +
                   std::to_string(end - begin));
  if (begin > file.size() - data_start) return corrupt(where + ": data begins past the end of the file");
  BRIGADE_ASSIGN_OR_RETURN(t.bytes, file.bytes(data_start + begin, end - begin, "tensor '" + name + "'"));
  return t;
}

}  // namespace

Status read_safetensors(const std::shared_ptr<MappedFile>& file, std::map<std::string, RawTensor>& out) {
  const std::string& path = file->path();
  if (file->size() < 8) return corrupt(path + ": too short for a safetensors header (" +
                                       std::to_string(file->size()) + " bytes)");
  uint64_t n = 0;
  std::memcpy(&n, file->data(), 8);  // little-endian host assumed (x86-64, aarch64)
  if (n > file->size() - 8)
    return corrupt(path + ": header length " + std::to_string(n) + " is larger than the file (" +
                   std::to_string(file->size()) + " bytes): truncated or not a safetensors file");
  if (n > kMaxSafetensorsHeader)
    return corrupt(path + ": header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  const char* text = reinterpret_cast<const char*>(file->data() + 8);
  json header = json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return corrupt(path + ": safetensors header is not a valid JSON object");
  const uint64_t data_start = 8 + n;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    BRIGADE_ASSIGN_OR_RETURN(RawTensor t, parse_entry(*file, name, entry, data_start));
    if (out.count(name)) return corrupt(path + ": tensor '" + name + "' appears twice in the checkpoint");
    out.emplace(name, std::move(t));
  }
  return Status::ok();
}

}  // namespace brigade
