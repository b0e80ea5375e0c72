// Internal to models/: taking a fused checkpoint tensor apart by rows at open (GPT-NeoX's and
// GPTBigCode-MHA's q|k|v per head, models/gpt_decoders_config.h; InternLM2's wqkv per KV group,
// models/internlm_config.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/raw_tensor.h"

namespace brigade {

// Rows [begin, begin + size) of a tensor's first dimension.
struct RowRange {
  int64_t begin, size;
};

// t's rows `ranges`, in that order, as one tensor named `name` (t a 2-D weight [rows, cols] or a
// 1-D bias [rows] of an element type): a view of t's bytes for a single range, else a copy into
// `arena`, which the caller keeps alive as long as the result (Checkpoint's derived bytes).
RawTensor take_rows(const RawTensor& t, const std::vector<RowRange>& ranges, std::string name,
                    std::vector<std::vector<uint8_t>>& arena);

}  // namespace brigade
