// DraftModelDrafter and load_draft_model without actors: greedy proposals, the draft's KV
// following the sequence (rollback to the common prefix, prefill of what it has not seen), the
// bounded pool (least recently used sequences give up their pages, forget frees them), the
// context and pool limits, and the load-time checks (a missing checkpoint, another vocabulary).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "actors/drafter/draft_model_drafter.h"
#include "actors/drafter/draft_model_load.h"
#include "brigade/engine.h"
#include "cpu/cpu_backend.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

class DraftModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("brigade_draft_model_test_" + std::to_string(::getpid()));
    ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(512, 64, 11), (dir_ / "target").string()).is_ok());
    ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(300, 64, 11), (dir_ / "other_vocab").string()).is_ok());
    // The target with two tokens' ids swapped in its tokenizer: same size, other pieces.
    const fs::path other = dir_ / "other_pieces";
    fs::copy(dir_ / "target", other);
    std::ifstream in(other / "tokenizer.json");
    std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t a = json.find("\"\xC4\xA0on\": "), b = json.find("  \"on\": ");  // "Ġon" and "on"
    ASSERT_TRUE(a != std::string::npos && b != std::string::npos);
    const size_t na = a + 8, nb = b + 8;  // their ids
    const std::string ida = json.substr(na, json.find_first_not_of("0123456789", na) - na);
    const std::string idb = json.substr(nb, json.find_first_not_of("0123456789", nb) - nb);
    ASSERT_EQ(ida.size(), idb.size()) << "ids of one length: swapping them moves no offset";
    json.replace(nb, idb.size(), ida);
    json.replace(na, ida.size(), idb);
    std::ofstream(other / "tokenizer.json", std::ios::trunc) << json;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string target() { return (dir_ / "target").string(); }

  // The target itself as the draft, with a pool of n_pages pages of 4 tokens.
  static std::unique_ptr<DraftModelDrafter> drafter(int n_pages, int max_step_tokens = 64) {
    DraftModelSpec spec{target(), target(), 512, n_pages * 4, 4, max_step_tokens};
    auto d = load_draft_model(spec, make_cpu_backend(CpuBackendOptions{1}));
    EXPECT_TRUE(d.has_value()) << d.status().to_string();
    return d ? std::move(*d) : nullptr;
  }

  // The target's greedy continuation of `prompt` through the engine (the reference proposals).
  static std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n) {
    auto engine = Engine::create(testing::test_engine_options(target(), 1));
    EXPECT_TRUE(engine.has_value());
    auto c = (*engine)->generate(testing::greedy_ids(prompt, n));
    EXPECT_TRUE(c.has_value());
    return c->token_ids;
  }

  static fs::path dir_;
};
fs::path DraftModel::dir_;

