#include "models/step_check.h"

#include <algorithm>
#include <string>

namespace brigade {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status check_sizes(const StepBatch& b, const StepLimits& lim) {
  const int n = b.n_tokens();
  if (n < 1) return invalid_argument("step has no tokens");
  if (n > lim.max_batch_tokens)
    return invalid_argument("step has " + str(n) + " tokens, more than max_batch_tokens " +
                            str(lim.max_batch_tokens) + " given at load");
  if (b.positions.size() != b.tokens.size() || b.slots.size() != b.tokens.size())
    return invalid_argument("step: tokens, positions and slots must have the same length");
  if (b.n_seqs() < 1 || b.q_start.size() != b.ctx_len.size() + 1)
    return invalid_argument("step: q_start must have n_seqs + 1 entries and n_seqs >= 1");
  if (b.max_blocks < 1 || b.block_table.size() != static_cast<size_t>(b.n_seqs()) * static_cast<size_t>(b.max_blocks))
    return invalid_argument("step: block_table must hold n_seqs * max_blocks page ids (max_blocks >= 1)");
  if (b.logit_rows.size() > static_cast<size_t>(lim.max_batch_tokens))
    return invalid_argument("step asks for more logit rows than max_batch_tokens");
  return Status::ok();
}

Status check_tokens(const StepBatch& b, const StepLimits& lim) {
  for (int i = 0; i < b.n_tokens(); ++i) {
    const int32_t t = b.tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= lim.vocab_size)
      return invalid_argument("token id " + str(t) + " (row " + str(i) + ") is outside the vocabulary [0, " +
                              str(lim.vocab_size) + ")");
    const int32_t p = b.positions[static_cast<size_t>(i)];
    if (p < 0 || p >= lim.max_position)
      return invalid_argument("position " + str(p) + " (row " + str(i) + ") is outside [0, max_position " +
                              str(lim.max_position) + ")");
  }
  return Status::ok();
}

Expected<StepBounds> check_sequences(const StepBatch& b, const KvLayout& kv) {
  StepBounds bounds;
  if (b.q_start[0] != 0) return invalid_argument("step: q_start[0] must be 0");
  const int64_t pool_slots = int64_t{kv.n_pages} * kv.page_size;
  for (int s = 0; s < b.n_seqs(); ++s) {
    const int32_t begin = b.q_start[static_cast<size_t>(s)], end = b.q_start[static_cast<size_t>(s) + 1];
    const int32_t ctx = b.ctx_len[static_cast<size_t>(s)];
    if (end < begin || end > b.n_tokens())
      return invalid_argument("step: q_start must not decrease and must stay within n_tokens (sequence " + str(s) + ")");
    const int32_t n_q = end - begin;
    if (ctx < n_q) return invalid_argument("step: ctx_len " + str(ctx) + " of sequence " + str(s) +
                                           " is shorter than its " + str(n_q) + " query tokens");
    for (int32_t j = 0; j < n_q; ++j)
      if (b.positions[static_cast<size_t>(begin + j)] != ctx - n_q + j)
        return invalid_argument("step: row " + str(begin + j) + " has position " +
                                str(b.positions[static_cast<size_t>(begin + j)]) + " but its sequence's ctx_len says " +
                                str(ctx - n_q + j));
    const int64_t n_blocks = (int64_t{ctx} + kv.page_size - 1) / kv.page_size;
    if (n_blocks > b.max_blocks)
      return invalid_argument("step: sequence " + str(s) + " needs " + str(n_blocks) + " pages but max_blocks is " +
                              str(b.max_blocks));
    for (int64_t k = 0; k < n_blocks; ++k) {
      const int32_t page = b.block_table[static_cast<size_t>(s * int64_t{b.max_blocks} + k)];
      if (page < 0 || page >= kv.n_pages)
        return invalid_argument("step: page id " + str(page) + " of sequence " + str(s) + " is outside the pool of " +
                                str(kv.n_pages) + " pages");
    }
    bounds.max_q_len = std::max(bounds.max_q_len, n_q);
    bounds.max_ctx_len = std::max(bounds.max_ctx_len, ctx);
  }
  if (b.q_start.back() != b.n_tokens()) return invalid_argument("step: q_start[n_seqs] must equal n_tokens");
  for (int32_t slot : b.slots)
    if (slot >= pool_slots) return invalid_argument("step: KV slot " + str(slot) + " is outside the pool");
  return bounds;
}

}  // namespace

