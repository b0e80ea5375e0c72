#include "actors/executor/step_runner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <string>

#include <spdlog/spdlog.h>

namespace brigade {

StepRunner::StepRunner(Backend& backend, Model& model, KvCache kv, StepRunnerOptions options)
    : backend_(backend), model_(model), kv_(std::move(kv)), options_(std::move(options)), draft_head_(model_.draft_head()),
      constraints_(options_.vocab) {
  BRIGADE_CHECK(!(options_.device_steps && mtp_on()), "an MTP model runs on the host step path");
  BRIGADE_CHECK(options_.state_snapshots >= 0 && options_.state_snapshots < std::max(model_.state_slots(), 1),
                "state snapshots leave at least one state slot to running sequences");
  for (int32_t slot = running_state_slots() - 1; slot >= 0; --slot) free_state_slots_.push_back(slot);
}

Status StepRunner::assign_state_slots(const PlannedStep& step) {
  const bool snapshots = std::any_of(step.seqs.begin(), step.seqs.end(),
                                     [](const SeqWorkItem& w) { return w.state_from >= 0 || w.state_save >= 0; });
  if (model_.state_slots() == 0) {
    if (snapshots) return invalid_argument("a step names state snapshots, but the model keeps no recurrent state");
    return Status::ok();
  }
  const int running = running_state_slots();
  const auto snapshot_slot = [&](const SeqWorkItem& w, int32_t snap) -> Expected<int32_t> {
    if (snap < 0 || snap >= options_.state_snapshots)
      return invalid_argument("sequence " + std::to_string(w.seq_id) + " names state snapshot " + std::to_string(snap) +
                              ", outside [0, " + std::to_string(options_.state_snapshots) + ")");
    return running + snap;
  };
  for (const SeqWorkItem& w : step.seqs) {
    auto it = state_slot_of_.find(w.seq_id);
    if (it == state_slot_of_.end()) {
      if (free_state_slots_.empty())
        return out_of_resources("no free recurrent-state slot for sequence " + std::to_string(w.seq_id) + ": all " +
                                  std::to_string(running) + " hold running sequences");
      it = state_slot_of_.emplace(w.seq_id, free_state_slots_.back()).first;
      free_state_slots_.pop_back();
    }
    batch_.state_slots.push_back(it->second);
    if (!snapshots) continue;
    int32_t from = -1, save = -1, save_rows = 0;
    if (w.state_from >= 0) {
      BRIGADE_ASSIGN_OR_RETURN(from, snapshot_slot(w, w.state_from));
    }
    if (w.state_save >= 0) {
      BRIGADE_ASSIGN_OR_RETURN(save, snapshot_slot(w, w.state_save));
      save_rows = w.state_save_pos - w.start_pos;
      if (save_rows < 1 || save_rows > static_cast<int>(w.tokens.size()))
        return invalid_argument("sequence " + std::to_string(w.seq_id) + " saves its state after position " +
                                std::to_string(w.state_save_pos) + ", outside its item [" + std::to_string(w.start_pos) +
                                ", " + std::to_string(w.start_pos + static_cast<int>(w.tokens.size())) + "]");
    }
    batch_.state_from.push_back(from);
    batch_.state_save.push_back(save);
    batch_.state_save_rows.push_back(save_rows);
  }
  return Status::ok();
}

// On the device path a use_last_sampled row gets a placeholder id and a feed_ entry naming the
// sequence's slot in the device token table; on the host path the id itself.
Status StepRunner::build_batch(const PlannedStep& step, bool with_pooling) {
  batch_.clear();
  sample_items_.clear();
  feed_.clear();
  const int page_size = kv_.layout().page_size;
  const int n_pages = kv_.layout().n_pages;
  int max_blocks = 0;
  for (const auto& w : step.seqs) max_blocks = std::max(max_blocks, static_cast<int>(w.block_table.size()));
  batch_.max_blocks = max_blocks;
  batch_.q_start.push_back(0);
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWorkItem& w = step.seqs[i];
    const int n = static_cast<int>(w.tokens.size());
    const int ctx = w.start_pos + n;
    if (n == 0) return invalid_argument("sequence " + std::to_string(w.seq_id) + " has no tokens in the step");
    BRIGADE_RETURN_IF_ERROR(check_drafts(w));
    if (static_cast<int64_t>(w.block_table.size()) * page_size < ctx) {
      return invalid_argument("sequence " + std::to_string(w.seq_id) + " has pages for " +
                              std::to_string(w.block_table.size() * static_cast<size_t>(page_size)) +
                              " positions but needs " + std::to_string(ctx));
    }
    for (int32_t p : w.block_table) {
      if (p < 0 || p >= n_pages)
        return invalid_argument("page id " + std::to_string(p) + " is outside the KV pool");
    }
    for (int j = 0; j < n; ++j) {
      int32_t tok = w.tokens[static_cast<size_t>(j)];
      int32_t feed = -1;
      if (j == 0 && w.use_last_sampled) {
        // The device path's token may still be on its way (a step in flight): its slot is
        // enough, the gather runs after that step on the backend.
        const bool known = options_.device_steps ? slot_of_.count(w.seq_id) > 0 : last_sampled_.count(w.seq_id) > 0;
        if (!known) return invalid_argument("sequence " + std::to_string(w.seq_id) + " has no sampled token to reuse");
        if (options_.device_steps) {
          feed = slot_of_.at(w.seq_id);
          tok = 0;  // a placeholder the gather replaces
        } else {
          tok = last_sampled_.at(w.seq_id);
        }
      }
      feed_.push_back(feed);
      const int pos = w.start_pos + j;
      batch_.tokens.push_back(tok);
      batch_.positions.push_back(pos);
      batch_.slots.push_back(w.block_table[static_cast<size_t>(pos / page_size)] * page_size + pos % page_size);
    }
    for (const SeqImage& im : w.images) {  // the model checks how they lie in the chunk
      if (im.position >= ctx)
        return invalid_argument("sequence " + std::to_string(w.seq_id) + " has an image at position " +
                                std::to_string(im.position) + " after its chunk [" + std::to_string(w.start_pos) +
                                ", " + std::to_string(ctx) + ")");
      // An image begun in an earlier chunk continues at the chunk's first row.
      const int32_t first = std::max(0, w.start_pos - im.position);
      batch_.images.push_back({batch_.q_start.back() + (im.position + first - w.start_pos), im.pixels, im.grid_h,
                               im.grid_w, first});
    }
    batch_.q_start.push_back(batch_.n_tokens());
    batch_.ctx_len.push_back(ctx);
    batch_.lora.push_back(static_cast<int32_t>(w.lora));
    batch_.rope_delta.push_back(w.rope_delta);
    batch_.block_table.insert(batch_.block_table.end(), w.block_table.begin(), w.block_table.end());
    batch_.block_table.resize(static_cast<size_t>(batch_.n_seqs()) * static_cast<size_t>(max_blocks), 0);
    if (w.sample) {  // the last position, or with drafts the last n_draft + 1
      for (int r = batch_.n_tokens() - 1 - w.n_draft; r < batch_.n_tokens(); ++r) {
        batch_.logit_rows.push_back(r);
        sample_items_.push_back(i);
      }
    }
  }
  BRIGADE_RETURN_IF_ERROR(plan_prompt_rows(step));
  if (with_pooling) BRIGADE_RETURN_IF_ERROR(plan_hidden_rows(step));
  BRIGADE_RETURN_IF_ERROR(assign_state_slots(step));
  const KvLayout& kv = kv_.layout();
  cost_ = model_.step_cost(batch_, static_cast<double>(kv.page_bytes()) / kv.page_size);
  return Status::ok();
}

