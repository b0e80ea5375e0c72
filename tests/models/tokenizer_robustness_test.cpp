// Arbitrary input never breaks a tokenizer: random bytes (invalid UTF-8 included), random code
// points, long runs, special-token text cut in half, through every tokenizer.json model kind
// (WordPiece, Unigram with SentencePiece's precompiled normalizer and byte fallback, byte-level
// BPE) and pairs. Each text encodes or fails with a clear error; what encodes decodes, ids inside
// the vocabulary, and a pair's type ids match its ids. (Run under scripts/asan.sh too.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "models/tokenizer.h"
#include "models/truncation.h"
#include "models/utf8.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

std::string random_text(std::mt19937& rng) {
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 80)(rng);
  const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
  for (int i = 0; i < n; ++i) {
    if (kind == 0) {  // any bytes
      s.push_back(static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng)));
    } else if (kind == 1) {  // any code point (surrogates skipped), valid UTF-8
      uint32_t cp = std::uniform_int_distribution<uint32_t>(1, 0x10FFFF)(rng);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x20;
      s += u32_to_utf8(std::u32string(1, static_cast<char32_t>(cp)));
    } else if (kind == 2) {  // ASCII words, punctuation, whitespace runs, markers and pieces of them
      static const char* pieces[] = {"the", " ", "  ", "\t", "\n", "[CLS]", "[SE", "P]", "<s>", "</s", ">", "##",
                                     "▁", "é", "ﬁ", "①", "日本", "!!", "...", "a", "\r\n", "\x01", "<mask>"};
      s += pieces[std::uniform_int_distribution<size_t>(0, std::size(pieces) - 1)(rng)];
    } else {  // one long run
      s.append(static_cast<size_t>(n) * 8, "aé日 "[std::uniform_int_distribution<int>(0, 3)(rng)]);
      break;
    }
  }
  return s;
}

TEST(TokenizerRobustness, ArbitraryTextEncodesOrFailsCleanly) {
  const std::vector<std::string> dirs = {
      testing::fixture_dir("encoder/bert_cross"), testing::fixture_dir("encoder/roberta_cls"),
      testing::fixture_dir("encoder/xlmr_rerank"),
      testing::fixture_dir("tokenizers/unigram/byte_fallback/tokenizer.json")};
  std::mt19937 rng(2026);
  int encoded = 0, refused = 0;
  for (const std::string& dir : dirs) {
    auto tok = Tokenizer::load(dir);
    ASSERT_TRUE(tok.has_value()) << dir << ": " << tok.status().to_string();
    const Tokenizer& t = **tok;
    for (int i = 0; i < 300; ++i) {
      const std::string a = random_text(rng), b = random_text(rng);
      auto ids = t.encode(a, i % 2 == 0);
      if (!ids) {
        EXPECT_EQ(ids.status().code(), StatusCode::invalid_argument) << dir << ": " << ids.status().to_string();
        ++refused;
        continue;
      }
      ++encoded;
      for (int32_t id : *ids) ASSERT_TRUE(id >= 0 && id < t.vocab_size()) << dir;
      auto text = t.decode(*ids, i % 3 == 0);
      EXPECT_TRUE(text.has_value()) << dir << ": " << text.status().to_string();
      std::vector<int32_t> types;
      auto pair = t.encode_pair(a, b, &types);
      if (pair) {
        EXPECT_EQ(types.size(), pair->size()) << dir;
        auto cut = encode_pair_truncated(t, a, b, 16, &types);
        if (cut) {
          EXPECT_LE(cut->size(), 16u) << dir;
          EXPECT_EQ(types.size(), cut->size()) << dir;
        } else {
          EXPECT_EQ(cut.status().code(), StatusCode::invalid_argument) << dir << ": " << cut.status().to_string();
        }
      }
    }
  }
  EXPECT_GT(encoded, 600);
  EXPECT_GT(refused, 0);  // invalid UTF-8 is refused, not encoded
}

}  // namespace
}  // namespace brigade
