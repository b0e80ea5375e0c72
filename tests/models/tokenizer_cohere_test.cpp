// Cohere's byte-level BPE tokenizer.json (Command R / R+ / R7B / Command A: NFC normalizer, Digits
// then ByteLevel pre-tokenizer, ByteLevel decoder, "<BOS_TOKEN> $A" template) against Hugging Face
// `tokenizers`: tests/fixtures/tokenizers/cohere/ holds a small BPE trained with that
// configuration, its tokenizer_config.json, and vectors.json: the library's normalized text,
// pre-tokenizer pieces, ids and decodes of texts that exercise NFC, digits of many scripts, added
// tokens (normalized and not) in the text, emoji and whitespace
// (scripts/make_cohere_tokenizer_fixtures.py wrote them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/detokenizer.h"
#include "models/mapped_file.h"
#include "models/pretokenizer.h"
#include "models/tokenizer.h"
#include "models/tokenizer_bpe.h"
#include "models/tokenizer_normalizer.h"
#include "models/tokenizer_unicode.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/cohere/";

const json& vectors() {
  static const json v = read_json(kDir + "vectors.json");
  return v;
}
const json& file() {
  static const json j = read_json(kDir + "tokenizer.json");
  return j;
}

class CohereTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::load(kDir);
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    tok_ = std::move(*tok);
    ASSERT_GT(vectors()["cases"].size(), 80u);
  }
  int32_t added_id(const std::string& content) const {
    for (const json& a : file()["added_tokens"])
      if (a["content"] == content) return a["id"].get<int32_t>();
    ADD_FAILURE() << content << " is not an added token";
    return -1;
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(CohereTokenizer, FixtureHasCoheresConfiguration) {
  EXPECT_EQ(file()["normalizer"], json::parse(R"({"type": "NFC"})"));
  const json& pre = file()["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(pre.size(), 2u);
  EXPECT_EQ(pre[0]["type"], "Digits");
  EXPECT_TRUE(pre[0]["individual_digits"].get<bool>());
  EXPECT_EQ(pre[1]["type"], "ByteLevel");
  EXPECT_TRUE(pre[1]["use_regex"].get<bool>());
  EXPECT_FALSE(pre[1]["add_prefix_space"].get<bool>());
  EXPECT_EQ(file()["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(file()["post_processor"]["type"], "TemplateProcessing");
}

// bos and eos from tokenizer_config.json; the chat turn tokens are special, the two others not.
TEST_F(CohereTokenizer, NamesItsSpecialTokens) {
  EXPECT_EQ(tok_->bos_id(), added_id("<BOS_TOKEN>"));
  EXPECT_EQ(tok_->eos_ids(), std::vector<int32_t>{added_id("<|END_OF_TURN_TOKEN|>")});
  for (const char* s : {"<PAD>", "<BOS_TOKEN>", "<|START_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>"})
    EXPECT_TRUE(tok_->is_special(added_id(s))) << s;
  // normalized true: its string and text are its NFC (what the library's id_to_token gives).
  const int32_t cafe = added_id("cafe\u0301");
  EXPECT_FALSE(tok_->is_special(cafe));
  EXPECT_EQ(tok_->token_string(cafe), "caf\u00e9");
  EXPECT_EQ(tok_->token_to_piece(added_id("\u2126")), "\u2126");
}

TEST_F(CohereTokenizer, NormalizesAndSplitsAsTheReference) {
  auto normalizer = TextNormalizer::parse(file()["normalizer"], "fixture");
  ASSERT_TRUE(normalizer.has_value()) << normalizer.status().to_string();
  auto byte_level = make_regex_pretokenizer(kGpt2Pattern);
  ASSERT_TRUE(byte_level.has_value());
  const auto digits = make_digits_pretokenizer(true);
  // The pieces of the whole normalized text (added tokens are not split out here).
  for (const json& c : vectors()["cases"]) {
    const std::string normalized = normalizer->normalize(c["text"].get<std::string>());
    EXPECT_EQ(normalized, c["normalized"].get<std::string>()) << "input " << escaped(c["text"]);
    std::vector<std::string> pieces;
    for (std::string_view d : digits->split(normalized))
      for (std::string_view p : (*byte_level)->split(d)) pieces.emplace_back(p);
    EXPECT_EQ(pieces, c["pieces"].get<std::vector<std::string>>()) << "input " << escaped(c["text"]);
  }
}

TEST_F(CohereTokenizer, EncodesAsTheReference) {
  for (const json& c : vectors()["cases"]) {
    const std::string text = c["text"];
    auto plain = tok_->encode(text, /*add_bos=*/false), special = tok_->encode(text, /*add_bos=*/true);
    ASSERT_TRUE(plain.has_value() && special.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, c["ids"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    EXPECT_EQ(*special, c["special"].get<std::vector<int32_t>>()) << "input " << escaped(text);
  }
}

// The library's decode, but for its added token with non-ASCII content, which it passes through
// the ByteLevel byte table ("café" comes out "caf\ufffd"): brigade gives the token's text.
TEST_F(CohereTokenizer, DecodesAsTheReference) {
  int n_content = 0;
  for (const json& c : vectors()["cases"]) {
    const auto ids = c["special"].get<std::vector<int32_t>>();
    auto with = tok_->decode(ids, /*skip_special=*/false), without = tok_->decode(ids, /*skip_special=*/true);
    ASSERT_TRUE(with.has_value() && without.has_value());
    n_content += c.contains("decoded_content");
    EXPECT_EQ(*with, c.value("decoded_content", c["decoded"].get<std::string>())) << "input " << escaped(c["text"]);
    EXPECT_EQ(*without, c.value("decoded_skip_content", c["decoded_skip"].get<std::string>())) << "input " << escaped(c["text"]);
  }
  EXPECT_GE(n_content, 3);
}

// Without added tokens in it, the text decodes back to its NFC; streamed too.
TEST_F(CohereTokenizer, DecodingRoundTripsTheNormalizedText) {
  int n_checked = 0;
  for (const json& c : vectors()["cases"]) {
    const std::string text = c["text"];
    if (text.find('<') != std::string::npos || text.find("\u2126") != std::string::npos || text.find("caf") != std::string::npos)
      continue;
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(*tok_->decode(ids), c["normalized"].get<std::string>()) << "input " << escaped(text);
    IncrementalDetokenizer detok(*tok_);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id);
    EXPECT_EQ(streamed + detok.flush(), c["normalized"].get<std::string>()) << "input " << escaped(text);
    ++n_checked;
  }
  EXPECT_GT(n_checked, 60);
}

TEST_F(CohereTokenizer, EncodesPairsWithTheirTokenTypeIds) {
  ASSERT_EQ(vectors()["pairs"].size(), 3u);
  for (const json& p : vectors()["pairs"]) {
    std::vector<int32_t> type_ids;
    auto ids = tok_->encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>(), &type_ids);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, p["ids"].get<std::vector<int32_t>>()) << p["a"] << " | " << p["b"];
    EXPECT_EQ(type_ids, p["type_ids"].get<std::vector<int32_t>>()) << p["a"] << " | " << p["b"];
  }
}

TEST(CohereDigits, SplitsAsTheReferenceInBothModes) {
  const auto individual = make_digits_pretokenizer(true), contiguous = make_digits_pretokenizer(false);
  ASSERT_GT(vectors()["digits"].size(), 20u);
  for (const json& c : vectors()["digits"]) {
    const std::string text = c["text"];
    std::vector<std::string> one, runs;
    for (std::string_view p : individual->split(text)) one.emplace_back(p);
    for (std::string_view p : contiguous->split(text)) runs.emplace_back(p);
    EXPECT_EQ(one, c["individual"].get<std::vector<std::string>>()) << "input " << escaped(text);
    EXPECT_EQ(runs, c["contiguous"].get<std::vector<std::string>>()) << "input " << escaped(text);
  }
}

// The library's Digits splits at Rust's char::is_numeric, of a newer Unicode than PCRE2's \p{N}
// (Kawi and Kaktovik digits, Unicode 15), so is_numeric is a table: it holds every code point the
// library takes as numeric and no other.
TEST(CohereDigits, NumericIsTheLibrarysIsNumeric) {
  std::vector<bool> numeric(0x110000, false);
  for (const json& r : vectors()["numeric_ranges"])
    for (uint32_t cp = r[0].get<uint32_t>(); cp <= r[1].get<uint32_t>(); ++cp) numeric[cp] = true;
  int n_wrong = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp)
    if ((cp < 0xD800 || cp >= 0xE000) && is_numeric(cp) != numeric[cp] && ++n_wrong < 10)
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(cp) << ": is_numeric " << is_numeric(cp);
  EXPECT_EQ(n_wrong, 0);
  EXPECT_TRUE(is_numeric(0x11F50));  // KAWI DIGIT ZERO
}

TEST(CohereTokenizerFile, MalformedPartsAreRefusedWithTheReason) {
  const testing::TempDir dir("cohere_bad");
  auto refused = [&](json t, StatusCode code, const std::string& why) {
    testing::write_text(dir.file("tokenizer.json"), t.dump());
    auto tok = Tokenizer::load(dir.file("tokenizer.json"));
    ASSERT_FALSE(tok.has_value()) << why;
    EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
    EXPECT_NE(tok.status().message().find(why), std::string::npos) << tok.status().message();
  };
  json t = file();
  t["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = "yes";
  refused(t, StatusCode::corrupt, "individual_digits must be a boolean");
  t = file();
  t["normalizer"] = {{"type", "Nmt"}};
  refused(t, StatusCode::unsupported, "normalizer type 'Nmt'");
  t = file();
  t["added_tokens"][0]["normalized"] = 1;
  refused(t, StatusCode::corrupt, "has a normalized that is not a boolean");
}

// A normalizer that leaves nothing of the text between two added tokens (here Replace removing
// every space) gives no ids for it, not a read before the text's start.
TEST(BpeNormalizer, TextNormalizedToNothingGivesNoIds) {
  json t = file();
  t["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": ""})");
  auto tok = load_bpe_tokenizer(t, json(), "replace-all");
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto ids = (*tok)->encode("   <|START_OF_TURN_TOKEN|>  ", false);
  ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
  int32_t turn = -1;
  for (const json& a : file()["added_tokens"])
    if (a["content"] == "<|START_OF_TURN_TOKEN|>") turn = a["id"].get<int32_t>();
  EXPECT_EQ(*ids, (std::vector<int32_t>{turn}));
  auto none = (*tok)->encode("  ", false);
  ASSERT_TRUE(none.has_value()) << none.status().to_string();
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace brigade
