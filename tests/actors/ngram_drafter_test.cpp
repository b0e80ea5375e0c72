#include "actors/drafter/ngram_drafter.h"
#include "actors/drafter/mtp_drafter.h"

#include <gtest/gtest.h>

#include <vector>

namespace brigade {
namespace {

std::vector<int32_t> propose(NgramDrafter& d, const std::vector<int32_t>& tokens, int k) {
  return d.propose({1, tokens, k}).tokens;
}

TEST(NgramDrafter, ProposesWhatFollowedTheMostRecentEarlierOccurrence) {
  NgramDrafter d({1, 3});
  // Suffix [2, 3] (and [1, 2, 3]) occurred at 0 and at 5; the later one is followed by 9, 8.
  const std::vector<int32_t> t = {1, 2, 3, 4, 1, 2, 3, 9, 8, 1, 2, 3};
  EXPECT_EQ(propose(d, t, 2), (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(propose(d, t, 4), (std::vector<int32_t>{9, 8, 1, 2})) << "the continuation may run into the suffix";
  EXPECT_EQ(propose(d, t, 0), std::vector<int32_t>{}) << "nothing asked, nothing proposed";
}

TEST(NgramDrafter, TriesTheLongestSuffixFirst) {
  NgramDrafter d({1, 3});
  // The last token 5 alone occurred last at 6 (followed by 7); the 3-gram [3, 4, 5] only at 2.
  const std::vector<int32_t> t = {0, 3, 4, 5, 6, 0, 5, 7, 3, 4, 5};
  EXPECT_EQ(propose(d, t, 2), (std::vector<int32_t>{6, 0}));
  NgramDrafter unigram({1, 1});
  EXPECT_EQ(propose(unigram, t, 2), (std::vector<int32_t>{7, 3}));
}

TEST(NgramDrafter, ShortContinuationsAndMisses) {
  NgramDrafter d({2, 3});
  EXPECT_EQ(propose(d, {1, 2, 3, 4}, 3), std::vector<int32_t>{}) << "no repeated bigram";
  EXPECT_EQ(propose(d, {7}, 3), std::vector<int32_t>{}) << "too short to match";
  EXPECT_EQ(propose(d, {4, 4, 4}, 3), (std::vector<int32_t>{4})) << "only what lies before the suffix";
  NgramDrafter unigram({1, 1});
  EXPECT_EQ(propose(unigram, {5, 6, 5}, 3), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(propose(d, {5, 6, 5}, 3), std::vector<int32_t>{}) << "ngram_min 2: a single token does not match";
}

TEST(NgramDrafter, OptionsAreValidated) {
  EXPECT_FALSE((NgramDrafterOptions{0, 3}.validate().is_ok()));
  EXPECT_FALSE((NgramDrafterOptions{3, 2}.validate().is_ok()));
  EXPECT_TRUE((NgramDrafterOptions{2, 2}.validate().is_ok()));
}

// The MTP board: a proposal follows the sequence at the length it was made for, is cut to the
// query's k, is used once, and is dropped when the sequence ends.
TEST(MtpDrafter, AnswersOnlyForTheLengthItsProposalFollows) {
  MtpDrafter d;
  const std::vector<int32_t> t = {5, 6, 7};
  EXPECT_TRUE(d.propose({1, t, 3}).tokens.empty()) << "nothing received yet";
  EXPECT_FALSE(d.propose({1, t, 3}).attempted) << "no proposal to judge the module by";
  d.take_proposal(1, 3, {8, 9, 10});
  d.take_proposal(2, 4, {11});
  EXPECT_TRUE(d.propose({2, t, 3}).tokens.empty()) << "made for 4 tokens, asked at 3: stale";
  EXPECT_EQ(d.propose({1, t, 2}).tokens, (std::vector<int32_t>{8, 9})) << "cut to k";
  EXPECT_TRUE(d.propose({1, t, 2}).tokens.empty()) << "verified once";
  d.take_proposal(1, 3, {8});
  d.take_proposal(1, 3, {12, 13});
  EXPECT_EQ(d.propose({1, t, 4}).tokens, (std::vector<int32_t>{12, 13})) << "the latest proposal counts";
  d.take_proposal(3, 3, {1});
  EXPECT_EQ(d.n_tracked(), 2u);
  d.forget(3);
  d.forget(2);
  EXPECT_EQ(d.n_tracked(), 0u);
}

}  // namespace
}  // namespace brigade
