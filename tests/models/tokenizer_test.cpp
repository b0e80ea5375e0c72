// Byte-level BPE from tokenizer.json (the synthetic vocabulary make-model writes), checked
// against an independent naive BPE, plus UTF-8 handling and incremental detokenization.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "models/byte_unicode.h"
#include "models/detokenizer.h"
#include "models/pretokenizer.h"
#include "models/synthetic_tokenizer.h"
#include "models/tokenizer.h"
#include "models/utf8.h"

namespace brigade {
namespace {

constexpr int kVocab = 2000;

class BpeTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("tok");
    auto json = synthetic_tokenizer_json(kVocab);
    ASSERT_TRUE(json.has_value());
    testing::write_text(dir_->file("tokenizer.json"), *json);
    testing::write_text(dir_->file("tokenizer_config.json"), synthetic_tokenizer_config_json(64, "llama"));
    auto tok = Tokenizer::load(dir_->str());
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    tok_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete dir_;
  }
  static std::vector<int32_t> enc(const std::string& s) {
    auto ids = tok_->encode(s, false);
    EXPECT_TRUE(ids.has_value()) << ids.status().to_string();
    return ids.has_value() ? *ids : std::vector<int32_t>{};
  }
  static inline testing::TempDir* dir_ = nullptr;
  static inline Tokenizer* tok_ = nullptr;
};

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c = {
      "Once upon a time, there was a little girl named Lily.",
      "the the the theory thermal",
      "  leading spaces and trailing   ",
      "tabs\tand\nnewlines\n\n\nand\r\nCRLF",
      "digits 0123456789 and 3.14159, 2024-06-01",
      "I'm sure you'll see they've said we'd go; it's John's",
      "Ünïcödé: naïve café, Zürich, Ελληνικά, русский, 日本語のテキスト, 한국어",
      "emoji 🙂🎉👩‍👩‍👧 flags 🇫🇷 and ZWJ",
      "mixed!!!???...---___***",
      "",
      " ",
      "a",
      "\xc2\xa0non-breaking\xe2\x80\x83" "em space",
  };
  return c;
}

TEST_F(BpeTokenizerTest, VocabularyAndSpecials) {
  EXPECT_EQ(tok_->vocab_size(), kVocab);
  EXPECT_EQ(tok_->bos_id(), kSyntheticBosId);
  EXPECT_EQ(tok_->eos_ids(), std::vector<int32_t>{kSyntheticEosId});
  EXPECT_TRUE(tok_->is_special(1));
  EXPECT_FALSE(tok_->is_special(100));
  for (int id = 0; id < kVocab; ++id) ASSERT_FALSE(tok_->token_to_piece(id).empty()) << id;
  EXPECT_EQ(tok_->token_to_piece(3 + 'a'), "a");
  EXPECT_TRUE(tok_->token_to_piece(kVocab).empty());
}

TEST_F(BpeTokenizerTest, RoundTripsVariedText) {
  for (const auto& s : corpus()) {
    const auto ids = enc(s);
    auto back = tok_->decode(ids);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, s);
    for (int32_t id : ids) EXPECT_FALSE(tok_->is_special(id)) << s;
  }
}

TEST_F(BpeTokenizerTest, MergesApplyWithinWords) {
  // " the" and "cat" are built by merges, and the pre-tokenizer keeps the space with the word.
  const auto ids = enc("the cat");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok_->token_to_piece(ids[0]), "the");
  EXPECT_EQ(tok_->token_to_piece(ids[1]), " cat");
  EXPECT_LT(enc("Once upon a time").size(), std::string("Once upon a time").size() / 2);
}

TEST_F(BpeTokenizerTest, SpecialTokensAndBos) {
  const auto ids = enc("<s>the</s> </s>x");
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids[1], enc("the")[0]);
  EXPECT_EQ(ids[2], 2);
  EXPECT_EQ(ids[4], 2);
  auto with_bos = tok_->encode("hi", true);
  ASSERT_TRUE(with_bos.has_value());
  EXPECT_EQ(with_bos->front(), 1);
  auto text = tok_->decode(*with_bos, /*skip_special=*/true);
  EXPECT_EQ(*text, "hi");
  EXPECT_EQ(*tok_->decode(*with_bos), "<s>hi");
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{5, kVocab}).status().code(), StatusCode::invalid_argument);
}

