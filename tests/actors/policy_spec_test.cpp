// SchedulerPolicy with speculative decoding: drafts in the plan, what the result does to the
// sequence (length, pages, stops, max_tokens), and the load rule.
#include <gtest/gtest.h>

#include "actors/drafter/mtp_drafter.h"
#include "actors/scheduler/policy.h"
#include "policy_test_util.h"

namespace brigade {
namespace {

using testing::PoolSource;

SchedulerLimits spec_limits(int k = 3) {
  SchedulerLimits l;
  l.max_running = 4;
  l.max_step_tokens = 16;
  l.max_context = 64;
  l.page_size = 4;
  l.vocab_size = 100;
  l.spec.num_tokens = k;
  l.spec.ngram_min = 1;
  l.spec.ngram_max = 2;
  return l;
}

// Prompt 5 6 7 8 5 6: after the first sampled token 7, the bigram [6, 7] proposes 8 5 6.
SeqRequest repeating(uint64_t id, int max_tokens) {
  SeqRequest r;
  r.id = id;
  r.prompt = {5, 6, 7, 8, 5, 6};
  r.max_tokens = max_tokens;
  r.eos_ids = {2};
  return r;
}

std::vector<SampledResult> tokens_for(uint64_t id, std::vector<int32_t> tokens) {
  std::vector<SampledResult> out;
  for (int32_t t : tokens) out.push_back({id, t, 0.0f, {}});
  return out;
}

// Runs the prefill and returns the plan of the first decode (which drafts).
PlannedStep prefill_then_plan(SchedulerPolicy& p, PoolSource& pages, uint64_t id) {
  auto s1 = p.plan(pages);
  EXPECT_TRUE(s1);
  p.complete(s1->step_id, tokens_for(id, {7}), pages);
  auto s2 = p.plan(pages);
  EXPECT_TRUE(s2);
  return s2 ? *s2 : PlannedStep{};
}

TEST(SchedulerSpec, AcceptedDraftsAdvanceTheSequence) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  const PlannedStep s2 = prefill_then_plan(p, pages, 1);
  ASSERT_EQ(s2.seqs.size(), 1u);
  const SeqWorkItem& w = s2.seqs[0];
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{7, 8, 5, 6})) << "the last token, then the drafts";
  EXPECT_EQ(w.n_draft, 3);
  EXPECT_EQ(w.start_pos, 6);
  EXPECT_TRUE(w.sample);
  EXPECT_FALSE(w.use_last_sampled);
  EXPECT_EQ(w.block_table.size(), 3u) << "pages for positions [0, 10)";
  EXPECT_EQ(s2.n_tokens, 4) << "the token budget counts k + 1";
  EXPECT_FALSE(p.plan(pages)) << "its length is unknown until the drafts come back";

  // Two drafts accepted, then the target's own token 9.
  auto ev = p.complete(s2.step_id, tokens_for(1, {8, 5, 9}), pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].new_tokens, (std::vector<int32_t>{8, 5, 9})) << "streamed together";
  EXPECT_EQ(ev[0].completion_tokens, 4);
  EXPECT_EQ(ev[0].finish, Finish::none);
  const SpecStats st = p.spec_stats();
  EXPECT_EQ(st.draft_tokens, 3u);
  EXPECT_EQ(st.accepted_tokens, 2u);
  EXPECT_EQ(st.verify_seqs, 1u);

  auto s3 = p.plan(pages);
  ASSERT_TRUE(s3);
  EXPECT_EQ(s3->seqs[0].start_pos, 9) << "KV holds the prompt, 7 and the two accepted drafts";
  EXPECT_EQ(s3->seqs[0].tokens[0], 9);
  EXPECT_EQ(s3->seqs[0].n_generated, 4u) << "the seeded stream continues after the accepted tokens";
}

