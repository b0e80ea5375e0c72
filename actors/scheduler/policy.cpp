#include "actors/scheduler/policy.h"

#include <algorithm>
#include <utility>

#include "actors/drafter/ngram_drafter.h"
#include "models/bert.h"

namespace brigade {
namespace {

// How deep admission looks past waiting requests that wait for a running prefill (admit_next).
constexpr size_t kAdmitScan = 16;

}  // namespace

Status SchedulerLimits::validate() const {
  if (max_running < 1) return invalid_argument("max_running must be >= 1");
  if (max_waiting < 0) return invalid_argument("max_waiting must be >= 0");
  if (max_step_tokens < 1) return invalid_argument("max_step_tokens must be >= 1");
  if (max_context < 1) return invalid_argument("max_context must be >= 1");
  if (page_size < 1) return invalid_argument("page_size must be >= 1");
  if (vocab_size < 1) return invalid_argument("vocab_size must be >= 1");
  if (state_snapshots < 0) return invalid_argument("state_snapshots must be >= 0");
  if (prompt_alone_beyond < 0) return invalid_argument("prompt_alone_beyond must be >= 0");
  if (prompt_alone_beyond > 0 && !prompt_whole) return invalid_argument("prompt_alone_beyond goes with prompt_whole");
  if (state_snapshots > 0 && (!prefix_cache || partial_pages || in_batch_prefix_tokens > 0 || lower_tiers))
    return invalid_argument("a recurrent model's state snapshots go with the prefix cache alone (no partial pages, "
                            "in-batch prefix sharing or lower tiers)");
  return spec.validate();
}

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::none: return "none";
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::abort: return "abort";
    case Finish::error: return "error";
  }
  return "?";
}

SchedulerPolicy::SchedulerPolicy(const SchedulerLimits& limits, int pool_pages, PageKey cache_root,
                                 std::shared_ptr<Drafter> drafter)
    : limits_(limits), pool_pages_(pool_pages), cache_root_(cache_root) {
  BRIGADE_CHECK(limits_.validate().is_ok(), "limits are validated by the caller");
  BRIGADE_CHECK(pool_pages_ >= 1, "a KV pool has at least one page");
  if (limits_.prefix_cache) cache_ = std::make_unique<RadixTree>(limits_.page_size, limits_.eviction, cache_root);
  snaps_.resize(static_cast<size_t>(limits_.state_snapshots));
  for (int i = limits_.state_snapshots - 1; i >= 0; --i) free_snaps_.push_back(i);
  if (limits_.spec.num_tokens > 0)
    drafter_ = drafter ? std::move(drafter)
                       : std::make_shared<NgramDrafter>(NgramDrafterOptions{limits_.spec.ngram_min, limits_.spec.ngram_max});
}

Status SchedulerPolicy::add(SeqRequest request) {
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) return invalid_argument("the prompt is empty: give at least one token");
  // max_tokens 0: the prompt runs for its logprobs or its embedding, nothing is generated.
  const bool pooling = request.pooling != Pooling::none;
  if (pooling && request.max_tokens != 0)
    return invalid_argument("a pooling request generates nothing: max_tokens must be 0 (got " +
                            std::to_string(request.max_tokens) + ")");
  if (request.max_tokens < 1 && !(request.max_tokens == 0 && (request.prompt_logprobs >= 0 || pooling)))
    return invalid_argument("max_tokens must be >= 1, or 0 with prompt_logprobs (got " +
                            std::to_string(request.max_tokens) + ")");
  if (pooling && n_prompt > limits_.max_context) {
    return invalid_argument("the input has " + std::to_string(n_prompt) + " tokens; the model's context is " +
                            std::to_string(limits_.max_context) + " tokens: shorten the input");
  }
  if (!pooling && n_prompt >= limits_.max_context) {
    return invalid_argument("the prompt has " + std::to_string(n_prompt) + " tokens; the model's context is " +
                            std::to_string(limits_.max_context) + " tokens and generation needs at least one more");
  }
  if (limits_.prompt_whole && n_prompt > limits_.max_step_tokens) {
    return invalid_argument("the prompt has " + std::to_string(n_prompt) + " tokens; this model's prompt attends to "
                            "all of itself (PaliGemma), so it runs whole in one step of at most " +
                            std::to_string(limits_.max_step_tokens) + " tokens (max_step_tokens)");
  }
  for (int32_t typed : request.prompt) {
    const int32_t t = limits_.token_types > 1 ? token_id_part(typed) : typed;
    if (t < 0 || t >= limits_.vocab_size) {
      return invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(limits_.vocab_size) + ")");
    }
  }
  const bool in_use = running_.count(request.id) != 0 ||
                      std::any_of(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == request.id; });
  if (in_use) return invalid_argument("request id " + std::to_string(request.id) + " is already in use");
  if (static_cast<int>(waiting_.size()) >= limits_.max_waiting) {
    return out_of_resources("the waiting queue is full (" + std::to_string(limits_.max_waiting) +
                            " requests); retry later");
  }
  const int capacity = pool_pages_ * limits_.page_size;
  if (n_prompt + 1 > capacity) {
    return out_of_resources("the prompt needs " + std::to_string(n_prompt + 1) + " token slots but the whole KV pool holds " +
                            std::to_string(capacity) + "; shorten the prompt or enlarge the KV pool");
  }
  if (request.admit_group != 0 && request.admit_group_size < 1)
    return invalid_argument("admit group " + std::to_string(request.admit_group) + " has no size");
  Seq s = make_seq(std::move(request));
  BRIGADE_RETURN_IF_ERROR(find_images(s));
  note_group_arrival(s.req);
  enqueue(std::move(s));
  return Status::ok();
}

