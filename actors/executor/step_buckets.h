// Batch-size buckets for decode steps (the executor's device path, step_runner.h).
//
// A backend replays a step as one device graph only when the step issues the same ops on the
// same tensors with the same shapes (Backend::begin_step). Decode steps change their sequence
// count and block-table width all the time, so a pure decode step (one token per sequence) is
// padded to the smallest bucket that holds it and its block table widened to a power of two:
// every step of a (bucket, width) pair then has one shape. Padding sequences have one token (id
// 0, position 0), KV slot -1 (write_kv skips it), ctx_len 1 and page 0 in every block; their
// rows are computed and thrown away, and rows of a step are independent, so real rows do not
// change (on the CPU bit for bit below cpu/ops.h kBlasMinRows rows; kQuantGemmMinRows for
// block-quantized weights).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "models/model.h"

namespace brigade {

struct StepBucket {
  int rows = 0;   // sequences (= token rows) after padding
  int width = 0;  // pages per block-table row after padding (a power of two, >= 16)
  // The Backend::begin_step key: one graph per (rows, width, sampler kind).
  uint64_t key(bool sampled) const {
    return static_cast<uint64_t>(rows) | (static_cast<uint64_t>(width) << 24) | (uint64_t{sampled} << 56);
  }
};

// The bucket of a pure decode step: every sequence has one token, and the smallest bucket >= its
// sequence count is at most max_rows (the model's max_batch_tokens). nullopt otherwise (prefill
// chunks, steps larger than the largest bucket): such steps run eagerly. buckets ascending.
std::optional<StepBucket> pick_bucket(const StepBatch& batch, std::span<const int> buckets, int max_rows);

// Pads batch to bucket.rows sequences and bucket.width pages per row (see above) and
// logit_rows to bucket.rows entries (padding rows first, so the real ones keep their order and
// indices). feed (one entry per token row, -1 = none) grows with -1 for the padding rows.
void pad_to_bucket(StepBatch& batch, const StepBucket& bucket, std::vector<int32_t>& feed);

}  // namespace brigade
