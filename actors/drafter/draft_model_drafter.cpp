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
  const size_t vocab = static_cast<size_t>(drafter->model_->config().vocab_size);
  BRIGADE_ASSIGN_OR_RETURN(drafter->logits_buf_, drafter->backend_->allocate(vocab * sizeof(float)));
  drafter->host_logits_.resize(vocab);
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

// Proposal j (1-based) is the argmax after feeding the query's tokens and drafts 1..j-1, so k
// drafts put the K/V of n + k - 1 positions into the pool: the query's n tokens and k - 1 drafts.
DraftProposal DraftModelDrafter::propose(const DraftQuery& query) {
  const int n = static_cast<int>(query.tokens.size());
  const int capacity = options_.n_pages * options_.page_size;
  const int k = std::min({query.max_tokens, model_->config().max_position - n + 1, capacity - n + 1});
  if (n == 0 || k <= 0) return {};
  SeqKv& s = seqs_[query.seq_id];
  s.last_use = ++clock_;
  // Keep the K/V of the longest common prefix; the last query token is fed again whatever the
  // cache holds, because its logits give the first draft.
  const auto diff = std::mismatch(s.tokens.begin(), s.tokens.end(), query.tokens.begin(), query.tokens.end());
  const int common = std::min(static_cast<int>(diff.first - s.tokens.begin()), n - 1);
  truncate(s, common);
  if (!reserve(query.seq_id, s, n + k - 1)) {
    drop(query.seq_id);
    return {};
  }
  DraftProposal p;
  Expected<int32_t> next = feed(s, query.tokens.subspan(static_cast<size_t>(common)));
  while (next) {
    p.tokens.push_back(*next);
    if (static_cast<int>(p.tokens.size()) == k) break;
    next = feed(s, std::span<const int32_t>(&p.tokens.back(), 1));
  }
  if (!next) {
    // The target goes on without drafts; the pool's content for this sequence is unknown now.
    spdlog::warn("draft model: sequence {}: {}; proposing nothing", query.seq_id, next.status().message());
    drop(query.seq_id);
    return {};
  }
  return p;
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
      if (it->first != seq_id && (victim == seqs_.end() || it->second.last_use < victim->second.last_use)) victim = it;
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

Expected<int32_t> DraftModelDrafter::feed(SeqKv& s, std::span<const int32_t> tokens) {
  BRIGADE_CHECK(!tokens.empty(), "a draft step feeds at least one token");
  while (!tokens.empty()) {
    const size_t m = std::min(tokens.size(), static_cast<size_t>(options_.max_step_tokens));
    BRIGADE_RETURN_IF_ERROR(forward_chunk(s, tokens.first(m), m == tokens.size()));
    tokens = tokens.subspan(m);
  }
  return argmax(host_logits_);
}

// One forward of `tokens` at positions [s.tokens.size(), + tokens.size()); with want_logits the
// last position's logits land in host_logits_.
Status DraftModelDrafter::forward_chunk(SeqKv& s, std::span<const int32_t> tokens, bool want_logits) {
  const int ps = options_.page_size;
  const int n0 = static_cast<int>(s.tokens.size());
  const int m = static_cast<int>(tokens.size());
  BRIGADE_CHECK(static_cast<int>(s.pages.size()) * ps >= n0 + m, "pages are reserved before a draft forward");
  batch_.clear();
  for (int j = 0; j < m; ++j) {
    const int pos = n0 + j;
    batch_.tokens.push_back(tokens[static_cast<size_t>(j)]);
    batch_.positions.push_back(pos);
    batch_.slots.push_back(s.pages[static_cast<size_t>(pos / ps)] * ps + pos % ps);
  }
  batch_.q_start = {0, m};
  batch_.ctx_len = {n0 + m};
  batch_.block_table = s.pages;
  batch_.max_blocks = static_cast<int>(s.pages.size());
  if (want_logits) batch_.logit_rows = {m - 1};
  const int64_t vocab = model_->config().vocab_size;
  const Tensor logits = logits_buf_.view(DType::f32, {want_logits ? 1 : 0, vocab});
  const auto t0 = std::chrono::steady_clock::now();
  BRIGADE_RETURN_IF_ERROR(model_->forward(batch_, kv_, logits));
  if (want_logits) backend_->download(host_logits_.data(), logits);  // waits for the forward
  stats_.forward_us += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  ++stats_.forwards;
  stats_.fed_tokens += static_cast<uint64_t>(m);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  return Status::ok();
}

}  // namespace brigade