TEST(SchedulerSpec, DecodesWaitForAVerificationInFlightButPromptsDoNot) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  SeqRequest other = repeating(2, 20);
  other.prompt = {40, 41, 42};  // no n-gram repeats: it decodes without drafts
  ASSERT_TRUE(p.add(other).is_ok());
  auto s1 = p.plan(pages);
  std::vector<SampledResult> firsts = tokens_for(1, {7});
  firsts.push_back({2, 43, 0.0f, {}});
  p.complete(s1->step_id, firsts, pages);
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2);
  ASSERT_EQ(s2->seqs.size(), 2u) << "one step holds the whole batch";
  EXPECT_EQ(s2->seqs[0].n_draft, 3);
  EXPECT_EQ(s2->seqs[1].n_draft, 0);
  EXPECT_FALSE(p.plan(pages)) << "sequence 2 could decode on its token in flight, but that would split the batch";
  ASSERT_TRUE(p.add(repeating(3, 20)).is_ok());
  auto s3 = p.plan(pages);
  ASSERT_TRUE(s3) << "a prompt runs beside the verification";
  ASSERT_EQ(s3->seqs.size(), 1u);
  EXPECT_EQ(s3->seqs[0].seq_id, 3u);
}

TEST(SchedulerSpec, RejectedDraftsGiveTheirPagesBack) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  const PlannedStep s2 = prefill_then_plan(p, pages, 1);
  ASSERT_EQ(s2.seqs[0].block_table.size(), 3u);
  EXPECT_EQ(p.n_pages_held(), 3);
  p.complete(s2.step_id, tokens_for(1, {4}), pages);  // every draft rejected
  EXPECT_EQ(p.n_pages_held(), 2) << "8 tokens fit 2 pages; the drafts' third page went back";
  EXPECT_EQ(pages.n_available(), 98);
  auto s3 = p.plan(pages);
  ASSERT_TRUE(s3);
  EXPECT_EQ(s3->seqs[0].start_pos, 7) << "the rejected positions are computed again";
  EXPECT_EQ(s3->seqs[0].tokens[0], 4);
}

TEST(SchedulerSpec, DraftsNeverPreemptForTheirPages) {
  SchedulerPolicy p(spec_limits(), 4);
  PoolSource pages(4);  // 16 slots
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  SeqRequest other = repeating(2, 20);
  other.prompt = {40, 41, 42, 43, 44};
  ASSERT_TRUE(p.add(other).is_ok());
  auto s1 = p.plan(pages);  // both prompts: 2 pages each
  ASSERT_TRUE(s1);
  ASSERT_EQ(s1->seqs.size(), 2u);
  EXPECT_EQ(pages.n_available(), 0);
  std::vector<SampledResult> firsts = tokens_for(1, {7});
  firsts.push_back({2, 45, 0.0f, {}});
  p.complete(s1->step_id, firsts, pages);
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2);
  ASSERT_EQ(s2->seqs.size(), 2u) << "nobody was preempted";
  EXPECT_EQ(s2->seqs[0].n_draft, 0) << "the drafts' page would have cost sequence 2 its place";
  EXPECT_EQ(p.n_preemptions(), 0u);
}

TEST(SchedulerSpec, AStopInsideTheAcceptedTokensEndsThere) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  const PlannedStep s2 = prefill_then_plan(p, pages, 1);
  auto ev = p.complete(s2.step_id, tokens_for(1, {8, 2, 9}), pages);  // 2 is EOS
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].new_tokens, (std::vector<int32_t>{8, 2}));
  EXPECT_EQ(ev[0].finish, Finish::stop);
  EXPECT_EQ(ev[0].completion_tokens, 3);
  EXPECT_FALSE(p.has_work());
  EXPECT_EQ(pages.n_available(), 100) << "every page went back";
}