void SchedulerPolicy::note_group_arrival(const SeqRequest& r) {
  if (r.admit_group == 0 || r.admit_group_size <= 1) return;
  auto [it, fresh] = groups_.try_emplace(r.admit_group, AdmitGroup{0, r.admit_group_size, false});
  if (fresh) opened_groups_.push_back(r.admit_group);
  if (++it->second.arrived >= it->second.size) groups_.erase(it);  // complete: its members go
}

void SchedulerPolicy::release_group(uint64_t group) {
  auto it = groups_.find(group);
  if (it == groups_.end() || it->second.released) return;
  it->second.released = true;
  // A released group stays until its last member arrives, which may never happen (one was
  // refused before it got here): the oldest ones are forgotten past a bound.
  released_groups_.push_back(group);
  constexpr size_t kKeepReleased = 256;
  while (released_groups_.size() > kKeepReleased) {
    auto old = groups_.find(released_groups_.front());
    if (old != groups_.end() && old->second.released) groups_.erase(old);
    released_groups_.pop_front();
  }
}

int SchedulerPolicy::n_forming_groups() const {
  return static_cast<int>(std::count_if(groups_.begin(), groups_.end(), [](const auto& g) { return !g.second.released; }));
}

bool SchedulerPolicy::waits_for_group(const Seq& s) const {
  if (s.req.admit_group == 0) return false;
  auto it = groups_.find(s.req.admit_group);
  return it != groups_.end() && !it->second.released;
}

SchedulerPolicy::Seq SchedulerPolicy::make_seq(SeqRequest request) {
  const int capacity = pool_pages_ * limits_.page_size;
  Seq s{std::move(request), {}, 0, 0, 0, 0, 0, std::min(limits_.max_context, capacity), BlockTable(limits_.page_size),
        Finish::none, false, {}, next_arrival_++};
  s.tokens = s.req.prompt;
  return s;
}

// Keeps the queue in (priority desc, arrival asc) order; a preempted sequence keeps its arrival,
// so it returns ahead of everything that came after it.
void SchedulerPolicy::enqueue(Seq s) {
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const Seq& w) {
    return w.req.priority < s.req.priority || (w.req.priority == s.req.priority && w.arrival > s.arrival);
  });
  waiting_.insert(pos, std::move(s));
}

std::vector<SeqEvent> SchedulerPolicy::abort(uint64_t id, PageSource& pages) {
  std::vector<SeqEvent> events;
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.req.id == id; });
  if (w != waiting_.end()) {
    w->ended = Finish::abort;
    events.push_back(final_event(*w));
    waiting_.erase(w);
    return events;
  }
  auto r = running_.find(id);
  if (r == running_.end() || r->second.ended != Finish::none) return events;
  r->second.ended = Finish::abort;
  drop_if_drained(id, pages, events);  // in flight: ends when its last step comes back
  return events;
}

int SchedulerPolicy::n_pages_held() const {
  int n = cache_ ? cache_->n_pages() : 0;
  for (const auto& [id, s] : running_) {
    for (int i = 0; i < s.blocks.n_pages(); ++i) n += s.tree_owned[static_cast<size_t>(i)] ? 0 : 1;
  }
  return n;
}

PrefixCacheStats SchedulerPolicy::cache_stats() const {
  PrefixCacheStats st = cache_stats_;
  st.cached_pages = cache_ ? cache_->n_pages() : 0;
  st.idle_pages = cache_ ? cache_->n_evictable() : 0;
  st.state_snapshots = static_cast<int>(snap_of_page_.size());
  return st;
}

int SchedulerPolicy::cached_prefix(std::span<const int32_t> tokens) {
  if (!cache_) return 0;
  const RadixTree::Match m = cache_->match(tokens, static_cast<int>(tokens.size()), /*touch=*/false);
  return keeps_states() ? state_prefix_pages(m) * limits_.page_size : m.n_tokens;
}

int SchedulerPolicy::pages_short(const PageSource& pages) const {
  int short_by = pages_wanted_;
  if (static_cast<int>(running_.size()) >= limits_.max_running) return short_by;
  // The request admission tries next: the head, or while the head waits for a running prefill
  // (deferred), the first after it that does not (admit_next's scan).
  for (size_t i = 0; i < waiting_.size() && i < kAdmitScan; ++i) {
    const Seq& s = waiting_[i];
    if (s.deferred) continue;
    const int need = s.blocks.pages_needed(static_cast<int>(s.tokens.size()) + 1);
    return short_by + std::max(0, need - pages.n_available() - (cache_ ? cache_->n_evictable() : 0));
  }
  return short_by;
}

// n pages from the lease, evicting cached prefixes (by policy) when the lease is short.
std::optional<std::vector<int32_t>> SchedulerPolicy::take_pages(int n, PageSource& pages) {
  if (n <= 0) return std::vector<int32_t>{};
  if (pages.n_available() < n && cache_) {
    auto gone = cache_->evict(n - pages.n_available());
    std::vector<int32_t> freed;
    freed.reserve(gone.size());
    for (const auto& e : gone) freed.push_back(e.page);
    pages.give_back(freed);
    forget_states(gone);
    cache_stats_.evicted_pages += gone.size();
    if (limits_.lower_tiers && !limits_.save_on_insert) {  // write-back; a partly filled page has no key
      for (const auto& e : gone)
        if (!e.partial) saves_.push_back(e);
    }
  }
  return pages.take(n);
}

std::pair<int, int> SchedulerPolicy::reset_cache(PageSource& pages) {
  if (!cache_) return {0, 0};
  auto gone = cache_->clear_unlocked();
  std::vector<int32_t> freed;
  freed.reserve(gone.size());
  for (const auto& e : gone) freed.push_back(e.page);
  pages.give_back(freed);
  forget_states(gone);
  saves_.clear();
  return {static_cast<int>(gone.size()), cache_->n_pages()};
}

