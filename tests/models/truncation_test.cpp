// Truncation as Hugging Face `tokenizers` does it (models/truncation.h) against the library itself:
// tests/fixtures/encoder/<name>/truncation.json (scripts/make_encoder_fixtures.py truncation) holds
// enable_truncation(max_length=k)'s ids and type ids for pairs and texts, under BERT's WordPiece
// ([CLS] a [SEP] b [SEP], types 0/1), XLM-R's Unigram (<s> a </s></s> b </s>) and RoBERTa's
// byte-level BPE tokenizers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/mapped_file.h"
#include "models/tokenizer.h"
#include "models/truncation.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

using json = nlohmann::json;

TEST(Truncation, LongestFirstCutsTheLongerThenBoth) {
  EXPECT_EQ(longest_first(3, 4, 10), std::make_pair(size_t{3}, size_t{4}));  // fits
  EXPECT_EQ(longest_first(3, 20, 10), std::make_pair(size_t{3}, size_t{7}));  // the longer gives way
  EXPECT_EQ(longest_first(20, 3, 10), std::make_pair(size_t{7}, size_t{3}));
  EXPECT_EQ(longest_first(8, 9, 10), std::make_pair(size_t{5}, size_t{5}));   // both, half each
  EXPECT_EQ(longest_first(8, 9, 11), std::make_pair(size_t{5}, size_t{6}));   // the second takes the odd one
  EXPECT_EQ(longest_first(9, 8, 11), std::make_pair(size_t{6}, size_t{5}));
  EXPECT_EQ(longest_first(12, 30, 1), std::make_pair(size_t{0}, size_t{1}));
}

TEST(Truncation, PairsAndTextsAreCutAsHuggingFaceTokenizersCutThem) {
  int n = 0;
  for (const char* name : {"bert_cross", "xlmr_rerank", "roberta_cls"}) {
    const std::string dir = testing::fixture_dir(std::string("encoder/") + name);
    auto tok = Tokenizer::load(dir);
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    const json cases = json::parse(read_text_file(dir + "/truncation.json").value());
    ASSERT_GE(cases["pairs"].size(), 20u) << name;
    for (const json& c : cases["pairs"]) {
      const int k = c["max_length"];
      std::vector<int32_t> types;
      auto ids = encode_pair_truncated(**tok, c["text_1"].get<std::string>(), c["text_2"].get<std::string>(), k, &types);
      ASSERT_TRUE(ids.has_value()) << name << " k " << k << ": " << ids.status().to_string();
      EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << name << " k " << k << " " << c["text_2"];
      EXPECT_EQ(types, c["type_ids"].get<std::vector<int32_t>>()) << name << " k " << k;
      ++n;
    }
    for (const json& c : cases["texts"]) {
      const int k = c["max_length"];
      const std::string text = c["text"];
      auto full = (*tok)->encode(text, true);
      ASSERT_TRUE(full.has_value());
      auto ids = truncate_text_right(**tok, text, *full, true, k);
      ASSERT_TRUE(ids.has_value()) << name << " k " << k << ": " << ids.status().to_string();
      EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << name << " k " << k << " '" << text << "'";
      ++n;
    }
  }
  EXPECT_EQ(n, 150);
}

TEST(Truncation, AMaxLengthWithoutRoomBesideTheSpecialTokensIsRefused) {
  auto tok = Tokenizer::load(testing::fixture_dir("encoder/xlmr_rerank"));
  ASSERT_TRUE(tok.has_value());
  auto pair = encode_pair_truncated(**tok, "What is the capital of France?", "Paris.", 4, nullptr);
  ASSERT_FALSE(pair.has_value());
  EXPECT_EQ(pair.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(pair.status().message().find("beside its 4 special tokens"), std::string::npos) << pair.status().message();
  auto full = (*tok)->encode("What is the capital of France?", true);
  ASSERT_TRUE(full.has_value());
  auto text = truncate_text_right(**tok, "What is the capital of France?", *full, true, 2);
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("beside its 2 special tokens"), std::string::npos) << text.status().message();
  // Nothing to cut: as encoded.
  EXPECT_EQ(truncate_text_right(**tok, "x", *full, true, 0).value(), *full);
}

}  // namespace
}  // namespace brigade