Status StepRunner::plan_prompt_rows(const PlannedStep& step) {
  n_sample_rows_ = static_cast<int>(batch_.logit_rows.size());
  prompt_items_.clear();
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    BRIGADE_ASSIGN_OR_RETURN(auto item, plan_prompt_logprobs(step.seqs[i], batch_.q_start[i], batch_.logit_rows));
    if (item) prompt_items_.push_back(std::move(*item));
  }
  return Status::ok();
}

Status StepRunner::plan_hidden_rows(const PlannedStep& step) {
  BRIGADE_RETURN_IF_ERROR(pooler_.plan(step.seqs, batch_.q_start, batch_.hidden_rows));
  mtp_hidden_first_ = static_cast<int>(batch_.hidden_rows.size());
  // An EAGLE-3 head reads its aux layers' planes (StepBatch::aux_rows), an MTP module hidden rows.
  std::vector<int32_t>& mtp_rows = eagle3_on() ? batch_.aux_rows : batch_.hidden_rows;
  if (mtp_on()) {
    for (size_t i = 0; i < step.seqs.size(); ++i) {
      if (step.seqs[i].pooling != Pooling::none) continue;
      for (int r = batch_.q_start[i]; r < batch_.q_start[i + 1]; ++r) mtp_rows.push_back(r);
    }
  }
  if (eagle3_on() && !batch_.aux_rows.empty()) {
    const int64_t rows = static_cast<int64_t>(draft_head_.aux_layers.size() * batch_.aux_rows.size());
    const size_t bytes = dtype_bytes(backend_.activation_dtype(), rows * draft_head_.aux_width);
    if (aux_buf_.bytes() < bytes) {
      auto buf = backend_.allocate(std::max(bytes, 2 * aux_buf_.bytes()));
      if (!buf) return buf.status();
      aux_buf_ = std::move(*buf);
    }
    batch_.aux_hidden = aux_buf_.view(backend_.activation_dtype(), {rows, draft_head_.aux_width});
  }
  const int64_t h = static_cast<int64_t>(batch_.hidden_rows.size());
  if (h == 0) return Status::ok();
  const DType a = backend_.activation_dtype();
  const int64_t hidden = model_.config().hidden_size;
  const size_t bytes = dtype_bytes(a, h * hidden);
  if (hidden_buf_.bytes() < bytes) {
    auto buf = backend_.allocate(std::max(bytes, 2 * hidden_buf_.bytes()));
    if (!buf) return buf.status();
    hidden_buf_ = std::move(*buf);
  }
  batch_.hidden = hidden_buf_.view(a, {h, hidden});
  return Status::ok();
}