bool SchedulerPolicy::waits_for_prefill(const Seq& s, std::span<const int32_t> key, int matched, int limit) const {
  const int t = limits_.in_batch_prefix_tokens;
  // A request that already waits follows its leader to the end of the pages they share.
  const int need = s.waited_for_prefill ? 1 : t;
  if (!cache_ || t <= 0 || matched + need > limit) return false;
  const size_t head = static_cast<size_t>(matched + need);
  std::vector<int32_t> buf;
  for (const auto& [id, r] : running_) {
    if (r.ended != Finish::none || r.tokens.size() < head) continue;
    const std::span<const int32_t> other = cache_key(r, buf);
    if (other.size() < head || !std::equal(key.begin(), key.begin() + static_cast<std::ptrdiff_t>(head), other.begin()))
      continue;
    // The pages both keys begin with (whole pages: what the tree takes as r's steps return),
    // within what this request may take from the cache.
    size_t shared = head;
    const size_t end = std::min({other.size(), key.size(), static_cast<size_t>(limit)});
    while (shared < end && key[shared] == other[shared]) ++shared;
    const int pages_end = static_cast<int>(shared) / limits_.page_size * limits_.page_size;
    if (pages_end - matched >= need && r.n_computed < pages_end) return true;
  }
  return false;
}

bool SchedulerPolicy::admit_next(PageSource& pages) {
  if (waiting_.empty() || static_cast<int>(running_.size()) >= limits_.max_running) return false;
  // The head; while it waits for a running sequence to prefill the prefix they share (in-batch
  // prefix sharing), the next that does not, a few deep.
  for (size_t i = 0; i < waiting_.size() && i < kAdmitScan; ++i) {
    if (admit_at(i, pages)) return true;
    if (!waiting_[i].deferred) return false;  // it waits for pages or its group: nothing overtakes it
  }
  return false;
}

bool SchedulerPolicy::admit_at(size_t i, PageSource& pages) {
  Seq& s = waiting_[i];
  s.deferred = false;
  if (waits_for_group(s)) return false;  // the rest of its group is on its way
  const int known = static_cast<int>(s.tokens.size());
  if (s.n_import_tokens > 0) {  // PD: its KV arrives from the prefill instance instead
    auto got = take_pages(s.blocks.pages_needed(known + 1), pages);
    if (!got) return false;
    s.blocks.append(*got);
    admit_import(s);
    const uint64_t id = s.req.id;
    running_.emplace(id, std::move(s));
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  RadixTree::Match m;
  std::vector<int32_t> key_buf;
  const std::span<const int32_t> key = cache_key(s, key_buf);
  const int limit = cache_match_limit(s);
  if (cache_) {
    m = cache_->match(key, limit);
    if (limits_.spec.mtp && m.n_tokens > 0) m = cache_->match(key, m.n_tokens - 1);  // SpeculativeLimits::mtp
    // An image's rows are computed together: a match ending inside one stops before it.
    if (const int safe = image_safe_prefix(s, m.n_tokens); safe < m.n_tokens) m = cache_->match(key, safe);
    if (waits_for_prefill(s, key, m.n_tokens, limit)) {
      s.deferred = true;
      if (!s.waited_for_prefill) ++cache_stats_.in_batch_waits;
      s.waited_for_prefill = true;
      return false;
    }
    if (keeps_states()) match_state(s, m, key);  // ends where a snapshot of the state does
    cache_->lock(m.node);                    // so that making room below cannot evict it
  }
  auto got = take_pages(s.blocks.pages_needed(known + 1) - static_cast<int>(m.pages.size()), pages);
  if (!got) {
    if (cache_) cache_->unlock(m.node);
    unpin_state(s);
    return false;  // the head waits for pages: no overtaking keeps priorities fair
  }
  s.blocks.append(m.pages);
  s.blocks.append(*got);
  s.tree_owned.assign(static_cast<size_t>(s.blocks.n_pages()), false);
  std::fill(s.tree_owned.begin(), s.tree_owned.begin() + static_cast<std::ptrdiff_t>(m.pages.size()), true);
  s.cache_node = m.node;
  s.n_cache_checked = static_cast<int>(m.pages.size());
  s.n_computed = s.n_scheduled = m.n_tokens;
  if (!s.was_preempted) s.n_cached = m.n_tokens;
  s.send_history = m.n_tokens > 0;
  if (cache_) {
    ++cache_stats_.lookups;
    cache_stats_.lookup_tokens += static_cast<uint64_t>(known);
    cache_stats_.hit_tokens += static_cast<uint64_t>(m.n_tokens);
  }
  // A load may deliver fewer pages than asked, ending anywhere: prompts with images do not load.
  if (cache_ && limits_.lower_tiers && !needs_prompt_logprobs(s) && !computes_whole_prompt(s) && s.images.empty()) {
    auto keys = cache_->continue_keys(m, key, (known - 1) / limits_.page_size);
    // Load when cheaper than recomputing by the measured estimates (unknown: load); every 8th
    // candidate loads anyway, so an estimate inflated by a busy moment can come back down.
    const bool cheaper = limits_.tier_load_us_per_page <= 0 || limits_.prefill_us_per_token <= 0 ||
                         limits_.tier_load_us_per_page < limits_.prefill_us_per_token * limits_.page_size;
    const bool worth = cheaper || (keys.empty() ? false : ++n_load_skips_ % 8 == 0);
    if (!keys.empty() && worth) {
      KvLoadRequest load{s.req.id, std::move(keys), {}};
      const auto first = s.blocks.pages().begin() + static_cast<std::ptrdiff_t>(m.pages.size());
      load.pages.assign(first, first + static_cast<std::ptrdiff_t>(load.keys.size()));
      s.loading = true;
      s.n_load_pages = static_cast<int>(load.keys.size());
      ++s.n_inflight;  // like a step in flight: the executor writes into its pages
      loads_.push_back(std::move(load));
    }
  }
  if (cache_ && !s.loading) match_partial_page(s, m, key, limit);
  s.waited_for_prefill = false;  // a wait after a preemption starts afresh (the full threshold)
  const uint64_t id = s.req.id;
  admitted_now_.push_back(id);
  running_.emplace(id, std::move(s));
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
  return true;
}

// Offers the sequence's computed whole pages to the prefix cache and moves its lock to the end of
// what is cached now. Pages the tree takes stay in the sequence's block table (read-only: they
// are full) and are the tree's to free. Pages [0, n_cache_checked) are in the tree up to the
// locked cache_node, so the insert walks only the new ones (a sequence crosses a page boundary
// every page_size tokens; from the root, each crossing would re-walk its whole path).
void SchedulerPolicy::cache_computed(Seq& s, PageSource& pages, bool save) {
  // prompt_whole: a page's KV depends on the whole prompt, not on the tokens its key names, so no
  // other sequence could read it: it is neither kept in the tree nor written to the tiers.
  if (!cache_ || limits_.prompt_whole) return;
  // (An aborted sequence may have computed a token its last step sampled but it never took.)
  const int n_full = std::min(n_kv_valid(s) / limits_.page_size, s.blocks.n_pages());
  if (n_full <= s.n_cache_checked) {
    if (keeps_states()) attach_states(s);
    return;
  }
  BRIGADE_CHECK(cache_->depth(s.cache_node) == s.n_cache_checked, "the locked node ends where the checked pages do");
  RadixTree::NodeRef end = nullptr;
  std::vector<int32_t> key_buf, redundant;
  const auto fates = cache_->insert_from(
      s.cache_node, cache_key(s, key_buf).first(static_cast<size_t>(n_full) * static_cast<size_t>(limits_.page_size)),
      std::span<const int32_t>(s.blocks.pages()).first(static_cast<size_t>(n_full)), s.req.priority, &end, &redundant);
  pages.give_back(redundant);
  const auto fate = [&](int page) { return fates[static_cast<size_t>(page - s.n_cache_checked)]; };
  for (int i = s.n_cache_checked; i < n_full; ++i) {
    if (fate(i) != RadixTree::PageFate::duplicate) s.tree_owned[static_cast<size_t>(i)] = true;
  }
  if (save && limits_.lower_tiers && limits_.save_on_insert) {  // write-through: new pages go down at once
    const std::vector<PageKey> keys = cache_->path_keys(end, s.cache_node);
    for (int i = s.n_cache_checked; i < n_full; ++i) {
      if (fate(i) == RadixTree::PageFate::taken)
        saves_.push_back({s.blocks.pages()[static_cast<size_t>(i)], keys[static_cast<size_t>(i - s.n_cache_checked)]});
    }
  }
  cache_->move_lock(s.cache_node, end);
  s.cache_node = end;
  s.n_cache_checked = n_full;
  if (keeps_states()) attach_states(s);
}

// Gives a sequence's pages up: its computed whole pages go to the prefix cache when asked (and
// it is on), the rest back to the lease; its cache lock is released.
void SchedulerPolicy::retire_pages(Seq& s, PageSource& pages, bool cache_them) {
  std::vector<int32_t> freed;
  if (cache_ && cache_them) {
    cache_computed(s, pages);
    cache_tail(s, freed);
  }
  if (keeps_states()) drop_states(s);
  drop_copy(s);
  if (cache_) cache_->unlock(s.cache_node);
  s.cache_node = nullptr;
  s.n_cache_checked = 0;
  const std::vector<int32_t> blocks = s.blocks.take_all();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!s.tree_owned[i]) freed.push_back(blocks[i]);
  }
  s.tree_owned.clear();
  pages.give_back(freed);
}