TEST(SchedulerSpec, DraftsStayWithinMaxTokensAndTheBudget) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 3)).is_ok());
  const PlannedStep s2 = prefill_then_plan(p, pages, 1);
  EXPECT_EQ(s2.seqs[0].n_draft, 1) << "two tokens left: one draft and the target's token";
  auto ev = p.complete(s2.step_id, tokens_for(1, {8, 5}), pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::length);
  EXPECT_EQ(ev[0].completion_tokens, 3);

  SchedulerLimits tight = spec_limits();
  tight.max_step_tokens = 3;
  SchedulerPolicy q(tight, 100);
  ASSERT_TRUE(q.add(repeating(2, 20)).is_ok());
  auto t1 = q.plan(pages);
  ASSERT_TRUE(t1);
  q.complete(t1->step_id, tokens_for(2, {7}), pages);  // the 6-token prompt took 2 steps
  auto t2 = q.plan(pages);
  ASSERT_TRUE(t2);
  if (t2->seqs[0].n_draft == 0) {  // the prompt's second chunk
    q.complete(t2->step_id, tokens_for(2, {7}), pages);
    t2 = q.plan(pages);
    ASSERT_TRUE(t2);
  }
  EXPECT_EQ(t2->seqs[0].n_draft, 2) << "a budget of 3 tokens holds the last token and two drafts";
}

TEST(SchedulerSpec, MalformedResultsEndTheSequenceWithAnError) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  const PlannedStep s2 = prefill_then_plan(p, pages, 1);
  auto ev = p.complete(s2.step_id, tokens_for(1, {8, 5, 6, 1, 1}), pages);  // k + 2 tokens
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::error);
  EXPECT_NE(ev[0].error.find("expected 1 to 4"), std::string::npos) << ev[0].error;
  EXPECT_EQ(pages.n_available(), 100);
}

TEST(SchedulerSpec, AbortWhileDraftingEndsWhenTheStepReturns) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  const PlannedStep s2 = prefill_then_plan(p, pages, 1);
  EXPECT_TRUE(p.abort(1, pages).empty()) << "a step is in flight";
  auto ev = p.complete(s2.step_id, tokens_for(1, {8, 5, 6, 1}), pages);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].finish, Finish::abort);
  EXPECT_TRUE(ev[0].new_tokens.empty());
  EXPECT_EQ(pages.n_available(), 100);
}

TEST(SchedulerSpec, NoDraftsWhileComputeBoundOrTheBatchIsLarge) {
  SchedulerPolicy p(spec_limits(), 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  auto s1 = p.plan(pages);
  p.complete(s1->step_id, tokens_for(1, {7}), pages);
  p.note_step_bound(true);
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2);
  EXPECT_EQ(s2->seqs[0].n_draft, 0);
  EXPECT_EQ(s2->seqs[0].tokens.size(), 1u);
  EXPECT_EQ(p.spec_stats().off_compute_bound_steps, 1u);
  p.complete(s2->step_id, tokens_for(1, {8}), pages);
  p.note_step_bound(false);
  auto s3 = p.plan(pages);
  ASSERT_TRUE(s3);
  EXPECT_GT(s3->seqs[0].n_draft, 0) << "memory-bound again: drafts are back";

  SchedulerLimits l = spec_limits();
  l.spec.disable_batch_size = 1;
  SchedulerPolicy q(l, 100);
  ASSERT_TRUE(q.add(repeating(1, 20)).is_ok());
  ASSERT_TRUE(q.add(repeating(2, 20)).is_ok());
  auto t1 = q.plan(pages);
  std::vector<SampledResult> both = tokens_for(1, {7});
  both.push_back({2, 7, 0.0f, {}});
  q.complete(t1->step_id, both, pages);
  auto t2 = q.plan(pages);
  ASSERT_TRUE(t2);
  ASSERT_EQ(t2->seqs.size(), 2u);
  EXPECT_EQ(t2->seqs[0].n_draft + t2->seqs[1].n_draft, 0) << "two decoding sequences > disable_batch_size 1";
  EXPECT_EQ(q.spec_stats().off_batch_steps, 1u);
}

