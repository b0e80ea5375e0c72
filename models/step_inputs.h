// Internal to models/: the device copies of a step's integer arrays (tokens, positions, slots,
// attention metadata, logit and hidden rows) that every decoder uploads once per step, and the scratch
// allocation helper the decoders share.
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "models/model.h"
#include "models/step_check.h"

namespace brigade {

// A [rows, cols] tensor of `dtype` in the backend's memory.
Expected<OwnedTensor> alloc_tensor(Backend& backend, DType dtype, int64_t rows, int64_t cols);

// What a step's attention touches (for Model::step_cost): pairs = (query, visible key) pairs
// summed over the step's rows; kv_read = KV positions read, each sequence's visible context once.
struct AttentionWork {
  double pairs = 0.0;
  double kv_read = 0.0;
};
// chunk > 0: each row sees only its own chunk's positions (AttentionMeta::chunk).
AttentionWork attention_work(const StepBatch& batch, int sliding_window, int chunk = 0);

class StepInputs {
 public:
  // Buffers for steps of up to max_tokens tokens (the block table grows on demand).
  Status allocate(Backend& backend, int64_t max_tokens);
  // Uploads the batch's arrays (tokens only when the batch has no device_tokens), and
  // attend_until (check_step_images) when not empty, which meta() then passes on.
  Status upload(Backend& backend, const StepBatch& batch, const std::vector<int32_t>& attend_until = {});
  // Views of the uploaded arrays for an n-token step.
  AttentionMeta meta(const StepBatch& batch, const StepBounds& bounds, int sliding_window) const;
  Tensor tokens(const StepBatch& batch) const;
  Tensor positions(int64_t n) const { return Tensor(positions_.tensor.data, DType::i32, {n}); }
  Tensor slots(int64_t n) const { return Tensor(slots_.tensor.data, DType::i32, {n}); }
  Tensor logit_rows(int64_t r) const { return Tensor(logit_rows_.tensor.data, DType::i32, {r}); }
  Tensor hidden_rows(int64_t h) const { return Tensor(hidden_rows_.tensor.data, DType::i32, {h}); }

 private:
  OwnedTensor tokens_, positions_, slots_, q_start_, ctx_len_, logit_rows_, hidden_rows_, block_table_, attend_until_;
  bool has_attend_until_ = false;  // this step's upload had attend_until
};

}  // namespace brigade