std::vector<PooledEmbedding> StepRunner::pool_hidden_rows() {
  if (!pooler_.planned()) return {};
  const Tensor& hidden = batch_.hidden;
  const int64_t h = hidden.empty() ? 0 : hidden.dim(0), width = model_.config().hidden_size;
  if (h > 0) {
    host_hidden_.resize(hidden.nbytes());
    backend_.download(host_hidden_.data(), hidden);
  }
  hidden_row_.resize(static_cast<size_t>(width));
  return pooler_.collect([&](int r) {
    const size_t first = static_cast<size_t>(r) * static_cast<size_t>(width);
    for (size_t k = 0; k < hidden_row_.size(); ++k) {
      switch (hidden.dtype) {
        case DType::bf16:
          hidden_row_[k] = bf16_to_f32(reinterpret_cast<const uint16_t*>(host_hidden_.data())[first + k]);
          break;
        case DType::f16:
          hidden_row_[k] = f16_to_f32(reinterpret_cast<const uint16_t*>(host_hidden_.data())[first + k]);
          break;
        default: hidden_row_[k] = reinterpret_cast<const float*>(host_hidden_.data())[first + k];
      }
    }
    return std::span<const float>(hidden_row_);
  });
}

std::vector<PromptLogprobRun> StepRunner::score_prompt_rows(const std::function<std::span<const float>(int)>& row) const {
  std::vector<PromptLogprobRun> runs;
  runs.reserve(prompt_items_.size());
  for (const PromptLogprobItem& item : prompt_items_)
    runs.push_back(score_prompt_item(item, [&](int j) { return row(item.first_row + j); }));
  return runs;
}

Status StepRunner::check_drafts(const SeqWorkItem& w) {
  if (w.n_draft == 0) return Status::ok();
  const std::string seq = "sequence " + std::to_string(w.seq_id);
  if (w.n_draft < 0 || w.n_draft >= static_cast<int>(w.tokens.size()))
    return invalid_argument(seq + " has " + std::to_string(w.n_draft) + " drafts among " +
                            std::to_string(w.tokens.size()) + " tokens; drafts follow at least one token");
  if (!w.sample) return invalid_argument(seq + " has drafts but does not sample: drafts need verifying");
  if (w.use_last_sampled)
    return invalid_argument(seq + " has drafts after a token it has not seen (use_last_sampled)");
  for (size_t j = w.tokens.size() - static_cast<size_t>(w.n_draft); j < w.tokens.size(); ++j) {
    if (w.tokens[j] < 0 || w.tokens[j] >= model_.config().vocab_size)
      return invalid_argument(seq + " has draft token " + std::to_string(w.tokens[j]) + " outside the vocabulary");
  }
  return Status::ok();
}

