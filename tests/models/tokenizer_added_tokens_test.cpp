// Added tokens that overlap (one a prefix of another, one inside another, straddling ones, one that
// fails late), special and not, lstrip/rstrip, normalized true beside normalized false, against
// Hugging Face `tokenizers`' AddedVocabulary (Aho-Corasick, leftmost-longest):
// tests/fixtures/tokenizers/added_tokens/ holds a byte-level BPE with them (plain.json), the same
// with a Lowercase normalizer and normalized tokens (lowercase.json), a BERT WordPiece with them
// (wordpiece.json), and each text's ids and decode (scripts/make_added_token_fixtures.py). Also
// single_word tokens (single_word.json: no Rust regex \w character beside a match, lstrip/rstrip
// over every Unicode White_Space), and normalized tokens in WordPiece (wordpiece_normalized.json)
// and XLM-R's Unigram (its tokenizer.json with unigram_normalized.added_tokens.json's tokens).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "model_test_util.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/added_tokens/";

class TokenizerAddedTokens : public ::testing::TestWithParam<const char*> {};

// The tokenizer file of fixture `name`: XLM-R's tokenizer.json with the added tokens of
// <name>.added_tokens.json (written under the temp dir) for the Unigram one.
std::string tokenizer_file(const std::string& name) {
  if (name != "unigram_normalized") return kDir + name + ".json";
  json j = read_json(std::string(BRIGADE_FIXTURES) + "/tokenizers/unigram/xlmr/tokenizer.json");
  j["added_tokens"] = read_json(kDir + name + ".added_tokens.json");
  const auto path = std::filesystem::temp_directory_path() / ("brigade_" + name + "_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << j.dump();
  return path.string();
}

TEST_P(TokenizerAddedTokens, MatchesHuggingFace) {
  const std::string name = GetParam();
  const std::string file = tokenizer_file(name);
  auto tok = Tokenizer::load(file);
  if (file.find(kDir) != 0) std::filesystem::remove(file);
  ASSERT_TRUE(tok.has_value()) << tok.status().message();
  const json cases = read_json(kDir + "vectors.json")[name];
  ASSERT_GT(cases.size(), 20u);
  for (const auto& c : cases) {
    const std::string text = c["text"].get<std::string>();
    auto ids = (*tok)->encode(text, false);
    ASSERT_TRUE(ids.has_value()) << escaped(text) << ": " << ids.status().message();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << escaped(text);
    if (name.starts_with("wordpiece")) continue;  // WordPiece's decoder joins pieces with spaces; the ids are the point
    auto decoded = (*tok)->decode(*ids);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << escaped(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerAddedTokens, ::testing::Values("plain", "lowercase", "wordpiece", "single_word",
                                                                               "wordpiece_normalized", "unigram_normalized"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace brigade
