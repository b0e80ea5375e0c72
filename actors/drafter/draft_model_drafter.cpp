#include "actors/drafter/draft_model_drafter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/sampling.h"

namespace brigade {

Status DraftModelOptions::validate() const {
  if (page_size < 1) return invalid_argument("draft page_size must be >= 1 (got " + std::to_string(page_size) + ")");
  if (n_pages < 1) return invalid_argument("the draft's KV pool needs at least one page (got " + std::to_string(n_pages) + ")");
  if (max_step_tokens < 1)
    return invalid_argument("draft max_step_tokens must be >= 1 (got " + std::to_string(max_step_tokens) + ")");
  return Status::ok();
}

Expected<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::create(std::unique_ptr<Backend> backend,
                                                                       std::unique_ptr<Model> model,
                                                                       DraftModelOptions options) {
  BRIGADE_RETURN_IF_ERROR(options.validate());
  BRIGADE_CHECK(backend && model, "a draft model on its backend");
  const KvLayout layout = model->kv_layout(options.n_pages, options.page_size, options.kv_dtype);
  BRIGADE_ASSIGN_OR_RETURN(KvCache kv, KvCache::allocate(*backend, layout));
  auto drafter = std::unique_ptr<DraftModelDrafter>(
      new DraftModelDrafter(std::move(backend), std::move(model), std::move(kv), options));
  BRIGADE_RETURN_IF_ERROR(drafter->ensure_logits(1));
  return drafter;
}

DraftModelDrafter::DraftModelDrafter(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model, KvCache kv,
                                     DraftModelOptions options)
    : backend_(std::move(backend)), model_(std::move(model)), kv_(std::move(kv)), options_(options) {
  free_pages_.reserve(static_cast<size_t>(options_.n_pages));
  for (int32_t p = options_.n_pages - 1; p >= 0; --p) free_pages_.push_back(p);
}

int DraftModelDrafter::n_cached(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : static_cast<int>(it->second.tokens.size());
}

DrafterStats DraftModelDrafter::stats() const { return stats_; }

DraftProposal DraftModelDrafter::propose(const DraftQuery& query) {
  return std::move(propose_batch(std::span<const DraftQuery>(&query, 1)).front());
}

std::vector<DraftProposal> DraftModelDrafter::propose_batch(std::span<const DraftQuery> queries) {
  std::vector<DraftProposal> out(queries.size());
  std::vector<Work> works;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (auto w = prepare(queries[i], out[i])) works.push_back(*w);
  }
  Expected<bool> more = !works.empty();
  while (more && *more) more = step(works);
  for (const Work& w : works) w.seq->busy = false;
  if (!more) {
    // The target goes on without drafts; what the pool holds for these sequences is unknown now.
    spdlog::warn("draft model: {}; proposing nothing this step", more.status().message());
    for (const Work& w : works) drop(w.seq_id);
    for (DraftProposal& p : out) p.tokens.clear();
  }
  return out;
}

// Draft j (1-based) is the argmax after feeding the query's tokens and drafts 1..j-1, so k drafts
// put the K/V of n + k - 1 positions into the pool: the query's n tokens and k - 1 drafts.
std::optional<DraftModelDrafter::Work> DraftModelDrafter::prepare(const DraftQuery& query, DraftProposal& out) {
  const int n = static_cast<int>(query.tokens.size());
  const int capacity = options_.n_pages * options_.page_size;
  const int k = std::min({query.max_tokens, model_->config().max_position - n + 1, capacity - n + 1});
  if (n == 0 || k <= 0) return std::nullopt;
  SeqKv& s = seqs_[query.seq_id];
  BRIGADE_CHECK(!s.busy, "a batch of draft queries names each sequence once");
  s.last_use = ++clock_;
  s.busy = true;
  // Keep the K/V of the longest common prefix; the last query token is fed again whatever the
  // cache holds, because its logits give the first draft.
  const auto diff = std::mismatch(s.tokens.begin(), s.tokens.end(), query.tokens.begin(), query.tokens.end());
  const int common = std::min(static_cast<int>(diff.first - s.tokens.begin()), n - 1);
  truncate(s, common);
  if (!reserve(query.seq_id, s, n + k - 1)) {
    drop(query.seq_id);
    return std::nullopt;
  }
  out.tokens.reserve(static_cast<size_t>(k));
  return Work{query.seq_id, &s, query.tokens.subspan(static_cast<size_t>(common)), k, &out};
}

void DraftModelDrafter::forget(uint64_t seq_id) { drop(seq_id); }

void DraftModelDrafter::drop(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  free_pages_.insert(free_pages_.end(), it->second.pages.begin(), it->second.pages.end());
  seqs_.erase(it);
}

void DraftModelDrafter::truncate(SeqKv& s, int n) {
  s.tokens.resize(static_cast<size_t>(n));
  const size_t keep = static_cast<size_t>((n + options_.page_size - 1) / options_.page_size);
  if (s.pages.size() <= keep) return;
  free_pages_.insert(free_pages_.end(), s.pages.begin() + static_cast<std::ptrdiff_t>(keep), s.pages.end());
  s.pages.resize(keep);
}