std::vector<int32_t> cat(std::vector<int32_t> a, std::initializer_list<int32_t> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(DraftModel, ProposesTheModelsGreedyContinuation) {
  const std::vector<int32_t> prompt = {5, 77, 301, 12, 9, 250, 31};
  const std::vector<int32_t> want = greedy(prompt, 6);
  auto d = drafter(64);
  ASSERT_TRUE(d);
  const DraftProposal p = d->propose({1, prompt, 6});
  EXPECT_EQ(p.tokens, want);
  EXPECT_EQ(d->n_cached(1), 7 + 5) << "the prompt and the drafts that were fed";
  const DrafterStats st = d->stats();
  EXPECT_EQ(st.forwards, 6u) << "one prefill, then one forward per further draft";
  EXPECT_EQ(st.fed_tokens, 12u);
  EXPECT_GT(st.forward_us, 0u);
}

TEST_F(DraftModel, KeepsTheCommonPrefixAndRollsBackTheRest) {
  const std::vector<int32_t> prompt = {5, 77, 301, 12, 9, 250, 31};
  auto d = drafter(64);
  ASSERT_TRUE(d);
  const DraftProposal p = d->propose({1, prompt, 4});
  ASSERT_EQ(p.tokens.size(), 4u);
  // The target accepted the first draft and then sampled another token than the second.
  const int32_t other = (p.tokens[1] + 1) % 512;
  const std::vector<int32_t> next = cat(prompt, {p.tokens[0], other});
  const uint64_t fed_before = d->stats().fed_tokens;
  const DraftProposal q = d->propose({1, next, 4});
  EXPECT_EQ(d->stats().fed_tokens - fed_before, 1u + 3u)
      << "the K/V of the prompt and the accepted draft stay: only the new token and 3 drafts are fed";
  auto fresh = drafter(64);
  EXPECT_EQ(q.tokens, fresh->propose({2, next, 4}).tokens) << "a rollback proposes what a fresh draft would";

  // A shorter sequence (a recompute would keep its tokens; anything shorter rolls back).
  const DraftProposal r = d->propose({1, prompt, 2});
  EXPECT_EQ(r.tokens, std::vector<int32_t>(p.tokens.begin(), p.tokens.begin() + 2));
  EXPECT_EQ(d->n_cached(1), 7 + 1);

  // Other tokens under the same id from the second one on: only the first position's K/V stays.
  const std::vector<int32_t> changed = {5, 78, 302, 13, 10, 251, 32, 40};
  const uint64_t fed = d->stats().fed_tokens;
  EXPECT_EQ(d->propose({1, changed, 3}).tokens, fresh->propose({3, changed, 3}).tokens);
  EXPECT_EQ(d->stats().fed_tokens - fed, 7u + 2u);
}

TEST_F(DraftModel, PrefillsInChunksOfTheStepLimit) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i) prompt.push_back((i * 37 + 3) % 500 + 3);
  auto whole = drafter(64);
  auto chunked = drafter(64, 8);
  ASSERT_TRUE(whole && chunked);
  const DraftProposal a = whole->propose({1, prompt, 3});
  const DraftProposal b = chunked->propose({1, prompt, 3});
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(chunked->stats().forwards, 4u + 2u) << "30 tokens in chunks of 8, then 2 drafts";
}

TEST_F(DraftModel, ABatchDraftsEverySequenceTogether) {
  const std::vector<int32_t> a = {5, 77, 301, 12, 9, 250, 31};
  const std::vector<int32_t> b = {40, 41, 42};
  std::vector<int32_t> c;
  for (int i = 0; i < 20; ++i) c.push_back((i * 37 + 3) % 500 + 3);
  auto one = drafter(64);
  auto batched = drafter(64, 16);
  ASSERT_TRUE(one && batched);
  const std::vector<DraftQuery> queries = {{1, a, 4}, {2, b, 2}, {3, c, 3}};
  const std::vector<DraftProposal> got = batched->propose_batch(queries);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < queries.size(); ++i) EXPECT_EQ(got[i].tokens, one->propose(queries[i]).tokens) << i;
  // Forward 1: a (7) and b (3) whole, 6 tokens of c; 2: the rest of c (14) and a and b's drafts;
  // then one draft step each until a has 4: 4 forwards.
  EXPECT_EQ(batched->stats().forwards, 4u);
  EXPECT_EQ(batched->stats().fed_tokens, (7u + 3 + 20) + (3 + 1 + 2));
}