TEST_F(BpeTokenizerTest, InvalidUtf8Rejected) {
  for (std::string bad : {std::string("\xff"), std::string("ok\xc3"), std::string("\xc0\xaf"),
                          std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"), std::string("a\x80 b")}) {
    auto ids = tok_->encode(bad, false);
    EXPECT_EQ(ids.status().code(), StatusCode::invalid_argument) << ::testing::PrintToString(bad);
  }
}

// The textbook algorithm: repeatedly merge the lowest-ranked adjacent pair, leftmost first.
std::vector<std::string> naive_bpe(const std::string& word, const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> parts;
  for (char c : word) parts.push_back(byte_to_unicode(static_cast<uint8_t>(c)));
  while (parts.size() > 1) {
    int best = -1, best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find({parts[i], parts[i + 1]});
      if (it != ranks.end() && it->second < best_rank) { best_rank = it->second; best = static_cast<int>(i); }
    }
    if (best < 0) break;
    parts[static_cast<size_t>(best)] += parts[static_cast<size_t>(best) + 1];
    parts.erase(parts.begin() + best + 1);
  }
  return parts;
}

TEST_F(BpeTokenizerTest, MatchesNaiveBpe) {
  const auto j = nlohmann::json::parse(testing::read_bytes(dir_->file("tokenizer.json")));
  std::map<std::pair<std::string, std::string>, int> ranks;
  int r = 0;
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    ranks[{s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)}] = r++;
  }
  const auto& vocab = j["model"]["vocab"];
  auto pre = make_regex_pretokenizer(kGpt2Pattern);
  ASSERT_TRUE(pre.has_value());
  uint64_t state = 12345;
  auto rnd = [&] { state = state * 6364136223846793005ull + 1442695040888963407ull; return state >> 33; };
  const std::string alphabet = "etaoinshrdlcumwfgypbvkjxqz   ,.'0123456789";
  std::vector<std::string> texts = corpus();
  for (int t = 0; t < 200; ++t) {
    std::string s;
    for (uint64_t n = 1 + rnd() % 40; n > 0; --n) s += alphabet[rnd() % alphabet.size()];
    texts.push_back(s);
  }
  for (const auto& text : texts) {
    std::vector<int32_t> want;
    for (std::string_view piece : (*pre)->split(text))
      for (const auto& p : naive_bpe(std::string(piece), ranks)) want.push_back(vocab.at(p).get<int32_t>());
    EXPECT_EQ(enc(text), want) << text;
  }
}

TEST(PreTokenizer, Gpt2RegexSplits) {
  auto pre = make_regex_pretokenizer(kGpt2Pattern);
  ASSERT_TRUE(pre.has_value());
  const auto pieces = (*pre)->split("Hello world's  123!! 日本\n");
  const std::vector<std::string_view> want = {"Hello", " world", "'s", " ", " 123", "!!", " 日本", "\n"};
  EXPECT_EQ(pieces, want);
  EXPECT_EQ(make_regex_pretokenizer("(unclosed").status().code(), StatusCode::invalid_argument);
}

TEST_F(BpeTokenizerTest, IncrementalDetokenizerEmitsOnlyCompleteUtf8) {
  for (const auto& s : corpus()) {
    IncrementalDetokenizer detok(*tok_);
    std::string streamed;
    for (int32_t id : enc(s)) {
      const std::string out = detok.push(id);
      EXPECT_TRUE(is_valid_utf8(out)) << s;
      streamed += out;
    }
    streamed += detok.flush();
    EXPECT_EQ(streamed, s);
  }
  // Byte tokens of "é" (C3 A9) and "🙂" (F0 9F 99 82) one at a time: nothing until complete.
  IncrementalDetokenizer detok(*tok_);
  auto byte_id = [](uint8_t b) { return 3 + static_cast<int32_t>(b); };
  EXPECT_EQ(detok.push(byte_id(0xC3)), "");
  EXPECT_EQ(detok.n_pending(), 1u);
  EXPECT_EQ(detok.push(byte_id(0xA9)), "\xC3\xA9");
  EXPECT_EQ(detok.push(byte_id(0xF0)), "");
  EXPECT_EQ(detok.push(byte_id(0x9F)), "");
  EXPECT_EQ(detok.push(byte_id(0x99)), "");
  EXPECT_EQ(detok.push(byte_id(0x82)), "\xF0\x9F\x99\x82");
  EXPECT_EQ(detok.push(1), "");  // special tokens are skipped
  // A sequence that can never complete comes out as U+FFFD, and so does a dangling one at flush.
  EXPECT_EQ(detok.push(byte_id(0xE2)), "");
  EXPECT_EQ(detok.push(byte_id('x')), "\xEF\xBF\xBDx");
  EXPECT_EQ(detok.push(byte_id(0xFF)), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.push(byte_id(0xE6)), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.n_pending(), 0u);
}