Expected<StepBounds> check_step(const StepBatch& b, const StepLimits& lim, const KvLayout& kv, const Tensor& logits) {
  if (kv.n_layers != lim.n_layers || kv.n_kv_heads != lim.n_kv_heads || kv.head_dim != lim.head_dim ||
      kv.layer_shapes != lim.layer_shapes)
    return invalid_argument("KV cache layout does not match the model (use Model::kv_layout)");
  BRIGADE_RETURN_IF_ERROR(check_sizes(b, lim));
  BRIGADE_RETURN_IF_ERROR(check_tokens(b, lim));
  BRIGADE_ASSIGN_OR_RETURN(StepBounds bounds, check_sequences(b, kv));
  for (int32_t r : b.logit_rows)
    if (r < 0 || r >= b.n_tokens())
      return invalid_argument("logit row " + str(r) + " is outside the step's " + str(b.n_tokens()) + " rows");
  if (!b.logit_rows.empty() &&
      (logits.dtype != DType::f32 || logits.ndim != 2 || logits.dim(0) != static_cast<int64_t>(b.logit_rows.size()) ||
       logits.dim(1) != lim.vocab_size))
    return invalid_argument("logits must be f32 [" + str(static_cast<int64_t>(b.logit_rows.size())) + ", " +
                            str(lim.vocab_size) + "] (got " + logits.shape_string() + ")");
  if (!b.device_tokens.empty() && (b.device_tokens.dtype != DType::i32 || b.device_tokens.numel() != b.n_tokens()))
    return invalid_argument("device tokens must be i32 [" + str(b.n_tokens()) + "] (got " +
                            b.device_tokens.shape_string() + ")");
  return bounds;
}

Status check_hidden_rows(const StepBatch& b, int max_batch_tokens, int64_t hidden_size, DType activation) {
  const int64_t h = static_cast<int64_t>(b.hidden_rows.size());
  if (h == 0) return Status::ok();
  if (h > max_batch_tokens) return invalid_argument("step asks for more hidden rows than max_batch_tokens");
  for (int32_t r : b.hidden_rows)
    if (r < 0 || r >= b.n_tokens())
      return invalid_argument("hidden row " + str(r) + " is outside the step's " + str(b.n_tokens()) + " rows");
  if (b.hidden.dtype != activation || b.hidden.ndim != 2 || b.hidden.dim(0) != h || b.hidden.dim(1) != hidden_size)
    return invalid_argument(std::string("hidden must be ") + dtype_name(activation) + " [" + str(h) + ", " +
                            str(hidden_size) + "] (got " + b.hidden.shape_string() + ")");
  return Status::ok();
}

std::vector<int32_t> prefix_lm_until(const StepBatch& b, std::vector<int32_t> until) {
  if (until.empty()) until.assign(b.positions.begin(), b.positions.end());
  for (size_t s = 0; s + 1 < b.q_start.size(); ++s) {
    const int32_t begin = b.q_start[s], end = b.q_start[s + 1];
    if (begin == end || b.positions[static_cast<size_t>(begin)] != 0) continue;
    const int32_t last = b.positions[static_cast<size_t>(end - 1)];
    for (int32_t r = begin; r < end; ++r) until[static_cast<size_t>(r)] = std::max(until[static_cast<size_t>(r)], last);
  }
  return until;
}

Expected<bool> prefix_lm_opens_window(const StepBatch& b, int window) {
  if (window <= 0) return false;
  std::vector<bool> prompt(b.q_start.size(), false);  // per sequence: a prompt longer than the window
  bool any = false;
  for (size_t s = 0; s + 1 < b.q_start.size(); ++s) {
    const int32_t begin = b.q_start[s], end = b.q_start[s + 1];
    prompt[s] = end > begin && b.positions[static_cast<size_t>(begin)] == 0 &&
                b.positions[static_cast<size_t>(end - 1)] >= window;
    any = any || prompt[s];
  }
  if (!any) return false;
  for (size_t s = 0; s + 1 < b.q_start.size(); ++s)
    for (int32_t r = b.q_start[s]; !prompt[s] && r < b.q_start[s + 1]; ++r)
      if (const int32_t p = b.positions[static_cast<size_t>(r)]; p >= window)
        return invalid_argument("a prompt longer than the sliding window (" + str(window) +
                                ") runs alone in its step, its sliding layers unwindowed; row " + str(r) + " (sequence " +
                                str(static_cast<int64_t>(s)) + ") is at position " + str(p) + ", which needs the window");
  return true;
}

