// SchedulerPolicy with a recurrent model's state snapshots (SchedulerLimits::state_snapshots,
// policy_states.cpp). StateSim plays the executor: each sequence's state is the list of tokens it
// has consumed, a snapshot a copy of one; it checks every step as the model does (a sequence
// starts at 0, continues exactly where its state ends, or starts from a snapshot that ends at its
// first position) and, beyond what a model can see, that every state holds exactly the
// sequence's own tokens: a snapshot restored into a sequence is the state of that sequence's
// prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include "actors/scheduler/policy.h"
#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;
using testing::prompt_req;
using testing::range;

SchedulerLimits state_limits(int snapshots) {
  SchedulerLimits l;
  l.max_running = 4;
  l.max_waiting = 256;
  l.max_step_tokens = 16;
  l.max_context = 256;
  l.page_size = 4;
  l.vocab_size = 100;
  l.prefix_cache = true;
  l.state_snapshots = snapshots;
  return l;
}



// The token a sequence samples at a position (never eos).
int32_t sampled(uint64_t id, int pos) { return 10 + static_cast<int32_t>((id * 7 + static_cast<uint64_t>(pos)) % 80); }

struct StateSim {
  std::map<uint64_t, std::vector<int32_t>> state;   // per sequence the executor tracks
  std::map<int, std::vector<int32_t>> snaps;
  std::map<uint64_t, std::vector<int32_t>> truth;   // prompt + sampled tokens
  std::map<uint64_t, int32_t> last;
  std::map<uint64_t, SeqWorkItem> first_item;
  int restores = 0, saves = 0;

  void add(SchedulerPolicy& p, SeqRequest r) {
    truth[r.id] = r.prompt;
    ASSERT_TRUE(p.add(std::move(r)).is_ok());
  }

  std::vector<SampledResult> run(const PlannedStep& s) {
    for (uint64_t id : s.released) state.erase(id);
    for (const SeqWorkItem& w : s.seqs) {  // restores before anything runs
      first_item.emplace(w.seq_id, w);
      if (w.state_from < 0) continue;
      auto it = snaps.find(w.state_from);
      if (it == snaps.end()) {
        ADD_FAILURE() << "sequence " << w.seq_id << " restores snapshot " << w.state_from << ", never saved";
        continue;
      }
      EXPECT_EQ(static_cast<int>(it->second.size()), w.start_pos) << "a snapshot ends where its sequence starts";
      EXPECT_GT(w.start_pos, 0);
      state[w.seq_id] = it->second;
      ++restores;
    }
    std::vector<SampledResult> out;
    for (const SeqWorkItem& w : s.seqs) {
      std::vector<int32_t>& st = state[w.seq_id];
      if (w.start_pos == 0) st.clear();
      EXPECT_EQ(static_cast<int>(st.size()), w.start_pos) << "sequence " << w.seq_id << " continues its state";
      const std::vector<int32_t>& t = truth[w.seq_id];
      EXPECT_TRUE(st.size() <= t.size() && std::equal(st.begin(), st.end(), t.begin()))
          << "sequence " << w.seq_id << "'s state holds its own tokens";
      for (size_t j = 0; j < w.tokens.size(); ++j) {
        st.push_back(j == 0 && w.use_last_sampled ? last.at(w.seq_id) : w.tokens[j]);
        if (w.state_save >= 0 && static_cast<int>(st.size()) == w.state_save_pos) {
          snaps[w.state_save] = st;
          ++saves;
        }
      }
      if (w.state_save >= 0) {
        EXPECT_TRUE(w.state_save_pos > w.start_pos && w.state_save_pos <= static_cast<int>(st.size()) &&
                    w.state_save_pos % 4 == 0)
            << "a save at a page boundary inside the item";
      }
      if (!w.sample) continue;
      const int32_t tok = sampled(w.seq_id, static_cast<int>(st.size()));
      last[w.seq_id] = tok;
      truth[w.seq_id].push_back(tok);
      out.push_back({w.seq_id, tok, 0.0f, {}});
    }
    return out;
  }

  // Plans and completes steps until nothing is left, `depth` steps in flight.
  void drain(SchedulerPolicy& p, PageSource& pages, int depth = 1) {
    std::deque<std::pair<uint64_t, std::vector<SampledResult>>> inflight;
    for (int steps = 0; steps < 5000; ++steps) {
      if (static_cast<int>(inflight.size()) < depth) {
        if (auto s = p.plan(pages)) {
          inflight.emplace_back(s->step_id, run(*s));
          continue;
        }
      }
      if (inflight.empty()) break;
      p.complete(inflight.front().first, inflight.front().second, pages);
      inflight.pop_front();
    }
    EXPECT_FALSE(p.has_work());
  }
};

