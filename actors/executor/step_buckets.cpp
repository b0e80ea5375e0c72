#include "actors/executor/step_buckets.h"

#include <algorithm>

#include "core/status.h"

namespace brigade {

namespace {

int width_for(int max_blocks) {
  int w = 16;
  while (w < max_blocks) w *= 2;
  return w;
}

}  // namespace

std::optional<StepBucket> pick_bucket(const StepBatch& batch, std::span<const int> buckets, int max_rows) {
  const int n = batch.n_seqs();
  if (n == 0 || batch.n_tokens() != n) return std::nullopt;  // a sequence with several tokens: prefill
  for (int b : buckets) {
    if (b < n) continue;
    if (b > max_rows) return std::nullopt;
    return StepBucket{b, width_for(batch.max_blocks)};
  }
  return std::nullopt;
}

void pad_to_bucket(StepBatch& batch, const StepBucket& bucket, std::vector<int32_t>& feed) {
  const int n = batch.n_seqs();
  BRIGADE_CHECK(n <= bucket.rows && batch.n_tokens() == n && batch.max_blocks <= bucket.width &&
                    feed.size() == static_cast<size_t>(n),
                "a bucket holds the decode step it pads");
  std::vector<int32_t> table(static_cast<size_t>(bucket.rows) * static_cast<size_t>(bucket.width), 0);
  for (int s = 0; s < n; ++s) {
    const auto src = batch.block_table.begin() + static_cast<std::ptrdiff_t>(s) * batch.max_blocks;
    std::copy(src, src + batch.max_blocks, table.begin() + static_cast<std::ptrdiff_t>(s) * bucket.width);
  }
  batch.block_table = std::move(table);
  batch.max_blocks = bucket.width;
  for (int s = n; s < bucket.rows; ++s) {
    batch.tokens.push_back(0);
    batch.positions.push_back(0);
    batch.slots.push_back(-1);
    batch.ctx_len.push_back(1);
    if (!batch.lora.empty()) batch.lora.push_back(0);  // padding runs the base
    if (!batch.rope_delta.empty()) batch.rope_delta.push_back(0);
    batch.q_start.push_back(s + 1);
    feed.push_back(-1);
  }
  // Every real row that samples comes first; the rest read padding rows (or the last row).
  for (int r = static_cast<int>(batch.logit_rows.size()), pad = n; r < bucket.rows; ++r, ++pad)
    batch.logit_rows.push_back(std::min(pad, bucket.rows - 1));
}

}  // namespace brigade
