// SchedulerPolicy's prefill/decode separation (docs/architecture.md "PD separation"): the
// prefill side's hand-off after the first token, the decode side's admission of a sequence whose
// KV pages arrive from elsewhere.
#include <algorithm>
#include <string>

#include "actors/scheduler/policy.h"

namespace brigade {

Status SchedulerPolicy::add_transferred(TransferredSeq t) {
  const uint64_t id = t.req.id;
  const int n_prompt = static_cast<int>(t.req.prompt.size());
  const int n_gen = static_cast<int>(t.generated.size());
  const std::string what = "hand-off of request " + std::to_string(id) + ": ";
  if (n_prompt == 0 || n_gen == 0) return invalid_argument(what + "it needs a prompt and at least one generated token");
  if (t.n_kv_tokens != n_prompt + n_gen - 1)
    return invalid_argument(what + "KV for " + std::to_string(t.n_kv_tokens) + " positions, but its " +
                            std::to_string(n_prompt + n_gen) + " tokens need it for all but the last");
  if (n_gen >= t.req.max_tokens) return invalid_argument(what + "it has generated max_tokens already");
  for (int32_t tok : t.req.prompt) {
    if (tok < 0 || tok >= limits_.vocab_size) return invalid_argument(what + "a token id is outside the vocabulary");
  }
  for (int32_t tok : t.generated) {
    if (tok < 0 || tok >= limits_.vocab_size) return invalid_argument(what + "a token id is outside the vocabulary");
  }
  const bool in_use = running_.count(id) != 0 ||
                      std::any_of(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == id; });
  if (in_use) return invalid_argument(what + "the request id is already in use here");
  const int n_tokens = n_prompt + n_gen;
  const int capacity = pool_pages_ * limits_.page_size;
  if (n_tokens >= limits_.max_context || n_tokens + 1 > capacity)
    return out_of_resources(what + std::to_string(n_tokens) + " tokens do not fit this instance's context (" +
                            std::to_string(limits_.max_context) + ") or KV pool (" + std::to_string(capacity) +
                            " token slots)");
  Seq s = make_seq(std::move(t.req));
  if (Status st = find_images(s); !st.is_ok()) return Status(st.code(), what + st.message());
  s.tokens.insert(s.tokens.end(), t.generated.begin(), t.generated.end());
  s.n_generated = n_gen;
  s.n_import_tokens = t.n_kv_tokens;
  enqueue(std::move(s));
  return Status::ok();
}

// Its pages are reserved (block table covers its tokens + 1); it waits like a lower-tier load.
void SchedulerPolicy::admit_import(Seq& s) {
  s.tree_owned.assign(static_cast<size_t>(s.blocks.n_pages()), false);
  const int n_pages = (s.n_import_tokens + limits_.page_size - 1) / limits_.page_size;
  KvPagesRequest req{s.req.id, {}};
  req.pages.assign(s.blocks.pages().begin(), s.blocks.pages().begin() + n_pages);
  imports_.push_back(std::move(req));
  s.loading = true;
  ++s.n_inflight;  // the executor writes into its pages
}

std::vector<KvPagesRequest> SchedulerPolicy::take_imports() { return std::exchange(imports_, {}); }

std::vector<SeqEvent> SchedulerPolicy::imported(uint64_t seq_id, bool ok, PageSource& pages) {
  std::vector<SeqEvent> events;
  auto it = running_.find(seq_id);
  if (it == running_.end() || !it->second.loading || it->second.n_import_tokens == 0) return events;
  Seq& s = it->second;
  s.loading = false;
  --s.n_inflight;
  // Without its bytes it recomputes its tokens here (as after a preemption): slower, same tokens.
  if (ok) {
    s.n_computed = s.n_scheduled = s.n_import_tokens;
    s.send_history = true;  // the executor never saw the prompt: penalties need it
  }
  s.n_import_tokens = 0;
  if (ok && s.ended == Finish::none) cache_computed(s, pages);
  drop_if_drained(seq_id, pages, events);
  return events;
}

void SchedulerPolicy::start_export(Seq& s) {
  const int n_pages = (s.n_computed + limits_.page_size - 1) / limits_.page_size;
  KvPagesRequest req{s.req.id, {}};
  req.pages.assign(s.blocks.pages().begin(), s.blocks.pages().begin() + n_pages);
  exports_.push_back(std::move(req));
  s.exporting = true;
  ++s.n_inflight;  // the executor reads its pages
}

std::vector<KvPagesRequest> SchedulerPolicy::take_exports() { return std::exchange(exports_, {}); }

std::optional<TransferredSeq> SchedulerPolicy::exported(uint64_t seq_id, bool ok, const std::string& error,
                                                        PageSource& pages, std::vector<SeqEvent>& events) {
  auto it = running_.find(seq_id);
  if (it == running_.end() || !it->second.exporting) return std::nullopt;
  Seq& s = it->second;
  s.exporting = false;
  --s.n_inflight;
  std::optional<TransferredSeq> out;
  if (s.ended == Finish::none && ok) {
    out = TransferredSeq{s.req, {s.tokens.begin() + static_cast<std::ptrdiff_t>(s.req.prompt.size()), s.tokens.end()},
                         s.n_computed};
    // It leaves here without a final event: the decode instance sends that.
    s.ended = Finish::stop;
    s.final_sent = true;
  } else if (s.ended == Finish::none) {
    s.ended = Finish::error;
    s.error = "reading the KV pages for the hand-off to a decode instance failed: " + error;
  }
  drop_if_drained(seq_id, pages, events);
  return out;
}

}  // namespace brigade