// A prompt leaves a snapshot at the last page boundary a repeat of it can match (one token is
// always computed): the repeat starts there, from the snapshot, and generates the same tokens.
TEST(SchedulerPolicyStates, ARepeatedPromptStartsFromItsSnapshot) {
  SchedulerPolicy p(state_limits(4), 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  sim.add(p, prompt_req(1, range(20, 10), 3));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(1).start_pos, 0);
  EXPECT_EQ(sim.first_item.at(1).state_from, -1);
  sim.add(p, prompt_req(2, range(20, 10), 3));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 8);
  EXPECT_GE(sim.first_item.at(2).state_from, 0);
  EXPECT_EQ(sim.restores, 1);
  const PrefixCacheStats st = p.cache_stats();
  EXPECT_EQ(st.hit_tokens, 8u);
  EXPECT_EQ(st.state_restores, 1u);
  EXPECT_GE(st.state_snapshots, 1);
  EXPECT_EQ(pages.pool.n_used(), st.cached_pages);  // nothing leaks
}

// A conversation's next turn (the last turn's prompt and answer, then more) continues from the
// snapshot the last decode left at a page boundary.
TEST(SchedulerPolicyStates, ANextTurnContinuesFromTheLastDecodeSnapshot) {
  SchedulerPolicy p(state_limits(4), 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  sim.add(p, prompt_req(1, range(20, 10), 9));
  sim.drain(p, pages, 2);
  std::vector<int32_t> turn2 = sim.truth.at(1);  // 10 prompt + 9 generated; 18 computed
  ASSERT_EQ(turn2.size(), 19u);
  turn2.insert(turn2.end(), {70, 71, 72, 73, 74});
  sim.add(p, prompt_req(2, turn2, 2));
  sim.drain(p, pages, 2);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 16);
  EXPECT_GE(sim.first_item.at(2).state_from, 0);
  // Sequence 1 kept only its latest decode snapshot (16, not 12) beside its prompt's (8); the
  // second turn's prompt left one at 20.
  EXPECT_EQ(p.cache_stats().state_snapshots, 3);
}

// A long prompt runs in chunks, each leaving a snapshot at its last page boundary: a prompt that
// shares only its first part starts from the deepest snapshot inside what it shares.
TEST(SchedulerPolicyStates, ChunksLeaveSnapshotsThatAPartlySharedPromptStartsFrom) {
  SchedulerLimits l = state_limits(8);
  l.max_step_tokens = 8;
  SchedulerPolicy p(l, 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  sim.add(p, prompt_req(1, range(20, 30), 1));  // chunks [0,8) [8,16) [16,24) [24,30): snapshots at 8, 16, 24, 28
  sim.drain(p, pages);
  EXPECT_EQ(sim.saves, 4);
  std::vector<int32_t> other = range(20, 21);
  other.insert(other.end(), {90, 91, 92});
  sim.add(p, prompt_req(2, other, 1));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 16);  // the tree holds 20 of its tokens, a snapshot ends at 16
  EXPECT_GE(sim.first_item.at(2).state_from, 0);
}

// Prompts that share a system prompt and then differ: the first leaves no snapshot inside the
// shared part (its own are deeper), so the second computes it, but saves the state where it
// leaves the first one's cached path; from the third on, they start there.
TEST(SchedulerPolicyStates, ThePointWherePromptsDivergeGetsASnapshotForTheNextOnes) {
  SchedulerPolicy p(state_limits(4), 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  auto with_system = [](std::vector<int32_t> question) {
    std::vector<int32_t> prompt = range(20, 10);  // the shared part: two whole pages and 2 tokens
    prompt.insert(prompt.end(), question.begin(), question.end());
    return prompt;
  };
  sim.add(p, prompt_req(1, with_system({60, 61, 62, 63, 64, 65}), 1));  // a snapshot at 12
  sim.drain(p, pages);
  sim.add(p, prompt_req(2, with_system({70, 71, 72, 73, 74}), 1));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 0);
  EXPECT_EQ(sim.first_item.at(2).state_save_pos, 8) << "where it leaves the first prompt's path";
  sim.add(p, prompt_req(3, with_system({80, 81, 82}), 1));
  sim.add(p, prompt_req(4, with_system({90, 91, 92, 93, 94, 95, 96}), 1));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(3).start_pos, 8);
  EXPECT_EQ(sim.first_item.at(4).start_pos, 8);
  EXPECT_EQ(sim.restores, 2);
}

// Cached pages without a snapshot at their end serve no recurrent model: a prompt that shares
// one page with another (whose snapshot is deeper) computes from 0.
TEST(SchedulerPolicyStates, PagesWithoutASnapshotAreNotAHit) {
  SchedulerPolicy p(state_limits(2), 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  sim.add(p, prompt_req(1, range(20, 10), 1));  // a snapshot at 8 only
  sim.drain(p, pages);
  std::vector<int32_t> other = range(20, 5);
  other.insert(other.end(), {90, 91, 92, 93});
  // What a cache-aware router is told: the tree holds a page of it, no snapshot ends there.
  EXPECT_EQ(p.cached_prefix(other), 0);
  EXPECT_EQ(p.cached_prefix(range(20, 10)), 8);
  sim.add(p, prompt_req(2, other, 1));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 0);
  EXPECT_EQ(sim.first_item.at(2).state_from, -1);
  EXPECT_EQ(p.cache_stats().hit_tokens, 0u);
}