Status StepRunner::ensure_logits(int n_rows) {
  if (static_cast<size_t>(n_rows) <= logits_rows_cap_) return Status::ok();
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  size_t cap = std::max<size_t>(static_cast<size_t>(n_rows), logits_rows_cap_ * 2);
  auto buf = backend_.allocate(cap * vocab * sizeof(float));
  if (!buf) return buf.status();
  logits_buf_ = std::move(*buf);
  logits_rows_cap_ = cap;
  return Status::ok();
}

Expected<std::vector<SampledResult>> StepRunner::run(const PlannedStep& step) {
  BRIGADE_ASSIGN_OR_RETURN(InFlightStep s, start(step));
  return finish(s);
}

Expected<InFlightStep> StepRunner::start(const PlannedStep& step) {
  BRIGADE_CHECK(n_pending_ < kMaxInFlight, "at most kMaxInFlight steps are started and not finished");
  release(step.released);
  if (step.seqs.empty()) return InFlightStep{};
  BRIGADE_RETURN_IF_ERROR(copy_partial_pages(step));
  InFlightStep s;
  if (options_.device_steps) {
    BRIGADE_ASSIGN_OR_RETURN(s, start_on_device(step));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(s.results_, run_on_host(step, s.prompt_logprobs_));
    if (mtp_on()) s.drafts_ = run_mtp(step, s.results_);
  }
  s.embeddings_ = pool_hidden_rows();  // batch_ is still this step's
  s.cost_ = cost_;
  return s;
}

bool StepRunner::ready(const InFlightStep& step) const {
  return !step.pending_ || backend_.download_done(step.ticket_);
}

std::vector<SampledResult> StepRunner::finish(InFlightStep& step) {
  if (!step.pending_) return std::move(step.results_);
  backend_.wait_download(step.ticket_);
  const auto* tokens = static_cast<const int32_t*>(host_tokens_[step.buffer_].data());
  std::vector<SampledResult> out;
  out.reserve(step.row_seqs_.size());
  for (size_t r = 0; r < step.row_seqs_.size(); ++r) {
    const uint64_t id = step.row_seqs_[r];
    out.push_back(SampledResult{id, tokens[r], 0.0f, {}});
    // A sequence a later step released (it ended meanwhile) is not tracked again.
    if (slot_of_.count(id)) last_sampled_[id] = tokens[r];
  }
  host_busy_[step.buffer_] = false;
  step.pending_ = false;
  --n_pending_;
  return out;
}

Expected<std::vector<SampledResult>> StepRunner::run_on_host(const PlannedStep& step,
                                                             std::vector<PromptLogprobRun>& prompt_logprobs) {
  std::vector<SampledResult> out;
  BRIGADE_RETURN_IF_ERROR(build_batch(step));
  const int n_rows = static_cast<int>(batch_.logit_rows.size());
  const int64_t vocab = model_.config().vocab_size;
  BRIGADE_RETURN_IF_ERROR(ensure_logits(std::max(n_rows, 1)));
  Tensor logits = logits_buf_.view(DType::f32, {n_rows, vocab});
  BRIGADE_RETURN_IF_ERROR(model_.forward(batch_, kv_, logits));
  record_history(step);
  if (n_rows == 0) return out;
  host_logits_.resize(static_cast<size_t>(n_rows * vocab));
  backend_.download(host_logits_.data(), logits);
  const auto row_at = [&](int r) {
    return std::span<float>(host_logits_.data() + static_cast<size_t>(r) * static_cast<size_t>(vocab),
                            static_cast<size_t>(vocab));
  };
  // Before sampling, which may change its rows in place (logit rules); prompt rows are separate.
  prompt_logprobs = score_prompt_rows(row_at);
  out.reserve(static_cast<size_t>(n_sample_rows_));
  for (int r = 0; r < n_sample_rows_; r += 1 + step.seqs[sample_items_[static_cast<size_t>(r)]].n_draft) {
    const SeqWorkItem& w = step.seqs[sample_items_[static_cast<size_t>(r)]];
    sample_item(w, [&](int j) { return row_at(r + j); }, out);
  }
  return out;
}

