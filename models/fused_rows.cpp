#include "models/fused_rows.h"

#include <cstring>
#include <utility>

namespace brigade {

bool is_float_tensor(const RawTensor& t) {
  return !t.block_quantized() && (t.dtype == DType::f32 || t.dtype == DType::bf16 || t.dtype == DType::f16);
}

std::string renamed(std::string name, std::span<const std::pair<const char*, const char*>> table) {
  for (const auto& [from, to] : table)
    if (const size_t at = name.find(from); at != std::string::npos) name.replace(at, std::string(from).size(), to);
  return name;
}

std::map<std::string, RawTensor> renamed_tensors(std::map<std::string, RawTensor> tensors,
                                                 std::span<const std::pair<const char*, const char*>> table) {
  std::map<std::string, RawTensor> out;
  for (auto& [stored, t] : tensors) {
    t.name = renamed(stored, table);
    out.insert_or_assign(t.name, std::move(t));
  }
  return out;
}

RawTensor take_rows(const RawTensor& t, const std::vector<RowRange>& ranges, std::string name,
                    std::vector<std::vector<uint8_t>>& arena) {
  RawTensor out = t;
  out.name = std::move(name);
  const size_t rb = dtype_size(t.dtype) * static_cast<size_t>(t.shape.size() == 2 ? t.shape[1] : 1);
  int64_t rows = 0;
  for (const RowRange& r : ranges) rows += r.size;
  out.shape[0] = rows;
  if (ranges.size() == 1) {
    out.bytes = t.bytes.subspan(static_cast<size_t>(ranges[0].begin) * rb, static_cast<size_t>(rows) * rb);
    return out;
  }
  std::vector<uint8_t>& buf = arena.emplace_back(static_cast<size_t>(rows) * rb);
  size_t at = 0;
  for (const RowRange& r : ranges) {
    std::memcpy(buf.data() + at, t.bytes.data() + static_cast<size_t>(r.begin) * rb, static_cast<size_t>(r.size) * rb);
    at += static_cast<size_t>(r.size) * rb;
  }
  out.bytes = {buf.data(), buf.size()};
  return out;
}

std::vector<std::vector<RowRange>> qkv_rows_per_kv_group(int64_t groups, int64_t per_group, int64_t head_dim) {
  std::vector<std::vector<RowRange>> parts(3);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t at = g * (per_group + 2) * head_dim;
    parts[0].push_back({at, per_group * head_dim});
    parts[1].push_back({at + per_group * head_dim, head_dim});
    parts[2].push_back({at + (per_group + 1) * head_dim, head_dim});
  }
  return parts;
}

}  // namespace brigade