TEST(SchedulerSpec, LowAcceptanceTurnsASequencesDraftsOff) {
  SchedulerLimits l = spec_limits();
  l.spec.min_acceptance = 0.5;
  l.max_context = 256;
  SchedulerPolicy p(l, 100);
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 100)).is_ok());
  auto s = p.plan(pages);
  p.complete(s->step_id, tokens_for(1, {7}), pages);
  int n_drafting = 0;
  for (int i = 0; i < 10; ++i) {  // the target answers 5 and rejects every draft; 5s keep matching
    s = p.plan(pages);
    ASSERT_TRUE(s);
    if (s->seqs[0].n_draft == 0) break;
    ++n_drafting;
    p.complete(s->step_id, tokens_for(1, {5}), pages);
  }
  EXPECT_EQ(p.spec_stats().seqs_turned_off, 1u);
  EXPECT_EQ(n_drafting, 4) << "the EWMA from 1.0 falls below 0.5 after four rejections";
}

// A drafter that proposes as many 9s as it may and records what it is asked.
class RecordingDrafter final : public Drafter {
 public:
  DraftProposal propose(const DraftQuery& q) override {
    return {std::vector<int32_t>(static_cast<size_t>(q.max_tokens), 9)};
  }
  std::vector<DraftProposal> propose_batch(std::span<const DraftQuery> queries) override {
    std::vector<std::pair<uint64_t, int>> asked;
    for (const DraftQuery& q : queries) asked.emplace_back(q.seq_id, q.max_tokens);
    batches.push_back(asked);
    return Drafter::propose_batch(queries);
  }
  void forget(uint64_t seq_id) override { forgotten.push_back(seq_id); }
  std::vector<std::vector<std::pair<uint64_t, int>>> batches;
  std::vector<uint64_t> forgotten;
};

TEST(SchedulerSpec, AGivenDrafterIsAskedOnceAStepForEveryDecodeWithinTheBudget) {
  SchedulerLimits l = spec_limits(3);
  l.max_step_tokens = 10;
  auto drafter = std::make_shared<RecordingDrafter>();
  SchedulerPolicy p(l, 100, {}, drafter);
  PoolSource pages(100);
  for (uint64_t id : {1, 2, 3}) {
    SeqRequest r = repeating(id, 20);
    r.prompt = {5, 6};
    ASSERT_TRUE(p.add(r).is_ok());
  }
  auto s1 = p.plan(pages);
  ASSERT_TRUE(s1);
  ASSERT_EQ(s1->seqs.size(), 3u) << "the three prompts in one step";
  std::vector<SampledResult> first;
  for (uint64_t id : {1, 2, 3}) first.push_back({id, 7, 0.0f, {}});
  p.complete(s1->step_id, first, pages);
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2);
  ASSERT_EQ(drafter->batches.size(), 1u) << "one call for the step's decodes";
  // Budget 10: 1 + 3 for the first, 1 + 3 for the second, 1 + 1 for the third.
  const std::vector<std::pair<uint64_t, int>> want = {{1, 3}, {2, 3}, {3, 1}};
  EXPECT_EQ(drafter->batches[0], want);
  ASSERT_EQ(s2->seqs.size(), 3u);
  EXPECT_EQ(s2->seqs[0].n_draft, 3);
  EXPECT_EQ(s2->seqs[1].n_draft, 3);
  EXPECT_EQ(s2->seqs[2].n_draft, 1);
  EXPECT_EQ(s2->n_tokens, 10);
  EXPECT_TRUE(p.abort(2, pages).empty());
  std::vector<SampledResult> second = tokens_for(1, {9, 4});
  for (const auto& r : tokens_for(2, {9, 9, 9, 9})) second.push_back(r);
  for (const auto& r : tokens_for(3, {4})) second.push_back(r);
  p.complete(s2->step_id, second, pages);
  EXPECT_EQ(drafter->forgotten, std::vector<uint64_t>{2}) << "the aborted sequence's draft state goes";
  EXPECT_EQ(p.spec_stats().accepted_tokens, 1u + 0u) << "the aborted sequence's tokens are dropped";
}

