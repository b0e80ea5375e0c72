#include "models/step_inputs.h"

#include <algorithm>
#include <vector>

namespace brigade {

Expected<OwnedTensor> alloc_tensor(Backend& backend, DType dtype, int64_t rows, int64_t cols) {
  BRIGADE_ASSIGN_OR_RETURN(Buffer buf, backend.allocate(static_cast<size_t>(rows * cols) * dtype_size(dtype)));
  OwnedTensor t;
  t.tensor = buf.view(dtype, {rows, cols});
  t.buffer = std::move(buf);
  return t;
}

AttentionWork attention_work(const StepBatch& b, int window, int chunk) {
  AttentionWork w;
  for (int s = 0; s < b.n_seqs(); ++s) {
    const int n_q = b.q_start[static_cast<size_t>(s) + 1] - b.q_start[static_cast<size_t>(s)];
    const int ctx = b.ctx_len[static_cast<size_t>(s)];
    for (int j = 0; j < n_q; ++j) {
      const int pos = ctx - n_q + j;
      int visible = window > 0 ? std::min(pos + 1, window) : pos + 1;
      if (chunk > 0) visible = std::min(visible, pos % chunk + 1);
      w.pairs += visible;
    }
    int read = window > 0 ? std::min(ctx, window + n_q - 1) : ctx;
    if (chunk > 0 && n_q > 0) read = std::min(read, ctx - (ctx - n_q) / chunk * chunk);  // from the first row's chunk
    w.kv_read += read;
  }
  return w;
}

Status StepInputs::allocate(Backend& backend, int64_t max_tokens) {
  for (OwnedTensor* p : {&tokens_, &positions_, &slots_, &ctx_len_, &logit_rows_, &hidden_rows_, &attend_until_}) {
    BRIGADE_ASSIGN_OR_RETURN(*p, alloc_tensor(backend, DType::i32, 1, max_tokens));
  }
  BRIGADE_ASSIGN_OR_RETURN(q_start_, alloc_tensor(backend, DType::i32, 1, max_tokens + 1));
  return Status::ok();
}

Status StepInputs::upload(Backend& backend, const StepBatch& b, const std::vector<int32_t>& attend_until) {
  const int64_t n_table = static_cast<int64_t>(b.block_table.size());
  if (block_table_.tensor.empty() || block_table_.tensor.numel() < n_table) {
    BRIGADE_ASSIGN_OR_RETURN(block_table_, alloc_tensor(backend, DType::i32, 1, std::max<int64_t>(n_table, 1024)));
  }
  auto put = [&](const OwnedTensor& dst, const std::vector<int32_t>& src) {
    if (src.empty()) return;
    backend.upload(Tensor(dst.tensor.data, DType::i32, {static_cast<int64_t>(src.size())}), src.data());
  };
  if (b.device_tokens.empty()) put(tokens_, b.tokens);
  put(positions_, b.positions);
  put(slots_, b.slots);
  put(q_start_, b.q_start);
  put(ctx_len_, b.ctx_len);
  put(logit_rows_, b.logit_rows);
  put(hidden_rows_, b.hidden_rows);
  put(block_table_, b.block_table);
  put(attend_until_, attend_until);
  has_attend_until_ = !attend_until.empty();
  return Status::ok();
}

AttentionMeta StepInputs::meta(const StepBatch& batch, const StepBounds& bounds, int sliding_window) const {
  const int64_t n_seqs = batch.n_seqs();
  AttentionMeta meta;
  meta.q_start = Tensor(q_start_.tensor.data, DType::i32, {n_seqs + 1});
  meta.ctx_len = Tensor(ctx_len_.tensor.data, DType::i32, {n_seqs});
  meta.block_table = Tensor(block_table_.tensor.data, DType::i32, {n_seqs, batch.max_blocks});
  meta.n_seqs = static_cast<int>(n_seqs);
  meta.max_q_len = bounds.max_q_len;
  meta.max_ctx_len = bounds.max_ctx_len;
  meta.sliding_window = sliding_window;
  if (has_attend_until_) meta.attend_until = Tensor(attend_until_.tensor.data, DType::i32, {batch.n_tokens()});
  return meta;
}

Tensor StepInputs::tokens(const StepBatch& batch) const {
  return batch.device_tokens.empty() ? Tensor(tokens_.tensor.data, DType::i32, {batch.n_tokens()})
                                     : batch.device_tokens;
}

}  // namespace brigade
