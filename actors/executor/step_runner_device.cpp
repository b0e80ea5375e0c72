// The StepRunner's device path (step_runner.h): tokens, sampling and the feed of sampled tokens
// into the next step stay on the backend; decode steps are padded to buckets and run as one
// Backend step (CUDA Graph replays on the GPU).
#include <algorithm>
#include <string>

#include "actors/executor/step_buckets.h"
#include "actors/executor/step_runner.h"

namespace brigade {

namespace {

// Grows buf to hold `bytes` (doubling, so a growing batch reallocates rarely: a new pointer
// makes the backend capture its step graphs afresh). The old contents are not kept.
Status ensure_bytes(Backend& backend, Buffer& buf, size_t bytes) {
  if (buf.bytes() >= bytes) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(Buffer grown, backend.allocate(std::max(bytes, buf.bytes() * 2)));
  buf = std::move(grown);
  return Status::ok();
}

Tensor i32_view(const Buffer& buf, int64_t n) { return Tensor(buf.data(), DType::i32, {n}); }

// Ends a backend step however the code between leaves (an error inside the forward included:
// the ops recorded before it only touched the runner's own buffers and run as they are).
class StepScope {
 public:
  StepScope(Backend& backend, std::optional<uint64_t> key) : backend_(backend), active_(key.has_value()) {
    if (active_) backend_.begin_step(*key);
  }
  ~StepScope() {
    if (active_) backend_.end_step();
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  Backend& backend_;
  bool active_;
};

}  // namespace

// Draft verification runs on the host too: its rows are downloaded like a logprob row's, and
// whether row j + 1 counts depends on row j's token (speculative decoding, docs/architecture.md).
bool StepRunner::needs_host_sampler(const SeqWorkItem& w) {
  return w.logprobs >= 0 || w.sampling.shapes_logits() || w.n_draft > 0;
}

Status StepRunner::grow_table(int32_t n_slots) {
  if (n_slots <= table_cap_) return Status::ok();
  const int32_t cap = std::max({n_slots, 2 * table_cap_, 64});
  BRIGADE_ASSIGN_OR_RETURN(Buffer grown, backend_.allocate(static_cast<size_t>(cap) * sizeof(int32_t)));
  if (table_cap_ > 0) {  // between steps: the old table's tokens move over through the host
    std::vector<int32_t> old(static_cast<size_t>(table_cap_));
    backend_.download(old.data(), i32_view(table_, table_cap_));
    backend_.upload(i32_view(grown, table_cap_), old.data());
  }
  table_ = std::move(grown);
  table_cap_ = cap;
  return Status::ok();
}

Status StepRunner::assign_slots(const PlannedStep& step, std::vector<uint64_t>& added) {
  for (const SeqWorkItem& w : step.seqs) {
    if (!w.sample || slot_of_.count(w.seq_id)) continue;
    int32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = n_slots_++;
    }
    slot_of_[w.seq_id] = slot;
    added.push_back(w.seq_id);
  }
  return grow_table(n_slots_);
}

void StepRunner::unassign_slots(std::span<const uint64_t> seq_ids) {
  for (uint64_t id : seq_ids) {
    free_slots_.push_back(slot_of_.at(id));
    slot_of_.erase(id);
  }
}

Status StepRunner::launch_device_step(std::optional<uint64_t> key, bool sampled) {
  const int n = batch_.n_tokens();
  const int rows = static_cast<int>(batch_.logit_rows.size());
  const bool feeds = key.has_value() || std::any_of(feed_.begin(), feed_.end(), [](int32_t f) { return f >= 0; });
  BRIGADE_RETURN_IF_ERROR(ensure_bytes(backend_, d_tokens_, static_cast<size_t>(n) * sizeof(int32_t)));
  BRIGADE_RETURN_IF_ERROR(ensure_bytes(backend_, d_feed_, static_cast<size_t>(n) * sizeof(int32_t)));
  BRIGADE_RETURN_IF_ERROR(ensure_bytes(backend_, d_sampled_, static_cast<size_t>(std::max(rows, 1)) * sizeof(int32_t)));
  BRIGADE_RETURN_IF_ERROR(ensure_bytes(backend_, d_store_, static_cast<size_t>(std::max(rows, 1)) * sizeof(int32_t)));
  BRIGADE_RETURN_IF_ERROR(ensure_bytes(backend_, d_params_, static_cast<size_t>(std::max(rows, 1)) * sizeof(SampleParams)));
  BRIGADE_RETURN_IF_ERROR(ensure_logits(std::max(rows, 1)));
  const Tensor logits = logits_buf_.view(DType::f32, {rows, model_.config().vocab_size});
  const Tensor tokens = i32_view(d_tokens_, n);
  const Tensor table = i32_view(table_, table_cap_);

  StepScope scope(backend_, key);
  backend_.upload(tokens, batch_.tokens.data());
  if (feeds) {
    backend_.upload(i32_view(d_feed_, n), feed_.data());
    backend_.gather_tokens(table, i32_view(d_feed_, n), tokens);
  }
  batch_.device_tokens = tokens;
  BRIGADE_RETURN_IF_ERROR(model_.forward(batch_, kv_, logits));
  if (rows == 0) return Status::ok();
  const Tensor out = i32_view(d_sampled_, rows);
  if (sampled) {
    const Tensor params(d_params_.data(), DType::u8, {static_cast<int64_t>(rows * sizeof(SampleParams))});
    backend_.upload(params, params_.data());
    backend_.sample(logits, params, out);
  } else {
    backend_.argmax(logits, out);
  }
  backend_.upload(i32_view(d_store_, rows), store_.data());
  backend_.scatter_tokens(out, i32_view(d_store_, rows), table);
  return Status::ok();
}

void StepRunner::sample_on_host(const SeqWorkItem& w, int first_row, std::vector<SampledResult>& out) {
  const int64_t vocab = model_.config().vocab_size;
  host_logits_.resize(static_cast<size_t>(vocab));
  sample_item(w, [&](int j) {
    const int row = first_row + j;
    backend_.download(host_logits_.data(), logits_buf_.view(DType::f32, {row + 1, vocab}).rows(row, 1));
    return std::span<float>(host_logits_);
  }, out);
  backend_.upload(i32_view(table_, table_cap_).rows(slot_of_.at(w.seq_id), 1), &out.back().token);
}

Expected<InFlightStep> StepRunner::start_on_device(const PlannedStep& step) {
  BRIGADE_RETURN_IF_ERROR(build_batch(step));
  std::vector<uint64_t> added;
  if (Status s = assign_slots(step, added); !s.is_ok()) {
    unassign_slots(added);
    return s;
  }
  const int n_rows = n_sample_rows_;  // real sampling rows; prompt logprob rows follow them
  const int n_logit_rows = static_cast<int>(batch_.logit_rows.size());
  // Per logit row: the device sampler's parameters and the table slot its token goes to. Rows
  // for the host sampler and prompt logprob rows sample greedily on the device (cheap; the
  // result is ignored). A step with prompt logprobs completes here, like one with host rows.
  params_.assign(static_cast<size_t>(n_logit_rows), SampleParams{});
  store_.assign(static_cast<size_t>(n_logit_rows), -1);
  bool sampled = false, host_rows = !prompt_items_.empty();
  for (int r = 0; r < n_rows; ++r) {
    const SeqWorkItem& w = step.seqs[sample_items_[static_cast<size_t>(r)]];
    if (needs_host_sampler(w)) {
      host_rows = true;
      continue;
    }
    store_[static_cast<size_t>(r)] = slot_of_.at(w.seq_id);
    params_[static_cast<size_t>(r)] = sample_params(w.sampling, w.n_generated);
    sampled = sampled || params_[static_cast<size_t>(r)].temperature > 0.0f;
  }
  std::optional<uint64_t> key;
  auto bucket = prompt_items_.empty() && !pooler_.planned() ? pick_bucket(batch_, options_.buckets, options_.max_step_tokens) : std::nullopt;
  if (bucket) {
    pad_to_bucket(batch_, *bucket, feed_);
    params_.resize(static_cast<size_t>(bucket->rows));
    store_.resize(static_cast<size_t>(bucket->rows), -1);
    key = bucket->key(sampled);
  }
  Status st = host_rows ? Status::ok() : ensure_host_tokens(n_rows);
  if (st.is_ok()) st = launch_device_step(key, sampled);
  if (!st.is_ok()) {
    unassign_slots(added);
    return st;
  }
  record_history(step);
  InFlightStep out;
  out.prompt_logprobs_ = download_prompt_rows();
  if (n_rows == 0) return out;
  if (!host_rows) return download_tokens(n_rows, step);
  // Rows for the host sampler: their tokens must be in the table before the next step starts,
  // so this step completes here.
  sampled_.resize(static_cast<size_t>(n_rows));
  backend_.download(sampled_.data(), i32_view(d_sampled_, n_rows));
  out.results_.reserve(static_cast<size_t>(n_rows));
  for (int r = 0; r < n_rows; r += 1 + step.seqs[sample_items_[static_cast<size_t>(r)]].n_draft) {
    const SeqWorkItem& w = step.seqs[sample_items_[static_cast<size_t>(r)]];
    if (needs_host_sampler(w)) {
      sample_on_host(w, r, out.results_);
    } else {
      out.results_.push_back(SampledResult{w.seq_id, sampled_[static_cast<size_t>(r)], 0.0f, {}});
      last_sampled_[w.seq_id] = out.results_.back().token;
    }
  }
  return out;
}

// The prompt logprob rows come to the host in blocks of at most kPromptRowsPerDownload rows, so
// the host copy stays small whatever the chunk.
std::vector<PromptLogprobRun> StepRunner::download_prompt_rows() {
  if (prompt_items_.empty()) return {};
  constexpr int kPromptRowsPerDownload = 64;
  const int64_t vocab = model_.config().vocab_size;
  const int n_logit_rows = static_cast<int>(batch_.logit_rows.size());
  const Tensor logits = logits_buf_.view(DType::f32, {n_logit_rows, vocab});
  int block = -1;
  return score_prompt_rows([&](int r) {
    const int b = (r - n_sample_rows_) / kPromptRowsPerDownload;
    const int first = n_sample_rows_ + b * kPromptRowsPerDownload;
    if (b != block) {
      const int n = std::min(kPromptRowsPerDownload, n_logit_rows - first);
      host_logits_.resize(static_cast<size_t>(n) * static_cast<size_t>(vocab));
      backend_.download(host_logits_.data(), logits.rows(first, n));
      block = b;
    }
    return std::span<const float>(host_logits_.data() + static_cast<size_t>(r - first) * static_cast<size_t>(vocab),
                                  static_cast<size_t>(vocab));
  });
}

Status StepRunner::ensure_host_tokens(int n_rows) {
  const int b = next_host_;
  BRIGADE_CHECK(!host_busy_[b], "a host token buffer is free when fewer than kMaxInFlight steps are pending");
  const size_t bytes = static_cast<size_t>(n_rows) * sizeof(int32_t);
  if (host_tokens_[b].bytes() >= bytes) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(Buffer grown, backend_.allocate_host(std::max(bytes, 2 * host_tokens_[b].bytes())));
  host_tokens_[b] = std::move(grown);
  return Status::ok();
}

InFlightStep StepRunner::download_tokens(int n_rows, const PlannedStep& step) {
  const int b = next_host_;
  InFlightStep s;
  s.pending_ = true;
  s.buffer_ = b;
  s.ticket_ = backend_.download_async(host_tokens_[b].data(), i32_view(d_sampled_, n_rows));
  s.row_seqs_.reserve(static_cast<size_t>(n_rows));
  for (int r = 0; r < n_rows; ++r) s.row_seqs_.push_back(step.seqs[sample_items_[static_cast<size_t>(r)]].seq_id);
  host_busy_[b] = true;
  next_host_ = (b + 1) % kMaxInFlight;
  ++n_pending_;
  return s;
}

}  // namespace brigade
