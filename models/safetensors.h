// Safetensors reader: parses one .safetensors file's header and yields its tensors as views into
// the mapped file. Format: u64 LE header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {...}}, then the data;
// offsets are relative to the first byte after the header.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "models/mapped_file.h"
#include "models/raw_tensor.h"

namespace brigade {

// Largest header accepted (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// Adds every tensor of `file` to `out`. Checks: header length inside the file and under the
// limit, valid JSON, dtype F32/F16/BF16/F8_E4M3 (others: unsupported), shape × dtype == byte range,
// range inside the data area. A name already in `out` is corrupt (duplicated across shards).
// Errors name the file and the tensor.
Status read_safetensors(const std::shared_ptr<MappedFile>& file, std::map<std::string, RawTensor>& out);

}  // namespace brigade
