// TokenTrie::allowed against feeding each token's bytes to a copy of the matcher, over random
// vocabularies (shared prefixes, duplicates, empty pieces) and matcher states along documents.
#include "core/token_trie.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/json_matcher.h"

namespace brigade {
namespace {

std::vector<uint8_t> brute_force(const std::vector<std::string>& pieces, const JsonMatcher& m) {
  std::vector<uint8_t> out(pieces.size(), 0);
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) continue;
    JsonMatcher c = m;
    out[id] = c.feed(pieces[id]) ? 1 : 0;
  }
  return out;
}

TEST(TokenTrie, AllowsExactlyTheTokensTheMatcherAccepts) {
  std::mt19937_64 rng(3);
  const std::string alphabet = "{}[]:,\" \n\\-.e0123456789tfalsenurxyz\xc3\xa9";
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> pieces(300 + rng() % 300);
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (rng() % 10 == 0) continue;  // a special token: empty
      if (i > 0 && rng() % 4 == 0) {  // extends an earlier piece: shared prefixes
        pieces[i] = pieces[rng() % i];
      }
      for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n) pieces[i] += alphabet[rng() % alphabet.size()];
    }
    const TokenTrie trie(pieces);
    EXPECT_EQ(trie.vocab_size(), static_cast<int>(pieces.size()));
    EXPECT_EQ(trie.piece(5), pieces[5]);
    EXPECT_EQ(trie.piece(-1), "");
    const std::string doc = R"({"key": [1, -2.5e3, "va\"l", {"x": null}, true], "k2": "\u00e9"})";
    JsonMatcher m;
    std::vector<uint8_t> got;
    for (size_t p = 0; p <= doc.size(); ++p) {
      trie.allowed(m, got);
      ASSERT_EQ(got, brute_force(pieces, m)) << "round " << round << ", after " << doc.substr(0, p);
      if (p < doc.size()) {
        ASSERT_TRUE(m.feed(static_cast<uint8_t>(doc[p])));
      }
    }
  }
}

// The cache answers what the trie answers, and a string's content repeats its state.
TEST(JsonMaskCache, GivesTheTriesMasksAndHitsInsideStrings) {
  std::vector<std::string> pieces = {"", "{", "}", "\"", "a", "ab", "\"a", "1", ":", " ", "\"}"};
  auto trie = std::make_shared<const TokenTrie>(pieces);
  JsonMaskCache cache(trie);
  JsonMatcher m;
  std::vector<uint8_t> want;
  for (char c : std::string(R"({"abababab": 1})")) {
    trie->allowed(m, want);
    ASSERT_EQ(cache.allowed(m), want);
    ASSERT_TRUE(m.feed(static_cast<uint8_t>(c)));
  }
  EXPECT_GE(cache.hits(), 7u) << "the key's letters share one state";
  const size_t misses = cache.misses();
  JsonMatcher other;
  for (int i = 1; i <= 40; ++i) {  // more states than it keeps: it starts over, answers stay right
    JsonMatcher s = other;
    std::string nested = "{\"a\":";
    nested.append(static_cast<size_t>(i), '[');  // a state per depth
    ASSERT_TRUE(s.feed(nested));
    trie->allowed(s, want);
    ASSERT_EQ(cache.allowed(s), want);
  }
  EXPECT_EQ(cache.misses() - misses, 40u);
}

// spells() against trying every piece at every position (recursion over the text).
bool spelled_by(const std::vector<std::string>& pieces, std::string_view text) {
  if (text.empty()) return true;
  for (const std::string& p : pieces)
    if (!p.empty() && text.starts_with(p) && spelled_by(pieces, text.substr(p.size()))) return true;
  return false;
}

TEST(TokenTrie, SpellsExactlyTheTextsPiecesJoinInto) {
  std::mt19937_64 rng(5);
  const std::string alphabet = "ab \n\xc3\xbc";
  int n_spelled = 0, n_not = 0;
  for (int round = 0; round < 30; ++round) {
    std::vector<std::string> pieces(4 + rng() % 8);
    for (std::string& p : pieces)
      for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) p += alphabet[rng() % alphabet.size()];
    pieces.push_back("");  // a special token spells nothing
    const TokenTrie trie(pieces);
    for (int t = 0; t < 40; ++t) {
      std::string text;
      for (int n = static_cast<int>(rng() % 9); n > 0; --n) text += alphabet[rng() % alphabet.size()];
      const bool want = spelled_by(pieces, text);
      EXPECT_EQ(trie.spells(text), want) << "'" << text << "'";
      (want ? n_spelled : n_not)++;
    }
  }
  EXPECT_GT(n_spelled, 100);
  EXPECT_GT(n_not, 100);
}

}  // namespace
}  // namespace brigade