// A cache reset (/reset_prefix_cache) takes the snapshots with the pages: the prompt again
// computes from 0, and every snapshot slot serves again.
TEST(SchedulerPolicyStates, AResetDropsTheSnapshotsWithTheirPages) {
  SchedulerPolicy p(state_limits(2), 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  sim.add(p, prompt_req(1, range(20, 10), 3));  // snapshots at 8 and 12
  sim.drain(p, pages);
  EXPECT_EQ(p.cache_stats().state_snapshots, 2);
  p.reset_cache(pages);
  EXPECT_EQ(p.cache_stats().state_snapshots, 0);
  EXPECT_EQ(p.cache_stats().cached_pages, 0);
  EXPECT_EQ(p.cached_prefix(range(20, 10)), 0);
  sim.add(p, prompt_req(2, range(20, 10), 3));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 0);
  EXPECT_EQ(p.cache_stats().state_snapshots, 2);
  EXPECT_EQ(pages.pool.n_used(), p.cache_stats().cached_pages);
}

// A step that fails drops the snapshot it was saving; the slot serves again.
TEST(SchedulerPolicyStates, AFailedStepDropsItsSave) {
  SchedulerPolicy p(state_limits(1), 64, root_key("m"));
  PoolSource pages(64);
  StateSim sim;
  sim.add(p, prompt_req(1, range(20, 10), 3));
  auto s = p.plan(pages);
  ASSERT_TRUE(s.has_value());
  ASSERT_GE(s->seqs[0].state_save, 0);
  p.fail(s->step_id, "the executor died", pages);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(p.cache_stats().state_snapshots, 0);
  sim.add(p, prompt_req(2, range(20, 10), 3));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(2).start_pos, 0);  // nothing was kept of the failed one
  // The one slot took the new prompt's snapshot (at 8), then its decode's (at 12) in its place.
  EXPECT_EQ(sim.saves, 2);
  EXPECT_EQ(p.cache_stats().state_snapshots, 1);
  sim.add(p, prompt_req(3, sim.truth.at(2), 1));
  sim.drain(p, pages);
  EXPECT_EQ(sim.first_item.at(3).start_pos, 12);
  // A restore counts when its step comes back, not when planned: a failed one does not.
  const uint64_t restored = p.cache_stats().state_restores;
  EXPECT_EQ(restored, 1u);
  sim.add(p, prompt_req(4, sim.truth.at(2), 1));
  auto r = p.plan(pages);
  ASSERT_TRUE(r.has_value());
  ASSERT_GE(r->seqs[0].state_from, 0);
  p.fail(r->step_id, "the executor died", pages);
  EXPECT_EQ(p.cache_stats().state_restores, restored);
}

// Many requests over a few shared prefixes and turns, two steps in flight, few snapshots and a
// pool small enough to preempt and evict: every restore is the state of the sequence's own
// prefix (StateSim), snapshots are reused, and nothing leaks.
TEST(SchedulerPolicyStates, ManyRequestsWithPreemptionAndEvictionRestoreOnlyTheirOwnPrefixes) {
  for (const int snapshots : {1, 3, 12}) {
    SchedulerPolicy p(state_limits(snapshots), 20, root_key("m"));
    PoolSource pages(20);
    StateSim sim;
    std::mt19937 rng(7 + static_cast<unsigned>(snapshots));
    std::vector<std::vector<int32_t>> prefixes = {range(20, 9), range(40, 14), range(60, 5), range(30, 22)};
    uint64_t id = 1;
    for (int round = 0; round < 12; ++round) {
      for (int k = 0; k < 6; ++k, ++id) {
        std::vector<int32_t> prompt = prefixes[rng() % prefixes.size()];
        const int extra = static_cast<int>(rng() % 7);
        for (int j = 0; j < extra; ++j) prompt.push_back(10 + static_cast<int32_t>(rng() % 80));
        if (rng() % 3 == 0 && id > 1) {  // a next turn of an earlier request
          const auto& earlier = sim.truth.at(1 + rng() % (id - 1));
          prompt = earlier;
          prompt.push_back(11);
        }
        if (prompt.size() > 40) prompt.resize(40);
        sim.add(p, prompt_req(id, prompt, 1 + static_cast<int>(rng() % 12)));
      }
      sim.drain(p, pages, 2);
    }
    EXPECT_GE(sim.restores, snapshots == 1 ? 1 : 6) << snapshots << " snapshots";
    EXPECT_GT(p.n_preemptions(), 0u) << snapshots << " snapshots";
    const PrefixCacheStats st = p.cache_stats();
    EXPECT_EQ(st.state_restores, static_cast<uint64_t>(sim.restores));
    EXPECT_LE(st.state_snapshots, snapshots);
    EXPECT_GT(st.evicted_pages, 0u);
    EXPECT_EQ(pages.pool.n_used(), st.cached_pages) << snapshots << " snapshots";
  }
}

}  // namespace
}  // namespace brigade
