// Added tokens that overlap (one a prefix of another, one inside another, straddling ones, one that
// fails late), special and not, lstrip/rstrip, normalized true beside normalized false, against
// Hugging Face `tokenizers`' AddedVocabulary (Aho-Corasick, leftmost-longest):
// tests/fixtures/tokenizers/added_tokens/ holds a byte-level BPE with them (plain.json), the same
// with a Lowercase normalizer and normalized tokens (lowercase.json), a BERT WordPiece with them
// (wordpiece.json), and each text's ids and decode (scripts/make_added_token_fixtures.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/added_tokens/";

class TokenizerAddedTokens : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerAddedTokens, MatchesHuggingFace) {
  const std::string name = GetParam();
  auto tok = Tokenizer::load(kDir + name + ".json");
  ASSERT_TRUE(tok.has_value()) << tok.status().message();
  const json cases = read_json(kDir + "vectors.json")[name];
  ASSERT_GT(cases.size(), 50u);
  for (const auto& c : cases) {
    const std::string text = c["text"].get<std::string>();
    auto ids = (*tok)->encode(text, false);
    ASSERT_TRUE(ids.has_value()) << escaped(text) << ": " << ids.status().message();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << escaped(text);
    if (name == "wordpiece") continue;  // WordPiece's decoder joins pieces with spaces; the ids are the point
    auto decoded = (*tok)->decode(*ids);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << escaped(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerAddedTokens, ::testing::Values("plain", "lowercase", "wordpiece"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace brigade