bool DraftModelDrafter::reserve(uint64_t seq_id, SeqKv& s, int n_positions) {
  const int want = (n_positions + options_.page_size - 1) / options_.page_size;
  const int need = want - static_cast<int>(s.pages.size());
  if (need <= 0) return true;
  if (want > options_.n_pages) return false;
  while (static_cast<int>(free_pages_.size()) < need) {
    auto victim = seqs_.end();
    for (auto it = seqs_.begin(); it != seqs_.end(); ++it) {
      if (it->first != seq_id && !it->second.busy &&
          (victim == seqs_.end() || it->second.last_use < victim->second.last_use)) victim = it;
    }
    if (victim == seqs_.end()) return false;
    ++stats_.evicted_seqs;
    drop(victim->first);
  }
  for (int i = 0; i < need; ++i) {
    s.pages.push_back(free_pages_.back());
    free_pages_.pop_back();
  }
  return true;
}

Status DraftModelDrafter::ensure_logits(int n_rows) {
  if (n_rows <= logits_rows_) return Status::ok();
  const size_t vocab = static_cast<size_t>(model_->config().vocab_size);
  const int rows = std::max(n_rows, 2 * logits_rows_);
  BRIGADE_ASSIGN_OR_RETURN(logits_buf_, backend_->allocate(static_cast<size_t>(rows) * vocab * sizeof(float)));
  logits_rows_ = rows;
  host_logits_.resize(static_cast<size_t>(rows) * vocab);
  return Status::ok();
}

// Appends w's next m tokens to batch_ as one sequence, at positions seq->tokens.size()...
void DraftModelDrafter::add_to_batch(const Work& w, int m) {
  const int ps = options_.page_size;
  const int n0 = static_cast<int>(w.seq->tokens.size());
  BRIGADE_CHECK(static_cast<int>(w.seq->pages.size()) * ps >= n0 + m, "pages are reserved before a draft forward");
  for (int j = 0; j < m; ++j) {
    const int pos = n0 + j;
    batch_.tokens.push_back(w.todo[static_cast<size_t>(j)]);
    batch_.positions.push_back(pos);
    batch_.slots.push_back(w.seq->pages[static_cast<size_t>(pos / ps)] * ps + pos % ps);
  }
  batch_.q_start.push_back(batch_.n_tokens());
  batch_.ctx_len.push_back(n0 + m);
  batch_.block_table.insert(batch_.block_table.end(), w.seq->pages.begin(), w.seq->pages.end());
  batch_.block_table.resize(batch_.ctx_len.size() * static_cast<size_t>(batch_.max_blocks), 0);
}

Expected<bool> DraftModelDrafter::step(std::vector<Work>& works) {
  batch_.clear();
  batch_.q_start.push_back(0);
  for (const Work& w : works) {
    if (!w.todo.empty()) batch_.max_blocks = std::max(batch_.max_blocks, static_cast<int>(w.seq->pages.size()));
  }
  std::vector<std::pair<Work*, int>> fed;  // each work in the batch and how many tokens it feeds
  std::vector<Work*> rows;                 // the work of each logits row
  int room = options_.max_step_tokens;
  for (Work& w : works) {
    if (w.todo.empty() || room == 0) continue;
    const int m = std::min(static_cast<int>(w.todo.size()), room);
    add_to_batch(w, m);
    if (m == static_cast<int>(w.todo.size())) {
      batch_.logit_rows.push_back(batch_.n_tokens() - 1);
      rows.push_back(&w);
    }
    fed.emplace_back(&w, m);
    room -= m;
  }
  const int n_rows = static_cast<int>(rows.size());
  BRIGADE_RETURN_IF_ERROR(ensure_logits(std::max(n_rows, 1)));
  const int64_t vocab = model_->config().vocab_size;
  const Tensor logits = logits_buf_.view(DType::f32, {n_rows, vocab});
  const auto t0 = std::chrono::steady_clock::now();
  BRIGADE_RETURN_IF_ERROR(model_->forward(batch_, kv_, logits));
  if (n_rows > 0) backend_->download(host_logits_.data(), logits);  // waits for the forward
  stats_.forward_us += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  ++stats_.forwards;
  stats_.fed_tokens += static_cast<uint64_t>(batch_.n_tokens());
  for (auto [w, m] : fed) {
    w->seq->tokens.insert(w->seq->tokens.end(), w->todo.begin(), w->todo.begin() + m);
    w->todo = w->todo.subspan(static_cast<size_t>(m));
  }
  bool more = false;
  for (int r = 0; r < n_rows; ++r) {
    Work& w = *rows[static_cast<size_t>(r)];
    const std::span<const float> row(host_logits_.data() + static_cast<size_t>(r) * static_cast<size_t>(vocab),
                                     static_cast<size_t>(vocab));
    w.out->tokens.push_back(argmax(row));
    // The next draft step feeds this draft (out->tokens has room for k: it does not move).
    if (static_cast<int>(w.out->tokens.size()) < w.k) w.todo = std::span<const int32_t>(&w.out->tokens.back(), 1);
  }
  for (const Work& w : works) more = more || !w.todo.empty();
  return more;
}

}  // namespace brigade