// skip_special false (vLLM's skip_special_tokens=False): special tokens' text stays, but the
// EOS that ends the output is no text.
TEST_F(BpeTokenizerTest, IncrementalDetokenizerCanKeepSpecialTokens) {
  IncrementalDetokenizer keep(*tok_, /*skip_special=*/false);
  ASSERT_TRUE(tok_->is_special(kSyntheticBosId));
  EXPECT_EQ(keep.push(kSyntheticBosId), tok_->token_to_piece(kSyntheticBosId));
  EXPECT_FALSE(tok_->token_to_piece(kSyntheticBosId).empty());
  EXPECT_EQ(keep.push(3 + 'a'), "a");
  EXPECT_EQ(keep.push(kSyntheticEosId), "");
}

TEST(Tokenizer, LoadErrors) {
  testing::TempDir dir("tokerr");
  EXPECT_EQ(Tokenizer::load(dir.str()).status().code(), StatusCode::not_found);
  testing::write_text(dir.file("tokenizer.json"), "{\"model\": ");
  EXPECT_EQ(Tokenizer::load(dir.str()).status().code(), StatusCode::corrupt);
  testing::write_text(dir.file("tokenizer.json"),
                      R"({"model": {"type": "WordLevel", "vocab": {}}, "pre_tokenizer": {"type": "Whitespace"}})");
  EXPECT_EQ(Tokenizer::load(dir.str()).status().code(), StatusCode::unsupported);
  auto json = nlohmann::json::parse(*synthetic_tokenizer_json(300));
  json["model"]["merges"].push_back("zzz qqq");
  testing::write_text(dir.file("tokenizer.json"), json.dump());
  auto st = Tokenizer::load(dir.str()).status();
  EXPECT_EQ(st.code(), StatusCode::corrupt);
  EXPECT_NE(st.message().find("zzz qqq"), std::string::npos) << st.to_string();
  EXPECT_EQ(synthetic_tokenizer_json(258).status().code(), StatusCode::invalid_argument);
}

// A vocabulary without some bytes' tokens loads (llama.cpp loads one too); text holding such a
// byte is refused naming it, while text and special tokens around it do not need it.
TEST(Tokenizer, AVocabularyWithoutSomeBytesRefusesOnlyTextThatHoldsThem) {
  testing::TempDir dir("tok_bytes");
  auto json = nlohmann::json::parse(*synthetic_tokenizer_json(300));
  auto& vocab = json["model"]["vocab"];
  for (const char* gone : {"!", "#"}) vocab.erase(gone);  // bytes 33 and 35 (their own spelling)
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& m : json["model"]["merges"]) {  // merges of the removed tokens go with them
    const std::string text = m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>();
    if (text.find('!') == std::string::npos && text.find('#') == std::string::npos) merges.push_back(m);
  }
  json["model"]["merges"] = merges;
  testing::write_text(dir.file("tokenizer.json"), json.dump());
  auto tok = Tokenizer::load(dir.str());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto ok = (*tok)->encode("plain text, no bang", false);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(*(*tok)->decode(*ok), "plain text, no bang");
  auto refused = (*tok)->encode("hello!", false);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(refused.status().message().find("byte 33"), std::string::npos) << refused.status().to_string();
}

}  // namespace
}  // namespace brigade