std::vector<KvLoadRequest> SchedulerPolicy::take_loads() { return std::exchange(loads_, {}); }
std::vector<RadixTree::Evicted> SchedulerPolicy::take_saves() { return std::exchange(saves_, {}); }

std::vector<SeqEvent> SchedulerPolicy::loaded(uint64_t seq_id, int n_loaded, PageSource& pages) {
  std::vector<SeqEvent> events;
  auto it = running_.find(seq_id);
  if (it == running_.end() || !it->second.loading) return events;
  Seq& s = it->second;
  s.loading = false;
  --s.n_inflight;
  if (s.ended == Finish::none) {
    const int n = std::clamp(n_loaded, 0, s.n_load_pages);
    s.n_computed = s.n_scheduled = s.n_computed + n * limits_.page_size;
    if (!s.was_preempted) s.n_cached += n * limits_.page_size;
    cache_stats_.loaded_tokens += static_cast<uint64_t>(n) * static_cast<uint64_t>(limits_.page_size);
    cache_computed(s, pages, /*save=*/false);  // they came from the tiers
  }
  drop_if_drained(seq_id, pages, events);
  return events;
}

bool SchedulerPolicy::preempt_one(uint64_t except, PageSource& pages) {
  Seq* victim = nullptr;
  for (auto& [id, s] : running_) {
    if (id == except || s.n_inflight != 0 || s.ended != Finish::none) continue;
    if (!victim || s.req.priority < victim->req.priority ||
        (s.req.priority == victim->req.priority && s.arrival > victim->arrival))
      victim = &s;
  }
  if (!victim) return false;
  const uint64_t id = victim->req.id;
  retire_pages(*victim, pages, true);  // its computed pages stay cached: re-admission may match them
  released_.push_back(id);  // the executor forgets its sampled token and penalty history
  victim->n_computed = victim->n_scheduled = 0;
  victim->was_preempted = true;
  victim->waits_for_room = false;
  Seq s = std::move(*victim);
  running_.erase(id);
  enqueue(std::move(s));
  ++n_preemptions_;
  return true;
}