Expected<std::vector<int32_t>> check_step_images(const StepBatch& b, const VisionConfig& v, bool loaded) {
  if (!b.rope_delta.empty() && b.rope_delta.size() != b.ctx_len.size())
    return invalid_argument("rope_delta has " + str(static_cast<int64_t>(b.rope_delta.size())) + " entries for " +
                            str(b.n_seqs()) + " sequences");
  if (b.images.empty()) return std::vector<int32_t>();
  if (!loaded)
    return unsupported(v.present() ? "this model's vision tower is not loaded here (it runs on the CPU backend at tp 1); "
                                     "send text only"
                                   : "this model takes text only: it has no vision tower");
  const int n = b.n_tokens();
  std::vector<int32_t> until(b.positions.begin(), b.positions.end());
  std::vector<bool> taken(static_cast<size_t>(n), false);
  for (const StepImage& im : b.images) {
    if (v.anyres.on()) {
      BRIGADE_RETURN_IF_ERROR(check_anyres_size(v.anyres, im.grid_h, im.grid_w, "the image at row " + str(im.row)));
    } else if (v.dynamic() && (im.grid_h <= 0 || im.grid_w <= 0 || im.grid_h % v.merge != 0 || im.grid_w % v.merge != 0)) {
      return invalid_argument("the image at row " + str(im.row) + " has a grid of " + str(im.grid_h) + " x " +
                              str(im.grid_w) + " patches; each side must be a positive multiple of " + str(v.merge));
    }
    const int t = v.image_tokens(im.grid_h, im.grid_w);
    if (im.first < 0 || im.first >= t)
      return invalid_argument("the image at row " + str(im.row) + " starts at its token " + str(im.first) +
                              " but has tokens 0.." + str(t - 1));
    if (v.whole_images() && im.first != 0)
      return invalid_argument("the image at row " + str(im.row) + " starts at its token " + str(im.first) +
                              ": this model's image tokens attend to one another, so an image's " + str(t) +
                              " tokens go into one step");
    if (im.row < 0 || im.row >= n || (v.whole_images() && im.row + t > n))
      return invalid_argument("an image at row " + str(im.row) + " needs rows up to " + str(int64_t{im.row} + t) +
                              " of a step of " + str(n));
    const auto seq = std::upper_bound(b.q_start.begin(), b.q_start.end(), im.row) - b.q_start.begin() - 1;
    const int32_t seq_begin = b.q_start[static_cast<size_t>(seq)], seq_end = b.q_start[static_cast<size_t>(seq) + 1];
    // Gemma's image lies whole in its sequence's rows; a Qwen image may run past them into later
    // steps, and one begun in an earlier step continues at its sequence's first row.
    if (v.whole_images() && im.row + t > seq_end)
      return invalid_argument("the image at row " + str(im.row) + " runs past its sequence's rows: an image's " +
                              str(t) + " tokens go into one step");
    if (im.first > 0 && im.row != seq_begin)
      return invalid_argument("the image at row " + str(im.row) + " continues from an earlier step (its token " +
                              str(im.first) + ") but its sequence's rows begin at " + str(seq_begin));
    const int rows = step_image_rows(b, im, t);
    for (int r = im.row; r < im.row + rows; ++r) {
      const int32_t want = v.token_at(im.first + r - im.row, im.grid_h, im.grid_w);  // Pixtral's breaks too
      if (b.tokens[static_cast<size_t>(r)] != want)
        return invalid_argument("row " + str(r) + " of the image at row " + str(im.row) + " holds token " +
                                str(b.tokens[static_cast<size_t>(r)]) + ", not the image token " + str(want) +
                                (want != v.image_token ? " (the break or end of its layout)" : ""));
      if (taken[static_cast<size_t>(r)]) return invalid_argument("two images claim row " + str(r));
      taken[static_cast<size_t>(r)] = true;
      until[static_cast<size_t>(r)] = b.positions[static_cast<size_t>(im.row + rows - 1)];
    }
  }
  if (!v.whole_images()) return std::vector<int32_t>();  // the Qwen2-VL family's images attend causally
  return until;
}

}  // namespace brigade
