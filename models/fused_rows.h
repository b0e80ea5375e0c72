// Internal to models/: taking a fused checkpoint tensor apart by rows at open (GPT-NeoX's and
// GPTBigCode-MHA's q|k|v per head and Falcon's per KV group, models/gpt_decoders_config.h; InternLM2's wqkv per KV group,
// models/internlm_config.h; ChatGLM's query_key_value; MiniCPM 5's q|gate), and the renaming those
// readers share.
#pragma once

#include <cstdint>
#include <map>
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

// Every tensor under its renamed name (RawTensor::name too); a later one of the same new name
// replaces an earlier one.
std::map<std::string, RawTensor> renamed_tensors(std::map<std::string, RawTensor> tensors,
                                                 std::span<const std::pair<const char*, const char*>> table);

// t's rows `ranges`, in that order, as one tensor named `name` (t a 2-D weight [rows, cols] or a
// 1-D bias [rows] of an element type): a view of t's bytes for a single range, else a copy into
// `arena`, which the caller keeps alive as long as the result (Checkpoint's derived bytes).
RawTensor take_rows(const RawTensor& t, const std::vector<RowRange>& ranges, std::string name,
                    std::vector<std::vector<uint8_t>>& arena);

// The q, k and v rows of a q|k|v fused per KV group, [groups, per_group + 2, head_dim]: each group's
// per_group query heads, then its k head, then its v head (InternLM2's wqkv, Falcon's
// new_decoder_architecture query_key_value); parts[0] q, [1] k, [2] v, group by group.
std::vector<std::vector<RowRange>> qkv_rows_per_kv_group(int64_t groups, int64_t per_group, int64_t head_dim);

}  // namespace brigade
