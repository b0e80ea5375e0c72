// Recurrent models' state snapshots in the prefix cache (SchedulerPolicy, policy.h "Recurrent
// models"; docs/architecture.md "State snapshots").
#include <algorithm>

#include "actors/scheduler/policy.h"

namespace brigade {

int SchedulerPolicy::state_prefix_pages(const RadixTree::Match& m) const {
  size_t k = m.pages.size();
  while (k > 0 && snap_of_page_.count(m.pages[k - 1]) == 0) --k;
  return static_cast<int>(k);
}

void SchedulerPolicy::match_state(Seq& s, RadixTree::Match& m, std::span<const int32_t> key) {
  const size_t k = static_cast<size_t>(state_prefix_pages(m));
  // The tree holds pages past the deepest snapshot: this prompt shares them (a system prompt,
  // say) and leaves the cached path after them, or ends in it. Its prefill saves the state there.
  s.branch_save = k < m.pages.size() ? static_cast<int>(m.pages.size()) * limits_.page_size : 0;
  if (k < m.pages.size()) {
    m = cache_->match(key, static_cast<int>(k) * limits_.page_size, /*touch=*/false);
    BRIGADE_CHECK(m.pages.size() == k, "a cached prefix matches again up to any of its pages");
  }
  if (k == 0) return;
  const int snap = snap_of_page_.at(m.pages[k - 1]);
  Snapshot& sn = snaps_[static_cast<size_t>(snap)];
  ++sn.pins;
  sn.last_use = ++snap_clock_;
  s.state_from = snap;
}

void SchedulerPolicy::unpin_state(Seq& s) {
  if (s.state_from < 0) return;
  --snaps_[static_cast<size_t>(s.state_from)].pins;
  s.state_from = -1;
}

void SchedulerPolicy::plan_states(Seq& s, SeqWorkItem& w, StepEntry& e, int n_tokens) {
  if (!keeps_states()) return;
  if (s.state_from >= 0) {  // its first item: the executor restores the snapshot before the step
    w.state_from = s.state_from;
    unpin_state(s);  // a later step may reuse the slot: the executor runs this step first
    e.restores = true;
  }
  // Where a snapshot is worth taking: where the prompt leaves a cached path without one
  // (branch_save: what later prompts sharing that prefix need); else the last page boundary of a
  // prompt chunk that does not end the known tokens; in the chunk that does, the last boundary a
  // repeat of those tokens can match (one token is always computed); in a decode, the boundary
  // it completes. One per item.
  const int ps = limits_.page_size, a = s.n_scheduled, b = a + n_tokens;
  const int known = static_cast<int>(s.tokens.size());
  const bool decode = n_tokens == 1 && (s.n_pending > 0 || s.n_generated > 0);
  int at = decode ? (b % ps == 0 ? b : 0) : b < known ? b / ps * ps : (known - 1) / ps * ps;
  if (!decode && s.branch_save > a && s.branch_save <= b) {
    at = s.branch_save;
    s.branch_save = 0;
  }
  if (at <= a || at > b) return;
  // Its earlier saves that came back but did not join the tree are superseded by this one.
  for (auto it = s.state_saves.begin(); it != s.state_saves.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    free_snapshot(it->snap);
    it = s.state_saves.erase(it);
  }
  const int snap = take_snapshot();
  if (snap < 0) return;  // every snapshot is being saved or about to be restored
  w.state_save = snap;
  w.state_save_pos = at;
  e.state_save = snap;
  s.state_saves.push_back({snap, at, false, decode});
}

int SchedulerPolicy::take_snapshot() {
  int snap = -1;
  if (!free_snaps_.empty()) {
    snap = free_snaps_.back();
    free_snaps_.pop_back();
  } else {
    for (size_t i = 0; i < snaps_.size(); ++i) {
      const Snapshot& sn = snaps_[i];
      if (sn.page < 0 || sn.pins > 0) continue;  // being saved, or an admitted sequence starts from it
      if (snap < 0 || sn.last_use < snaps_[static_cast<size_t>(snap)].last_use) snap = static_cast<int>(i);
    }
    if (snap < 0) return -1;
    snap_of_page_.erase(snaps_[static_cast<size_t>(snap)].page);
  }
  snaps_[static_cast<size_t>(snap)] = Snapshot{-1, true, 0, 0};
  return snap;
}

void SchedulerPolicy::free_snapshot(int snap) {
  Snapshot& sn = snaps_[static_cast<size_t>(snap)];
  if (!sn.used) return;
  BRIGADE_CHECK(sn.pins == 0, "a snapshot an admitted sequence starts from stays");
  if (sn.page >= 0) snap_of_page_.erase(sn.page);
  sn = Snapshot{};
  free_snaps_.push_back(snap);
}

void SchedulerPolicy::attach_states(Seq& s) {
  const int ps = limits_.page_size;
  const int in_tree = s.n_cache_checked * ps;  // cache_computed: pages [0, n_cache_checked) are the tree's
  for (auto it = s.state_saves.begin(); it != s.state_saves.end();) {
    if (!it->done || it->n_tokens > in_tree) {
      ++it;
      continue;
    }
    const size_t j = static_cast<size_t>(it->n_tokens / ps - 1);
    int32_t page = s.blocks.pages()[j];
    if (!s.tree_owned[j]) {  // the tree holds the same tokens in a page of another sequence
      std::vector<int32_t> key_buf;
      const RadixTree::Match m = cache_->match(cache_key(s, key_buf), it->n_tokens, /*touch=*/false);
      page = m.pages.size() > j ? m.pages[j] : -1;
    }
    if (page < 0 || snap_of_page_.count(page) != 0) {  // (the tree's page has its own snapshot)
      free_snapshot(it->snap);
    } else {
      Snapshot& sn = snaps_[static_cast<size_t>(it->snap)];
      sn.page = page;
      sn.last_use = ++snap_clock_;
      snap_of_page_.emplace(page, it->snap);
      ++cache_stats_.state_saves;
      if (it->decode) {  // a running sequence keeps only its latest decode snapshot in the tree
        if (s.decode_snap >= 0) {
          const Snapshot& old = snaps_[static_cast<size_t>(s.decode_snap)];
          if (old.page == s.decode_snap_page && old.page >= 0 && old.pins == 0) free_snapshot(s.decode_snap);
        }
        s.decode_snap = it->snap;
        s.decode_snap_page = page;
      }
    }
    it = s.state_saves.erase(it);
  }
}

void SchedulerPolicy::finish_save(Seq& s, int snap, bool done) {
  auto it = std::find_if(s.state_saves.begin(), s.state_saves.end(), [&](const Seq::StateSave& v) { return v.snap == snap; });
  if (it == s.state_saves.end()) return;
  if (done) {
    it->done = true;
    return;
  }
  free_snapshot(snap);
  s.state_saves.erase(it);
}

void SchedulerPolicy::drop_states(Seq& s) {
  unpin_state(s);
  for (const Seq::StateSave& v : s.state_saves) free_snapshot(v.snap);
  s.state_saves.clear();
  s.decode_snap = -1;  // it stays in the tree: a later turn may continue from it
  s.decode_snap_page = -1;
}

void SchedulerPolicy::forget_states(std::span<const RadixTree::Evicted> gone) {
  if (snap_of_page_.empty()) return;
  for (const RadixTree::Evicted& e : gone) {
    if (auto it = snap_of_page_.find(e.page); it != snap_of_page_.end()) free_snapshot(it->second);
  }
}

}  // namespace brigade