TEST_F(DraftModel, ThePoolIsBoundedAndForgetFreesIt) {
  auto d = drafter(6);  // 24 tokens
  ASSERT_TRUE(d);
  const std::vector<int32_t> a = {5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::vector<int32_t> b = {40, 41, 42, 43, 44, 45, 46, 47, 48};
  EXPECT_EQ(d->propose({1, a, 4}).tokens.size(), 4u);  // 12 positions: 3 pages
  EXPECT_EQ(d->propose({2, b, 4}).tokens.size(), 4u);  // 3 more
  EXPECT_EQ(d->n_free_pages(), 0);
  const std::vector<int32_t> c = {90, 91, 92, 93, 94, 95, 96, 97, 98};
  EXPECT_EQ(d->propose({3, c, 4}).tokens.size(), 4u) << "the least recently used sequence gave up its pages";
  EXPECT_EQ(d->n_cached(1), 0);
  EXPECT_EQ(d->n_cached(2), 12);
  EXPECT_EQ(d->stats().evicted_seqs, 1u);
  // A batch never evicts its own sequences: the second of two that do not fit together goes
  // without drafts.
  const std::vector<DraftQuery> both = {{4, a, 4}, {5, b, 4}};
  const auto got = d->propose_batch(both);
  EXPECT_EQ(got[0].tokens.size(), 4u) << "sequences 2 and 3 made room";
  EXPECT_EQ(got[1].tokens.size(), 4u);
  EXPECT_EQ(d->n_cached(2) + d->n_cached(3), 0);
  d->forget(4);
  d->forget(5);
  d->forget(99);  // unknown: nothing
  EXPECT_EQ(d->n_tracked(), 0u);
  EXPECT_EQ(d->n_free_pages(), 6);
  const std::vector<int32_t> long_one(17, 7);  // 5 pages of 6 with its drafts
  const std::vector<DraftQuery> too_many = {{6, long_one, 4}, {7, a, 4}};
  const auto partial = d->propose_batch(too_many);
  EXPECT_EQ(partial[0].tokens.size(), 4u);
  EXPECT_TRUE(partial[1].tokens.empty()) << "no room beside a sequence of the same batch";
  EXPECT_EQ(d->n_cached(6), 20);
}

TEST_F(DraftModel, ProposalsStopAtThePoolAndTheContext) {
  auto d = drafter(4);  // 16 tokens
  ASSERT_TRUE(d);
  std::vector<int32_t> prompt(14, 7);
  EXPECT_EQ(d->propose({1, prompt, 8}).tokens.size(), 3u) << "14 tokens + 2 fed drafts fill the pool";
  prompt.assign(17, 7);
  EXPECT_TRUE(d->propose({2, prompt, 8}).tokens.empty()) << "longer than the whole pool";
  EXPECT_EQ(d->n_tracked(), 1u);

  auto big = drafter(64);  // context 64
  prompt.assign(62, 7);
  EXPECT_EQ(big->propose({1, prompt, 8}).tokens.size(), 3u) << "positions up to 63 only";
  prompt.assign(64, 7);
  EXPECT_EQ(big->propose({2, prompt, 8}).tokens.size(), 1u) << "the last position's logits, nothing fed after";
  prompt.assign(65, 7);
  EXPECT_TRUE(big->propose({3, prompt, 8}).tokens.empty()) << "past the draft's context";
}

TEST_F(DraftModel, LoadErrorsNameTheDraft) {
  DraftModelSpec spec{(dir_ / "missing").string(), target(), 512, 64, 4, 64};
  auto missing = load_draft_model(spec, make_cpu_backend(CpuBackendOptions{1}));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("the draft model '" + spec.path + "'"), std::string::npos)
      << missing.status().to_string();

  spec.path = (dir_ / "other_vocab").string();
  auto other = load_draft_model(spec, make_cpu_backend(CpuBackendOptions{1}));
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.status().message().find("vocabulary of 300 tokens and the target 512"), std::string::npos)
      << other.status().to_string();

  spec.path = (dir_ / "other_pieces").string();
  auto pieces = load_draft_model(spec, make_cpu_backend(CpuBackendOptions{1}));
  ASSERT_FALSE(pieces.has_value());
  EXPECT_NE(pieces.status().message().find("must share the target's tokenizer"), std::string::npos)
      << pieces.status().to_string();
  EXPECT_NE(pieces.status().message().find(": token "), std::string::npos) << pieces.status().to_string();
}

}  // namespace
}  // namespace brigade