std::vector<SeqDrafts> StepRunner::run_mtp(const PlannedStep& step, const std::vector<SampledResult>& out) {
  std::vector<SeqDrafts> drafts;
  if (Status st = mtp_pass(step, out, drafts); !st.is_ok()) {
    // The step's tokens stand; its sequences verify no drafts next (and a missing MTP entry only
    // makes later drafts worse, never a token wrong).
    spdlog::warn("executor: MTP pass failed, no drafts this step: {}", st.message());
    drafts.clear();
  }
  return drafts;
}

Status StepRunner::ensure_mtp_hidden(int n) {
  if (static_cast<size_t>(n) <= mtp_hidden_rows_) return Status::ok();
  const size_t rows = std::max(static_cast<size_t>(n), 2 * mtp_hidden_rows_);
  const size_t bytes = dtype_bytes(backend_.activation_dtype(), static_cast<int64_t>(rows) * draft_head_.hidden);
  for (Buffer& b : mtp_hidden_) {
    auto buf = backend_.allocate(bytes);
    if (!buf) return buf.status();
    b = std::move(*buf);
  }
  mtp_hidden_rows_ = rows;
  return Status::ok();
}

// Row j of an item feeds the token at position start + j + 1: the next fed token, then (a
// sampling item) its sampled run or (a prompt chunk) next_token. Rows past what is known still
// run, with their own token as a placeholder. A rejected draft's entry sits at a position the
// sequence has not reached, which the step that computes it overwrites (as the target's own K/V
// there). A chunk without next_token (a prompt that samples nothing: the scheduler sends it
// otherwise) keeps a placeholder entry at its last position: drafts that attend to it are worse,
// never a token wrong.
Status StepRunner::mtp_pass(const PlannedStep& step, const std::vector<SampledResult>& out,
                            std::vector<SeqDrafts>& drafts) {
  const int ps = kv_.layout().page_size;
  const int max_pos = model_.config().max_position;
  // The head's logits and output widths (an EAGLE-3 head's draft vocabulary and hidden size).
  const int64_t vocab = draft_head_.vocab, width = draft_head_.hidden;
  const DType act = backend_.activation_dtype();
  StepBatch& b = mtp_batch_;
  b.clear();
  b.max_blocks = batch_.max_blocks;
  b.q_start.push_back(0);
  struct Chain {
    size_t item;
    int row;  // in b: the last valid row (its logits give the first draft)
    int pos;  // its position
    int k;    // drafts to make
  };
  std::vector<Chain> chains;
  size_t next = 0;  // out holds each sampling item's run, in item order
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWorkItem& w = step.seqs[i];
    const int n = static_cast<int>(w.tokens.size()), first = batch_.q_start[i];
    size_t m = 0;
    if (w.sample) {
      while (next + m < out.size() && out[next + m].seq_id == w.seq_id) ++m;
      BRIGADE_CHECK(m >= 1, "a sampling item has sampled tokens");
    }
    const size_t run = next;
    next += m;
    if (w.pooling != Pooling::none) continue;
    const int fed = n - 1 - (w.sample ? w.n_draft : 0);  // rows whose next token is a fed one
    int valid = 0;
    for (int j = 0; j < n; ++j) {
      int32_t tok = -1;
      if (j < fed) {
        tok = batch_.tokens[static_cast<size_t>(first + j + 1)];
      } else if (w.sample) {
        if (static_cast<size_t>(j - fed) < m) tok = out[run + static_cast<size_t>(j - fed)].token;
      } else if (w.next_token >= 0 && w.next_token < vocab) {
        tok = w.next_token;
      }
      if (tok >= 0 && valid == j) ++valid;
      b.tokens.push_back(tok >= 0 ? tok : batch_.tokens[static_cast<size_t>(first + j)]);
      b.positions.push_back(batch_.positions[static_cast<size_t>(first + j)]);
      b.slots.push_back(batch_.slots[static_cast<size_t>(first + j)]);
    }
    if (w.sample && w.mtp_drafts > 0 && valid > 0) {
      const int pos = w.start_pos + valid - 1;
      // Draft j (1-based) is made at position pos + j - 1: those must be in the block table.
      const int covered = static_cast<int>(w.block_table.size()) * ps;
      const int k = std::min({w.mtp_drafts, covered - pos, max_pos - pos});
      if (k >= 1) chains.push_back({i, b.n_tokens() - n + valid - 1, pos, k});
    }
    b.q_start.push_back(b.n_tokens());
    b.ctx_len.push_back(w.start_pos + n);
    const auto row = batch_.block_table.begin() + static_cast<std::ptrdiff_t>(i) * batch_.max_blocks;
    b.block_table.insert(b.block_table.end(), row, row + batch_.max_blocks);
  }
  if (b.n_tokens() == 0) return Status::ok();
  // Longest chains first: the sequences still drafting at each later step are then a prefix.
  std::stable_sort(chains.begin(), chains.end(), [](const Chain& x, const Chain& y) { return x.k > y.k; });
  const int d = static_cast<int>(chains.size());
  for (const Chain& c : chains) b.logit_rows.push_back(c.row);
  b.hidden_rows = b.logit_rows;
  BRIGADE_RETURN_IF_ERROR(ensure_logits(std::max(d, 1)));
  BRIGADE_RETURN_IF_ERROR(ensure_mtp_hidden(std::max(d, 1)));
  b.prev_hidden = eagle3_on() ? batch_.aux_hidden : batch_.hidden.rows(mtp_hidden_first_, b.n_tokens());
  b.hidden = mtp_hidden_[0].view(act, {d, width});
  BRIGADE_RETURN_IF_ERROR(model_.forward_mtp(b, kv_, logits_buf_.view(DType::f32, {d, vocab})));
  drafts.resize(chains.size());
  const auto take = [&](int rows) {
    host_logits_.resize(static_cast<size_t>(rows) * static_cast<size_t>(vocab));
    backend_.download(host_logits_.data(), logits_buf_.view(DType::f32, {rows, vocab}));
    for (int r = 0; r < rows; ++r) {
      const std::span<const float> row(host_logits_.data() + static_cast<size_t>(r) * static_cast<size_t>(vocab),
                                       static_cast<size_t>(vocab));
      const int32_t id = argmax(row);
      drafts[static_cast<size_t>(r)].tokens.push_back(draft_head_.to_target ? (*draft_head_.to_target)[static_cast<size_t>(id)] : id);
    }
  };
  if (d == 0) return Status::ok();
  take(d);
  for (size_t r = 0; r < chains.size(); ++r) drafts[r].seq_id = step.seqs[chains[r].item].seq_id;
  for (int j = 2;; ++j) {
    const int c = static_cast<int>(std::count_if(chains.begin(), chains.end(), [&](const Chain& x) { return x.k >= j; }));
    if (c == 0) break;
    b.clear();
    b.max_blocks = batch_.max_blocks;
    b.q_start.push_back(0);
    for (int r = 0; r < c; ++r) {
      const Chain& ch = chains[static_cast<size_t>(r)];
      const SeqWorkItem& w = step.seqs[ch.item];
      const int pos = ch.pos + j - 1;
      b.tokens.push_back(drafts[static_cast<size_t>(r)].tokens.back());
      b.positions.push_back(pos);
      b.slots.push_back(w.block_table[static_cast<size_t>(pos / ps)] * ps + pos % ps);
      b.q_start.push_back(b.n_tokens());
      b.ctx_len.push_back(pos + 1);
      const auto row = batch_.block_table.begin() + static_cast<std::ptrdiff_t>(ch.item) * batch_.max_blocks;
      b.block_table.insert(b.block_table.end(), row, row + batch_.max_blocks);
    }
    b.logit_rows.resize(static_cast<size_t>(c));
    std::iota(b.logit_rows.begin(), b.logit_rows.end(), 0);
    b.hidden_rows = b.logit_rows;
    b.prev_hidden = mtp_hidden_[j % 2].view(act, {c, width});  // the previous forward's output
    b.hidden = mtp_hidden_[(j + 1) % 2].view(act, {c, width});
    BRIGADE_RETURN_IF_ERROR(model_.forward_mtp(b, kv_, logits_buf_.view(DType::f32, {c, vocab})));
    take(c);
  }
  return Status::ok();
}

