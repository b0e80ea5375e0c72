// Internal to models/: taking a fused checkpoint tensor apart by rows at open (GPT-NeoX's and
// GPTBigCode-MHA's q|k|v per head, models/gpt_decoders_config.h; InternLM2's wqkv per KV group,
// models/internlm_config.h; ChatGLM's query_key_value; MiniCPM 5's q|gate), and the renaming those
// readers share.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/raw_tensor.h"

namespace brigade {

// Rows [begin, begin + size) of a tensor's first dimension.
struct RowRange {
  int64_t begin, size;
};

// Whether t holds f32, bf16 or f16 elements (what a row split can copy; block-quantized and packed
// integer tensors cannot be taken apart by rows of elements).
bool is_float_tensor(const RawTensor& t);

// `name` with the first occurrence of each table entry's `from` replaced by its `to`, in table order.
std::string renamed(std::string name, std::span<const std::pair<const char*, const char*>> table);

// t's rows `ranges`, in that order, as one tensor named `name` (t a 2-D weight [rows, cols] or a
// 1-D bias [rows] of an element type): a view of t's bytes for a single range, else a copy into
// `arena`, which the caller keeps alive as long as the result (Checkpoint's derived bytes).
RawTensor take_rows(const RawTensor& t, const std::vector<RowRange>& ranges, std::string name,
                    std::vector<std::vector<uint8_t>>& arena);

}  // namespace brigade