// MTP (SpeculativeLimits::mtp): every chunk that stops inside the known tokens sends the token
// after it, every sampling item asks for k drafts and gets pages for them when the lease has
// room; the drafts a result brings are the next decode's, and only for the length they follow.
TEST(SchedulerSpec, MtpDraftsComeWithTheResultAndFeedTheNextDecode) {
  SchedulerLimits l = spec_limits(3);
  l.max_step_tokens = 4;  // the 6-token prompt takes two chunks
  l.spec.mtp = true;
  SchedulerPolicy p(l, 100, {}, std::make_shared<MtpDrafter>());
  PoolSource pages(100);
  ASSERT_TRUE(p.add(repeating(1, 20)).is_ok());
  auto s1 = p.plan(pages);
  ASSERT_TRUE(s1 && s1->seqs.size() == 1);
  EXPECT_FALSE(s1->seqs[0].sample);
  EXPECT_EQ(s1->seqs[0].next_token, 5) << "the token after the chunk, for the module's last entry";
  EXPECT_EQ(s1->seqs[0].mtp_drafts, 0);
  p.complete(s1->step_id, {}, pages);
  auto s2 = p.plan(pages);
  ASSERT_TRUE(s2 && s2->seqs.size() == 1);
  const SeqWorkItem& w2 = s2->seqs[0];
  EXPECT_TRUE(w2.sample);
  EXPECT_EQ(w2.mtp_drafts, 3);
  EXPECT_GE(static_cast<int>(w2.block_table.size()) * 4, 6 + 3 - 1) << "pages for the positions it drafts at";
  // The prompt's last token samples 40; the module proposes 41 42 43 after it.
  p.complete(s2->step_id, tokens_for(1, {40}), pages, {}, {}, std::vector<SeqDrafts>{{1, {41, 42, 43}}});
  auto s3 = p.plan(pages);
  ASSERT_TRUE(s3 && s3->seqs.size() == 1);
  EXPECT_EQ(s3->seqs[0].tokens, (std::vector<int32_t>{40, 41, 42, 43}));
  EXPECT_EQ(s3->seqs[0].n_draft, 3);
  EXPECT_EQ(s3->seqs[0].mtp_drafts, 3);
  // 41 accepted, then 50: the result's proposal follows 40 41 50.
  p.complete(s3->step_id, tokens_for(1, {41, 50}), pages, {}, {}, std::vector<SeqDrafts>{{1, {51}}});
  auto s4 = p.plan(pages);
  ASSERT_TRUE(s4 && s4->seqs.size() == 1);
  EXPECT_EQ(s4->seqs[0].tokens, (std::vector<int32_t>{50, 51}));
  // A result without a proposal leaves the next decode without drafts (a miss), not stale ones.
  p.complete(s4->step_id, tokens_for(1, {60}), pages);
  auto s5 = p.plan(pages);
  ASSERT_TRUE(s5 && s5->seqs.size() == 1);
  EXPECT_EQ(s5->seqs[0].tokens, (std::vector<int32_t>{60}));
  EXPECT_EQ(s5->seqs[0].n_draft, 0);
  // Misses the module did not try for (results without proposals, as after a step planned
  // without drafts) do not count as rejections: drafting stays on (10 zeros would turn it off).
  const uint64_t misses = p.spec_stats().misses;
  auto step = s5;
  for (int i = 0; i < 10; ++i) {
    p.complete(step->step_id, tokens_for(1, {61 + i}), pages);
    step = p.plan(pages);
    ASSERT_TRUE(step && step->seqs.size() == 1);
    EXPECT_EQ(step->seqs[0].mtp_drafts, 3) << "miss " << i;
  }
  EXPECT_EQ(p.spec_stats().misses, misses + 10);
  EXPECT_EQ(p.spec_stats().seqs_turned_off, 0u);
}

}  // namespace
}  // namespace brigade