// Makes the block table cover n_positions, preempting others when the pool is short.
bool SchedulerPolicy::ensure_pages(Seq& s, int n_positions, PageSource& pages) {
  const int need = s.blocks.pages_needed(n_positions);
  if (need == 0) return true;
  for (;;) {
    if (auto got = take_pages(need, pages)) {
      s.blocks.append(*got);
      s.tree_owned.resize(static_cast<size_t>(s.blocks.n_pages()), false);
      return true;
    }
    if (pages.n_available() + pages.n_obtainable() >= need) {  // the page manager has them: wait
      pages_wanted_ += need - pages.n_available();
      return false;
    }
    if (!preempt_one(s.req.id, pages)) return false;
  }
}

// A decode: one token, either the last one seen or the one an in-flight step is sampling.
bool SchedulerPolicy::wants_decode(const Seq& s) const {
  // A prefill instance never decodes: its sequences leave after their first token.
  if (s.ended != Finish::none || s.loading || s.drafting || limits_.role == PdRole::prefill) return false;
  const int known = static_cast<int>(s.tokens.size());
  if (s.n_pending > 0) {
    BRIGADE_CHECK(s.n_scheduled == known + s.n_pending - 1, "pending samples follow the scheduled positions");
    return s.n_generated + s.n_pending < s.req.max_tokens && known + s.n_pending < s.max_context;
  }
  return s.n_generated > 0 && known - s.n_scheduled == 1;
}

// A chunk of known tokens not yet scheduled: a prompt, or the recompute of a preempted sequence.
bool SchedulerPolicy::wants_chunk(const Seq& s) const {
  return s.ended == Finish::none && !s.loading && !s.exporting && s.n_pending == 0 &&
         static_cast<int>(s.tokens.size()) > s.n_scheduled && !wants_decode(s);
}

// n_tokens counts the drafts, which follow the sequence's known tokens.
void SchedulerPolicy::add_work(Seq& s, int n_tokens, PlannedStep& step, std::vector<StepEntry>& entries,
                               std::span<const int32_t> drafts) {
  const int known = static_cast<int>(s.tokens.size());
  const bool pending = s.n_pending > 0;
  const int n_draft = static_cast<int>(drafts.size());
  BRIGADE_CHECK(n_draft == 0 || (!pending && s.n_scheduled + n_tokens - n_draft == known),
                "drafts follow the sequence's last known token");
  SeqWorkItem w;
  w.seq_id = s.req.id;
  if (pending) {
    w.tokens = {0};  // replaced by the executor with the token it sampled last for this sequence
    w.use_last_sampled = true;
  } else {
    w.tokens.assign(s.tokens.begin() + s.n_scheduled, s.tokens.begin() + s.n_scheduled + n_tokens - n_draft);
    w.tokens.insert(w.tokens.end(), drafts.begin(), drafts.end());
  }
  w.n_draft = n_draft;
  w.start_pos = s.n_scheduled;
  const int n_pages_used = (s.n_scheduled + n_tokens + limits_.page_size - 1) / limits_.page_size;
  w.block_table.assign(s.blocks.pages().begin(), s.blocks.pages().begin() + n_pages_used);
  w.sample = (pending || s.n_scheduled + n_tokens - n_draft == known) && s.req.max_tokens > 0;
  w.sampling = s.req.sampling;
  w.n_generated = static_cast<uint32_t>(s.n_generated + s.n_pending);  // index of the token sampled
  w.logprobs = s.req.logprobs;
  w.prompt_len = static_cast<int>(s.req.prompt.size());
  w.lora = s.req.lora;
  // Starting after a cached prefix: penalties, the output matcher and the thinking budget need the
  // tokens the executor did not see.
  if (s.send_history && (w.sampling.has_penalties() || w.sampling.constrained() || w.sampling.budgeted()))
    w.history.assign(s.tokens.begin(), s.tokens.begin() + s.n_scheduled);
  s.send_history = false;
  StepEntry e{s.req.id, n_tokens, w.sample, n_draft, s.n_scheduled};
  if (s.copy_dst >= 0 && !s.copy_planned) {  // the sequence's first item: its partial match
    w.copy_src = s.copy_src.page;
    w.copy_dst = s.copy_dst;
    w.copy_rows = s.copy_src.n_tokens;
    e.copies = true;
    s.copy_planned = true;
  }
  plan_prompt_logprobs(s, w, e);
  plan_pooling(s, w, e);
  plan_images(s, w);
  plan_states(s, w, e, n_tokens);
  if (limits_.spec.mtp) {  // SpeculativeLimits::mtp
    const int end = s.n_scheduled + n_tokens - n_draft;
    if (!w.sample && w.next_token < 0 && end < known) w.next_token = s.tokens[static_cast<size_t>(end)];
    // Drafts cost the module's chain forwards: only while the load rule would verify them.
    if (w.sample && spec_active(s) && step_rule_ == DraftRule::on) {
      w.mtp_drafts = limits_.spec.num_tokens;
      // The executor drafts at positions up to start + n_tokens + k - 2: the pages the sequence
      // holds for them go along (plan_decodes reserves them when the lease has room).
      const int want = (s.n_scheduled + n_tokens + w.mtp_drafts - 1 + limits_.page_size - 1) / limits_.page_size;
      const int n = std::min(want, s.blocks.n_pages());
      if (n > static_cast<int>(w.block_table.size())) w.block_table.assign(s.blocks.pages().begin(), s.blocks.pages().begin() + n);
    }
  }
  entries.push_back(e);
  s.n_scheduled += n_tokens;
  if (w.sample) ++s.n_pending;
  ++s.n_inflight;
  s.drafting = n_draft > 0;
  step.n_tokens += n_tokens;
  step.seqs.push_back(std::move(w));
}