void StepRunner::sample_item(const SeqWorkItem& w, const std::function<std::span<float>(int)>& row,
                             std::vector<SampledResult>& out) {
  if (w.n_draft == 0) {
    out.push_back(sample_row(w, row(0)));
  } else {
    const std::span<const int32_t> drafts = std::span<const int32_t>(w.tokens).last(static_cast<size_t>(w.n_draft));
    verify_drafts(drafts, [&](int j) {
      if (j > 0) {  // draft j - 1 was accepted: the next row has seen it
        const int32_t d = drafts[static_cast<size_t>(j - 1)];
        if (w.sampling.has_penalties()) history_[w.seq_id].seen.insert(d);
        if (w.start_pos + j >= w.prompt_len) note_output(w, d);
      }
      out.push_back(sample_row(w, row(j), static_cast<uint32_t>(j)));
      return out.back().token;
    });
  }
  last_sampled_[w.seq_id] = out.back().token;
}

Status StepRunner::resolve_last_sampled(PlannedStep& step) {
  release(step.released);
  for (const SeqWorkItem& w : step.seqs) {
    if (w.use_last_sampled && (w.tokens.empty() || !last_sampled_.count(w.seq_id)))
      return invalid_argument("sequence " + std::to_string(w.seq_id) + " has no sampled token to reuse");
  }
  for (SeqWorkItem& w : step.seqs) {
    if (!w.use_last_sampled) continue;
    w.tokens[0] = last_sampled_.at(w.seq_id);
    w.use_last_sampled = false;
  }
  return Status::ok();
}

