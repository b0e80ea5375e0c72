// Host-side validation of a StepBatch before any op runs, so that a bad step from the scheduler
// (or a user's out-of-vocabulary id) fails cleanly and never writes outside the KV pool.
#pragma once

#include <vector>

#include "core/status.h"
#include "kvstore/kv_layout.h"
#include "models/model.h"

namespace brigade {

struct StepLimits {
  int vocab_size = 0;
  int max_position = 0;
  int max_batch_tokens = 0;
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  std::vector<KvLayerShape> layer_shapes;  // the KV layout's per-layer shapes (KvLayout::layer_shapes); empty = uniform
};

// Bounds a forward pass needs for its launches (AttentionMeta's host fields).
struct StepBounds {
  int max_q_len = 0;
  int max_ctx_len = 0;
  bool unwindowed = false;  // the sliding layers run without their window (prefix_lm_opens_window)
};

// Checks, in this order: sizes of the arrays agree; n_tokens in [1, max_batch_tokens]; token ids
// in [0, vocab); positions in [0, max_position) and equal to ctx_len - n_q + j (AttentionMeta);
// q_start starts at 0, never decreases, ends at n_tokens; block tables cover each context with
// page ids inside the pool; slots inside the pool or negative; logit_rows inside the step and the
// logits tensor f32 [logit_rows.size(), vocab]; the KV layout matches the model.
// Returns invalid_argument naming the first offending value.
Expected<StepBounds> check_step(const StepBatch& batch, const StepLimits& limits, const KvLayout& kv,
                                const Tensor& logits);
// The pooling hook's rows (StepBatch::hidden_rows): inside the step, at most max_batch_tokens,
// and batch.hidden is `activation` [hidden_rows.size(), hidden_size]. invalid_argument otherwise.
Status check_hidden_rows(const StepBatch& batch, int max_batch_tokens, int64_t hidden_size, DType activation);
// StepBatch::images and rope_delta (after check_step): rope_delta empty or one per sequence; no
// images unless the model's vision tower is loaded (else unsupported); each image (a dynamic
// image's grid in whole merge blocks) starts at one of its tokens (StepImage::first) at a row of
// the step, and its rows (step_image_rows) are image_token each and overlap no other image's.
// Gemma 3's images (VisionConfig::whole_images: Gemma 4's under "vision" too) lie whole in one
// sequence's rows (first = 0); a Qwen2-VL family image may
// run on past its sequence's last row into a later step, and one that continues an earlier
// step's begins at its sequence's first row. Returns AttentionMeta::attend_until for the step:
// Gemma 3's [n_tokens], each row's own position but an image's rows', which see to the image's
// last; empty when the step has no image or the model's images attend causally (the Qwen2-VL
// family). invalid_argument otherwise.
Expected<std::vector<int32_t>> check_step_images(const StepBatch& batch, const VisionConfig& v, bool loaded);
// ModelConfig::prefix_lm (PaliGemma): `until` (check_step_images', or empty: causal) with every row
// of a sequence whose rows begin at position 0 (its whole prompt, by the scheduler's rule) seeing
// to the sequence's last row; the other sequences' rows keep theirs. Returns [n_tokens].
std::vector<int32_t> prefix_lm_until(const StepBatch& batch, std::vector<int32_t> until);
// ModelConfig::prefix_lm with a sliding window (PaliGemma 2): whether the step's sliding layers
// run without their window. A prompt row sees the whole prompt there too (transformers ORs the
// prompt's block over the window), so a step holding a prompt longer than the window (rows from
// position 0 past it) drops the window; every other row of such a step must be at a position below
// the window, where dropping it changes nothing (the scheduler runs such a prompt alone:
// SchedulerLimits::prompt_alone_beyond), else invalid_argument.
Expected<bool> prefix_lm_opens_window(const StepBatch& batch, int window);

}  // namespace brigade