// Decodes of running sequences: one token each (plus drafts), so they never starve behind long
// prompts. Drafting needs each sequence's last token, so while drafts are on, decode steps run
// one at a time: a decode step beside one in flight would either leave out the sequences whose
// tokens are still coming (splitting the batch over two steps that each read every weight) or
// decode them without drafts. Prompt chunks still overlap.
void SchedulerPolicy::plan_decodes(PlannedStep& step, std::vector<StepEntry>& entries, int& budget, PageSource& pages) {
  std::vector<uint64_t> ids;
  const auto in_step = [&](uint64_t id) {  // a whole chunk planned first (its token is sampled in this step)
    return std::any_of(step.seqs.begin(), step.seqs.end(), [&](const SeqWorkItem& w) { return w.seq_id == id; });
  };
  for (const auto& [id, s] : running_) {
    if (wants_decode(s) && !in_step(id)) ids.push_back(id);
  }
  if (ids.empty()) return;
  const bool drafts_ok = drafting_this_step();
  if (drafts_ok && std::any_of(running_.begin(), running_.end(),
                               [](const auto& kv) { return kv.second.drafting || kv.second.n_pending > 0; }))
    return;
  std::map<uint64_t, std::vector<int32_t>> proposed;
  if (drafts_ok) proposed = propose_drafts(ids, budget);
  for (uint64_t id : ids) {
    auto it = running_.find(id);  // an earlier decode may have preempted it
    if (budget <= 0 || it == running_.end() || !wants_decode(it->second)) continue;
    Seq& s = it->second;
    std::vector<int32_t> drafts;
    if (auto p = proposed.find(id); p != proposed.end()) drafts = std::move(p->second);
    if (!ensure_pages(s, s.n_scheduled + 1, pages)) continue;
    if (!drafts.empty() && !take_draft_pages(s, static_cast<int>(drafts.size()), pages)) drafts.clear();
    // MTP: room for the next drafts the executor makes after this step (best effort).
    if (limits_.spec.mtp && drafts_ok && spec_active(s))
      take_draft_pages(s, static_cast<int>(drafts.size()) + limits_.spec.num_tokens - 1, pages);
    const int n = 1 + static_cast<int>(drafts.size());
    if (!drafts.empty()) {
      spec_stats_.draft_tokens += drafts.size();
      ++spec_stats_.verify_seqs;
    }
    add_work(s, n, step, entries, drafts);
    budget -= n;
  }
}

// A whole chunk (an image that must not be split, a prompt_whole prompt) runs only in a step whose
// budget holds it. Planned after the decodes, it could wait as long as decodes keep the budget
// below its length: one that found no room last step goes before them now, and the decodes it
// displaces wait a step (as they do for a prompt without chunked prefill).
void SchedulerPolicy::plan_waiting_whole(PlannedStep& step, std::vector<StepEntry>& entries, int& budget,
                                         PageSource& pages) {
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : running_)
    if (s.waits_for_room) ids.push_back(id);
  for (uint64_t id : ids) {
    auto it = running_.find(id);
    if (it == running_.end()) continue;
    Seq& s = it->second;
    if (!wants_chunk(s)) {
      s.waits_for_room = false;
      continue;
    }
    const int n = chunk_within_images(s, std::min(static_cast<int>(s.tokens.size()) - s.n_scheduled, budget));
    if (plan_chunk(s, n, step, entries, budget, pages)) s.waits_for_room = false;  // else it still waits
  }
}

bool SchedulerPolicy::plan_chunk(Seq& s, int n, PlannedStep& step, std::vector<StepEntry>& entries, int& budget,
                                 PageSource& pages) {
  const bool alone = runs_alone(s, n);
  if (n == 0 || (alone && !step.seqs.empty()) || !ensure_pages(s, s.n_scheduled + n, pages)) return false;
  add_work(s, n, step, entries);
  budget = alone ? 0 : budget - n;  // nothing joins a chunk that runs alone
  return true;
}

std::optional<PlannedStep> SchedulerPolicy::plan(PageSource& pages) {
  PlannedStep step;
  step.step_id = next_step_;
  std::vector<StepEntry> entries;
  int budget = limits_.max_step_tokens;
  pages_wanted_ = 0;
  admitted_now_.clear();
  step_rule_ = draft_rule();  // one load-rule decision for every item of the step
  auto ids = [&] {
    std::vector<uint64_t> out;
    for (const auto& [id, s] : running_) out.push_back(id);
    return out;
  };
  if (!limits_.chunked_prefill) {
    // Without chunked prefill a prompt runs whole, and a step with prompts runs nothing else
    // (decodes pause for it); a prompt longer than the budget runs alone.
    while (admit_next(pages)) {
    }
    for (uint64_t id : ids()) {
      auto it = running_.find(id);
      if (budget <= 0) break;
      if (it == running_.end() || !wants_chunk(it->second)) continue;
      Seq& s = it->second;
      const int n = chunk_within_images(s, static_cast<int>(s.tokens.size()) - s.n_scheduled);
      if (!step.seqs.empty() && n > budget) continue;
      plan_chunk(s, n, step, entries, budget, pages);
    }
  }
  const bool prefill_only = !step.seqs.empty();
  // 1. Chunks that must run whole and waited a step for room, then decodes (unless this is a
  // prefill-only step).
  if (limits_.chunked_prefill) plan_waiting_whole(step, entries, budget, pages);
  if (!prefill_only) plan_decodes(step, entries, budget, pages);
  // 2. Admission with the pages left, 3. prompt (and recompute) chunks fill the budget.
  while (limits_.chunked_prefill && admit_next(pages)) {
  }
  for (uint64_t id : ids()) {
    auto it = running_.find(id);
    if (budget <= 0 || !limits_.chunked_prefill) break;
    if (it == running_.end() || !wants_chunk(it->second)) continue;
    Seq& s = it->second;
    const int rest = static_cast<int>(s.tokens.size()) - s.n_scheduled;
    const int n = chunk_within_images(s, std::min(rest, budget));
    // Cut to nothing by the budget alone (a whole chunk longer than what is left), or one that
    // runs alone in a step that holds others: it goes first next step.
    if ((n == 0 && budget < rest && chunk_within_images(s, rest) > 0) || (runs_alone(s, n) && !step.seqs.empty()))
      s.waits_for_room = true;
    plan_chunk(s, n, step, entries, budget, pages);
  }
  // A sequence admitted after the decodes whose cache match covers all but its last token (a
  // preempted one whose pages, or state snapshot, stayed cached) has a decode to run, not a
  // chunk: it runs in this step, or no step might come back to wake the scheduler for it.
  for (uint64_t id : std::exchange(admitted_now_, {})) {
    auto it = running_.find(id);
    if (budget <= 0 || !limits_.chunked_prefill) break;
    if (it == running_.end() || it->second.n_inflight > 0 || it->second.n_pending > 0 || !wants_decode(it->second))
      continue;
    if (!ensure_pages(it->second, it->second.n_scheduled + 1, pages)) continue;
    add_work(it->second, 1, step, entries);
    budget -= 1;
  }
  if (step.seqs.empty()) return std::nullopt;  // releases wait for the next real step
  step.released.swap(released_);
  inflight_.emplace(step.step_id, std::move(entries));
  ++next_step_;
  return step;
}