Status StepRunner::run_forward_only(const PlannedStep& step) {
  release(step.released);
  if (step.seqs.empty()) return Status::ok();
  BRIGADE_RETURN_IF_ERROR(copy_partial_pages(step));
  BRIGADE_RETURN_IF_ERROR(build_batch(step, /*with_pooling=*/false));
  batch_.logit_rows.clear();
  return model_.forward(batch_, kv_, Tensor());
}

Status StepRunner::copy_partial_pages(const PlannedStep& step) {
  const int ps = kv_.layout().page_size;
  for (const SeqWorkItem& w : step.seqs) {  // all checked before any is copied
    if (w.copy_rows == 0) continue;
    const int first = w.start_pos - w.copy_rows;  // where the copied rows sit in the sequence
    const bool fits = w.copy_rows > 0 && w.copy_rows < ps && first >= 0 && first % ps == 0 &&
                      static_cast<size_t>(first / ps) < w.block_table.size() &&
                      w.block_table[static_cast<size_t>(first / ps)] == w.copy_dst && w.copy_src != w.copy_dst &&
                      w.copy_src >= 0 && w.copy_src < kv_.layout().n_pages;
    if (!fits)
      return invalid_argument("sequence " + std::to_string(w.seq_id) + ": copying " + std::to_string(w.copy_rows) +
                              " rows of page " + std::to_string(w.copy_src) + " into page " +
                              std::to_string(w.copy_dst) + " does not fit its start " + std::to_string(w.start_pos) +
                              " and block table");
  }
  for (const SeqWorkItem& w : step.seqs) {
    if (w.copy_rows > 0) BRIGADE_RETURN_IF_ERROR(kv_.copy_rows(backend_, w.copy_src, w.copy_dst, w.copy_rows));
  }
  return Status::ok();
}

void StepRunner::note_output(const SeqWorkItem& w, int32_t token) {
  if (w.sampling.needs_history()) history_[w.seq_id].add_output(w.sampling, token);
  if (w.sampling.constrained()) constraints_.feed(w.seq_id, w.sampling, token);
  if (w.sampling.budgeted()) budgets_.feed(w.seq_id, w.sampling, token);
}

void StepRunner::record_history(const PlannedStep& step) {
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const SeqWorkItem& w = step.seqs[i];
    if (!w.sampling.needs_history() && !w.sampling.constrained() && !w.sampling.budgeted()) continue;
    for (size_t j = 0; j < w.history.size(); ++j) {  // a cached prefix the executor did not compute
      const int32_t t = w.history[j];
      if (w.sampling.has_penalties()) history_[w.seq_id].seen.insert(t);
      if (static_cast<int>(j) >= w.prompt_len) note_output(w, t);
    }
    // The tokens as the model saw them: use_last_sampled resolved in the batch on the host
    // path; on the device path a fed row's token is still the last one sampled (not yet updated).
    // Drafts enter the history only once accepted (sample_item).
    const int first_row = batch_.q_start[i];
    for (size_t j = 0; j + static_cast<size_t>(w.n_draft) < w.tokens.size(); ++j) {
      const size_t row = static_cast<size_t>(first_row) + j;
      const int32_t t = feed_[row] >= 0 ? last_sampled_.at(w.seq_id) : batch_.tokens[row];
      if (w.sampling.has_penalties()) history_[w.seq_id].seen.insert(t);
      if (w.start_pos + static_cast<int>(j) >= w.prompt_len) note_output(w, t);
    }
  }
}