Finish SchedulerPolicy::finish_of(const Seq& s) const {
  if (s.n_generated == 0) return Finish::none;
  const int32_t last = s.tokens.back();
  // Below min_tokens the executor masks the stop ids; a sequence fed one anyway goes on.
  const bool may_stop = s.n_generated >= s.req.sampling.min_tokens;
  if (may_stop && !s.req.ignore_eos && std::find(s.req.eos_ids.begin(), s.req.eos_ids.end(), last) != s.req.eos_ids.end())
    return Finish::stop;
  if (may_stop && std::find(s.req.stop_ids.begin(), s.req.stop_ids.end(), last) != s.req.stop_ids.end())
    return Finish::stop;
  if (s.n_generated >= s.req.max_tokens) return Finish::length;
  if (static_cast<int>(s.tokens.size()) >= s.max_context) return Finish::length;
  return Finish::none;
}

SeqEvent SchedulerPolicy::final_event(Seq& s) {
  s.final_sent = true;
  SeqEvent ev;
  ev.seq_id = s.req.id;
  ev.finish = s.ended;
  ev.error = s.error;
  ev.error_code = s.ended == Finish::error ? StatusCode::internal : StatusCode::ok;
  ev.prompt_tokens = static_cast<int>(s.req.prompt.size());
  ev.completion_tokens = s.n_generated;
  ev.cached_tokens = s.n_cached;
  if (s.ended != Finish::error && s.ended != Finish::abort) {
    attach_prompt_logprobs(s, ev);
    ev.embedding = std::move(s.embedding);
  }
  return ev;
}

void SchedulerPolicy::release(Seq& s, PageSource& pages) {
  retire_pages(s, pages, s.ended != Finish::error);
  released_.push_back(s.req.id);
  if (drafter_) drafter_->forget(s.req.id);
}

// An ended sequence leaves once no step in flight uses it; its final event goes out then if it
// has not yet (abort, error).
void SchedulerPolicy::drop_if_drained(uint64_t id, PageSource& pages, std::vector<SeqEvent>& events) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  Seq& s = it->second;
  if (s.ended == Finish::none || s.n_inflight != 0) return;
  if (!s.final_sent) events.push_back(final_event(s));
  release(s, pages);
  running_.erase(it);
}

int SchedulerPolicy::append_tokens(Seq& s, std::span<const SampledResult* const> got, std::vector<SeqEvent>& events) {
  SeqEvent ev;
  ev.seq_id = s.req.id;
  int n = 0;
  for (const SampledResult* r : got) {
    s.tokens.push_back(r->token);
    ++s.n_generated;
    ++n;
    ev.new_tokens.push_back(r->token);
    if (s.req.logprobs >= 0) {
      ev.logprobs.push_back(r->logprob);
      if (s.req.logprobs > 0) ev.top_logprobs.push_back(r->top);
    }
    s.ended = finish_of(s);
    if (s.ended != Finish::none) break;  // a stop inside several tokens truncates there
  }
  ev.prompt_tokens = static_cast<int>(s.req.prompt.size());
  ev.completion_tokens = s.n_generated;
  ev.cached_tokens = s.n_cached;
  attach_prompt_logprobs(s, ev);
  if (s.ended != Finish::none) {
    ev.finish = s.ended;
    s.final_sent = true;
  }
  events.push_back(std::move(ev));
  return n;
}