// Log-probabilities come from the raw logits (as vLLM's default); logit_bias, the min_tokens mask
// and the penalties then shape the distribution the token is drawn from.
SampledResult StepRunner::sample_row(const SeqWorkItem& w, std::span<float> row, uint32_t offset) {
  SampledResult r{w.seq_id, 0, 0.0f, {}};
  const uint64_t n_generated = w.n_generated + offset;
  const bool want_logprob = w.logprobs >= 0;
  if (want_logprob && w.logprobs > 0) r.top = top_logprobs(row, w.logprobs);
  if (w.sampling.shapes_logits()) {
    if (want_logprob) raw_row_.assign(row.begin(), row.end());
    apply_logit_rules(row, w.sampling, n_generated);
    if (w.sampling.constrained()) mask_output(w, row);
    auto h = history_.find(w.seq_id);
    if (!w.sampling.bad_words.empty()) {
      const std::span<const int32_t> tail = h != history_.end() ? std::span<const int32_t>(h->second.output_tail)
                                                                : std::span<const int32_t>();
      apply_bad_words(row, w.sampling.bad_words, tail);
    }
    if (h != history_.end() && w.sampling.has_penalties()) apply_penalties(row, w.sampling, h->second);
    if (const std::optional<int32_t> t = budgets_.forced(w.seq_id, w.sampling)) force_token(row, *t);
    r.token = sample_token(row, w.sampling, n_generated, false).token;
    if (want_logprob) r.logprob = log_softmax_at(raw_row_, r.token);
  } else {
    SampleOutput s = sample_token(row, w.sampling, n_generated, want_logprob);
    r.token = s.token;
    r.logprob = s.logprob;
  }
  return r;
}

void StepRunner::mask_output(const SeqWorkItem& w, std::span<float> row) {
  bool done = false;
  const std::vector<uint8_t>* mask = constraints_.allowed(w.seq_id, w.sampling, done);
  if (!mask) return;  // inside a reasoning block (the engine refuses constrained output without a tokenizer)
  const std::vector<uint8_t>& allowed = *mask;
  ends_.clear();  // the end ids' logits after the logit rules (min_tokens may hold them off)
  for (int32_t t : w.sampling.end_ids) {
    if (t >= 0 && static_cast<size_t>(t) < row.size()) ends_.emplace_back(t, row[static_cast<size_t>(t)]);
  }
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (size_t t = 0; t < row.size(); ++t) {
    if (t < allowed.size() && allowed[t] && row[t] != kOff) {
      any = true;
    } else {
      row[t] = kOff;
    }
  }
  for (const auto& [t, v] : ends_) {
    // Ended only once the output is complete; or when nothing else can continue it (a matcher
    // that refused a token of a plan from elsewhere), rather than sampling from nothing.
    // With nothing else left, an end id held off by min_tokens comes back: the output must end.
    if (done || !any) row[static_cast<size_t>(t)] = !any && v == kOff ? 0.0f : v;
  }
}

// The thinking budget is spent: only `token` may come next (whatever the rules before allowed;
// vLLM forces its end tokens after the penalties too).
void StepRunner::force_token(std::span<float> row, int32_t token) {
  std::fill(row.begin(), row.end(), -std::numeric_limits<float>::infinity());
  if (token >= 0 && static_cast<size_t>(token) < row.size()) row[static_cast<size_t>(token)] = 0.0f;
}

void StepRunner::release(std::span<const uint64_t> seq_ids) {
  for (uint64_t id : seq_ids) {
    last_sampled_.erase(id);
    history_.erase(id);
    pooler_.release(std::span<const uint64_t>(&id, 1));
    constraints_.release(id);
    budgets_.release(id);
    if (auto it = slot_of_.find(id); it != slot_of_.end()) {
      free_slots_.push_back(it->second);
      slot_of_.erase(it);
    }
    if (auto it = state_slot_of_.find(id); it != state_slot_of_.end()) {
      free_state_slots_.push_back(it->second);
      state_slot_of_.erase(it);
    }
  }
}

}  // namespace brigade