std::vector<SeqEvent> SchedulerPolicy::complete(uint64_t step_id, std::span<const SampledResult> sampled,
                                                PageSource& pages, std::span<const PromptLogprobRun> prompt_logprobs,
                                                std::span<const PooledEmbedding> embeddings,
                                                std::span<const SeqDrafts> drafts) {
  BRIGADE_CHECK(!inflight_.empty() && inflight_.begin()->first == step_id, "steps complete in the order planned");
  std::vector<StepEntry> entries = std::move(inflight_.begin()->second);
  inflight_.erase(inflight_.begin());
  std::map<uint64_t, std::vector<const SampledResult*>> by_seq;  // a sequence's tokens, in order
  for (const auto& r : sampled) by_seq[r.seq_id].push_back(&r);
  std::vector<SeqEvent> events;
  for (const StepEntry& e : entries) {
    Seq& s = running_.at(e.seq_id);  // a sequence with a step in flight is never dropped
    --s.n_inflight;
    if (e.copies) drop_copy(s);  // the executor copied the rows before the step
    if (e.state_save >= 0) finish_save(s, e.state_save, /*done=*/true);
    if (e.restores) ++cache_stats_.state_restores;
    auto hit = by_seq.find(e.seq_id);
    const std::vector<const SampledResult*>* got = hit == by_seq.end() ? nullptr : &hit->second;
    if (e.n_draft > 0) {
      complete_drafts(s, e, got, events, pages);
      drop_if_drained(e.seq_id, pages, events);
      continue;
    }
    s.n_computed += e.n_tokens;
    if (s.ended == Finish::none) cache_computed(s, pages);  // shares its prompt with later requests
    if (s.ended == Finish::none && !take_prompt_logprobs(s, e, prompt_logprobs)) s.ended = Finish::error;
    if (s.ended == Finish::none && !take_embedding(s, e, embeddings)) s.ended = Finish::error;
    // max_tokens 0: the prompt ran, nothing is sampled (a pooling request has what it asked for).
    if (s.ended == Finish::none && s.req.max_tokens == 0 && s.n_computed >= static_cast<int>(s.req.prompt.size()))
      s.ended = s.req.pooling != Pooling::none ? Finish::stop : Finish::length;
    if (e.sample) {
      --s.n_pending;
      if (s.ended == Finish::none && (!got || got->size() != 1)) {
        s.ended = Finish::error;
        s.error = "the executor returned " + std::to_string(got ? got->size() : 0) +
                  " tokens for a sequence that asked for one";
      } else if (s.ended == Finish::none) {  // tokens after the end (overlap) are dropped
        append_tokens(s, *got, events);
        if (limits_.role == PdRole::prefill && s.ended == Finish::none) start_export(s);
      }
    }
    drop_if_drained(e.seq_id, pages, events);
  }
  for (const SeqDrafts& d : drafts) {  // MTP proposals for the sequences as they now stand
    auto it = running_.find(d.seq_id);
    if (drafter_ && it != running_.end() && it->second.ended == Finish::none)
      drafter_->take_proposal(d.seq_id, static_cast<int>(it->second.tokens.size()), d.tokens);
  }
  return events;
}

std::vector<SeqEvent> SchedulerPolicy::fail(uint64_t step_id, const std::string& error, PageSource& pages) {
  // Results come in the order planned, failures not always: when the executor dies, a step sent
  // after its death bounces at once, ahead of the error of an older step still in its mailbox.
  std::vector<SeqEvent> events;
  auto it = inflight_.find(step_id);
  if (it == inflight_.end()) return events;
  std::vector<StepEntry> entries = std::move(it->second);
  inflight_.erase(it);
  for (const StepEntry& e : entries) {
    Seq& s = running_.at(e.seq_id);
    --s.n_inflight;
    if (e.sample) --s.n_pending;
    if (e.copies) drop_copy(s);
    if (e.state_save >= 0) finish_save(s, e.state_save, /*done=*/false);
    s.drafting = false;
    if (s.ended == Finish::none) {
      s.ended = Finish::error;
      s.error = error;
    }
    drop_if_drained(e.seq_id, pages, events);
  }
  return events;
}

// ---- partly filled pages (SchedulerLimits::partial_pages) ----

// The match m ends at a page boundary; the next tokens may begin a tail of its node or the first
// page of one of its children. Their rows are copied into the sequence's next page (its own) by
// its first step, so they are neither computed nor shared: no page is ever written by two.
void SchedulerPolicy::match_partial_page(Seq& s, const RadixTree::Match& m, std::span<const int32_t> key, int limit) {
  if (!limits_.partial_pages || limits_.spec.mtp) return;
  RadixTree::Partial p = cache_->match_partial(m.node, key.subspan(static_cast<size_t>(m.n_tokens)), limit - m.n_tokens);
  // An image's rows are computed together (unless its model cuts images): stop before it.
  p.n_tokens = image_safe_prefix(s, m.n_tokens + p.n_tokens) - m.n_tokens;
  // Position 0 alone is the one key position a cache salt leaves as it is (salt_key): a run that
  // covers nothing else would let salts share it.
  if (p.n_tokens <= 0 || m.n_tokens + p.n_tokens < 2) return;
  cache_->hold(p);
  s.copy_src = p;
  s.copy_dst = s.blocks.pages()[m.pages.size()];
  s.copy_planned = false;
  s.n_computed = s.n_scheduled = m.n_tokens + p.n_tokens;
  s.send_history = true;
  if (!s.was_preempted) s.n_cached += p.n_tokens;
  cache_stats_.hit_tokens += static_cast<uint64_t>(p.n_tokens);
  cache_stats_.partial_hit_tokens += static_cast<uint64_t>(p.n_tokens);
}

void SchedulerPolicy::drop_copy(Seq& s) {
  if (s.copy_dst < 0) return;
  cache_->release(s.copy_src);
  s.copy_src = {};
  s.copy_dst = -1;
  s.copy_planned = false;
}

// After cache_computed: the whole pages are in the tree up to cache_node, and the page after
// them holds the rows [n_full * page_size, n_kv_valid) of this sequence alone.
void SchedulerPolicy::cache_tail(Seq& s, std::vector<int32_t>& freed) {
  if (!limits_.partial_pages || limits_.spec.mtp) return;
  const int ps = limits_.page_size;
  const int n_valid = n_kv_valid(s), n_full = n_valid / ps, rows = n_valid - n_full * ps;
  if (rows == 0 || n_full >= s.blocks.n_pages() || s.n_cache_checked != n_full ||
      s.tree_owned[static_cast<size_t>(n_full)])
    return;
  std::vector<int32_t> key_buf;
  const std::span<const int32_t> tokens =
      cache_key(s, key_buf).subspan(static_cast<size_t>(n_full) * static_cast<size_t>(ps), static_cast<size_t>(rows));
  if (cache_->insert_tail(s.cache_node, tokens, s.blocks.pages()[static_cast<size_t>(n_full)], s.req.priority, freed))
    s.tree_owned[static_cast<size_t>(n_full)] = true;
}

}  // namespace brigade
