// SentencePiece's Unigram model from tokenizer.json against Hugging Face `tokenizers`:
// tests/fixtures/tokenizers/unigram/ holds an XLM-RoBERTa tokenizer.json converted by transformers
// from a SentencePiece model trained with nmt_nfkc (its real precompiled_charsmap), a Llama-style
// byte_fallback one, and vectors.json: the library's normalized text, ids, tokens, decodes and
// pairs for tricky texts, under the xlmr file and variants of its normalizer, pre-tokenizer and
// decoder (scripts/make_unigram_fixtures.py wrote them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/detokenizer.h"
#include "models/mapped_file.h"
#include "models/tokenizer.h"
#include "models/tokenizer_normalizer.h"
#include "models/tokenizer_precompiled.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using json = nlohmann::json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/unigram/";

using testing::escaped;
using testing::read_json;

const json& vectors() {
  static const json v = read_json(kDir + "vectors.json");
  return v;
}
const json& xlmr_file() {
  static const json j = read_json(kDir + "xlmr/tokenizer.json");
  return j;
}

// The xlmr file with a variant's overrides ("PRECOMPILED" stands for the file's Precompiled).
json variant_file(const std::string& name) {
  json t = xlmr_file();
  const json& overrides = vectors()["variants"][name].value("overrides", json::object());
  for (const auto& [key, value] : overrides.items()) {
    t[key] = value;
    if (key == "normalizer")
      for (json& n : t[key]["normalizers"])
        if (n == "PRECOMPILED") n = xlmr_file()["normalizer"]["normalizers"][0];
  }
  return t;
}

std::unique_ptr<Tokenizer> load_json(const json& t, const std::string& tag) {
  const testing::TempDir dir(tag);
  testing::write_text(dir.file("tokenizer.json"), t.dump());
  auto tok = Tokenizer::load(dir.file("tokenizer.json"));
  EXPECT_TRUE(tok.has_value()) << tok.status().to_string();
  return tok ? std::move(*tok) : nullptr;
}

class UnigramReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(vectors()["variants"].contains(GetParam()));
    file_ = variant_file(GetParam());
    tok_ = load_json(file_, "unigram_" + GetParam());
    ASSERT_NE(tok_, nullptr);
  }
  const json& reference() const { return vectors()["variants"][GetParam()]; }

  json file_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(UnigramReference, NormalizesAsTheReference) {
  auto normalizer = TextNormalizer::parse(file_["normalizer"], "fixture");
  ASSERT_TRUE(normalizer.has_value()) << normalizer.status().to_string();
  int n_checked = 0;
  for (const json& c : reference()["cases"]) {
    if (!c.contains("normalized")) continue;  // the variant keeps the xlmr normalizer
    EXPECT_EQ(normalizer->normalize(c["text"].get<std::string>()), c["normalized"].get<std::string>()) << "input " << escaped(c["text"]);
    ++n_checked;
  }
  if (reference().value("overrides", json::object()).contains("normalizer") || GetParam() == "xlmr") {
    EXPECT_GT(n_checked, 20);
  }
}

TEST_P(UnigramReference, EncodesAsTheReference) {
  ASSERT_GT(reference()["cases"].size(), 25u);
  for (const json& c : reference()["cases"]) {
    const std::string text = c["text"];
    auto plain = tok_->encode(text, /*add_bos=*/false);
    ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, c["ids"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    if (c.contains("special")) {
      auto special = tok_->encode(text, /*add_bos=*/true);
      ASSERT_TRUE(special.has_value());
      EXPECT_EQ(*special, c["special"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    }
    // The reference's token is the text it came from: an unknown piece's there is "<unk>" here, and
    // <mask>'s (lstrip) is " <mask>" when a space came before it.
    if (c.contains("tokens")) {
      const auto want = c["tokens"].get<std::vector<std::string>>();
      ASSERT_EQ(want.size(), plain->size()) << "input " << escaped(text);
      for (size_t i = 0; i < want.size(); ++i)
        if ((*plain)[i] != file_["model"]["unk_id"] && !tok_->is_special((*plain)[i])) {
          EXPECT_EQ(tok_->token_string((*plain)[i]), want[i]) << "input " << escaped(text);
        }
    }
  }
}

TEST_P(UnigramReference, DecodesAsTheReference) {
  for (const json& c : reference()["cases"]) {
    if (!c.contains("decoded")) continue;  // the variant keeps the xlmr decoder
    const auto ids = c.contains("special") ? c["special"].get<std::vector<int32_t>>() : *tok_->encode(c["text"].get<std::string>(), true);
    auto with = tok_->decode(ids, /*skip_special=*/false), without = tok_->decode(ids, /*skip_special=*/true);
    ASSERT_TRUE(with.has_value() && without.has_value());
    EXPECT_EQ(*with, c["decoded"].get<std::string>()) << "input " << escaped(c["text"]);
    EXPECT_EQ(*without, c["decoded_skip"].get<std::string>()) << "input " << escaped(c["text"]);
  }
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{tok_->vocab_size()}).status().code(), StatusCode::invalid_argument);
}

TEST_P(UnigramReference, EncodesPairsWithTheirTokenTypeIds) {
  for (const json& p : reference()["pairs"]) {
    std::vector<int32_t> type_ids;
    auto ids = tok_->encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>(), &type_ids);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, p["ids"].get<std::vector<int32_t>>()) << p["a"] << " | " << p["b"];
    EXPECT_EQ(type_ids, p["type_ids"].get<std::vector<int32_t>>()) << p["a"] << " | " << p["b"];
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, UnigramReference,
                         ::testing::Values("xlmr", "spm_converter", "add_prefix_space", "first_nosplit", "never",
                                           "lowercase_prepend"));

// Streamed one id at a time, the text is decode's with special tokens skipped, but for the space
// the first word starts with.
TEST(UnigramTokenizer, StreamsWhatDecodeGives) {
  for (const std::string file : {"xlmr", "byte_fallback"}) {
    auto tok = Tokenizer::load(kDir + file + "/tokenizer.json");
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    const json& cases = file == "xlmr" ? vectors()["variants"]["xlmr"]["cases"] : vectors()["byte_fallback"]["cases"];
    for (const json& c : cases) {
      IncrementalDetokenizer detok(**tok);
      std::string streamed;
      for (int32_t id : c["special"].get<std::vector<int32_t>>()) streamed += detok.push(id);
      streamed += detok.flush();
      if (!streamed.empty() && streamed[0] == ' ') streamed.erase(0, 1);
      EXPECT_EQ(streamed, c["decoded_skip"].get<std::string>()) << file << " input " << escaped(c["text"]);
    }
  }
}

TEST(UnigramTokenizer, ByteFallbackAsTheReference) {
  auto tok = Tokenizer::load(kDir + "byte_fallback/tokenizer.json");
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const json& ref = vectors()["byte_fallback"];
  ASSERT_GT(ref["cases"].size(), 25u);
  for (const json& c : ref["cases"]) {
    const std::string text = c["text"];
    auto plain = (*tok)->encode(text, false), special = (*tok)->encode(text, true);
    ASSERT_TRUE(plain.has_value() && special.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, c["ids"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    EXPECT_EQ(*special, c["special"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    EXPECT_EQ(*(*tok)->decode(*special, false), c["decoded"].get<std::string>()) << "input " << escaped(text);
    EXPECT_EQ(*(*tok)->decode(*special, true), c["decoded_skip"].get<std::string>()) << "input " << escaped(text);
  }
  for (const json& p : ref["pairs"]) {
    std::vector<int32_t> type_ids;
    auto ids = (*tok)->encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>(), &type_ids);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, p["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(type_ids, p["type_ids"].get<std::vector<int32_t>>());
  }
  auto bytes = (*tok)->encode("\xE6\x97\xA5", false);  // "▁" then 日, not a piece: three byte pieces
  ASSERT_TRUE(bytes.has_value() && bytes->size() == 4u) << bytes->size();
  EXPECT_EQ((*tok)->token_string((*bytes)[1]), "<0xE6>");
  EXPECT_EQ((*tok)->token_to_piece((*bytes)[1]), "\xE6");
}

// The Precompiled normalizer alone: the reference's normalize_str of each text.
TEST(UnigramPrecompiled, NormalizesAsTheReference) {
  const json& file = xlmr_file();
  auto charsmap = PrecompiledCharsmap::parse(file["normalizer"]["normalizers"][0]["precompiled_charsmap"].get<std::string>(), "fixture");
  ASSERT_TRUE(charsmap.has_value()) << charsmap.status().to_string();
  const json& cases = vectors()["variants"]["xlmr"]["cases"];
  const json& want = vectors()["precompiled"];
  ASSERT_EQ(cases.size(), want.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(charsmap->normalize(cases[i]["text"].get<std::string>()), want[i].get<std::string>()) << "input " << escaped(cases[i]["text"]);
}

TEST(UnigramTokenizer, HasNoBosOrEosAndMarksItsSpecialTokens) {
  auto tok = Tokenizer::load(kDir + "xlmr");
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  EXPECT_EQ((*tok)->bos_id(), -1);
  EXPECT_TRUE((*tok)->eos_ids().empty());
  auto mask = (*tok)->encode("<mask>", false);
  ASSERT_TRUE(mask.has_value() && mask->size() == 1u);
  EXPECT_TRUE((*tok)->is_special(mask->front()));
  EXPECT_EQ((*tok)->token_to_piece(mask->front()), "<mask>");
  EXPECT_EQ((*tok)->encode("ok \xff", false).status().code(), StatusCode::invalid_argument);
  EXPECT_TRUE(check_tokenizer_fits(**tok, (*tok)->vocab_size()).is_ok());
}

class UnigramBadFile : public ::testing::Test {
 protected:
  void refused(const json& t, StatusCode code, const std::string& why) {
    testing::write_text(dir_.file("tokenizer.json"), t.dump());
    auto tok = Tokenizer::load(dir_.file("tokenizer.json"));
    ASSERT_FALSE(tok.has_value()) << why;
    EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
    EXPECT_NE(tok.status().message().find(why), std::string::npos) << tok.status().message();
  }
  // The xlmr file with its precompiled_charsmap replaced by `blob` (raw bytes, base64-encoded here).
  json with_charsmap(const std::string& base64) {
    json t = xlmr_file();
    t["normalizer"]["normalizers"][0]["precompiled_charsmap"] = base64;
    return t;
  }
  static std::string base64(const std::string& bytes) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t v = 0;
      for (size_t k = 0; k < 3; ++k) v = v << 8 | (i + k < bytes.size() ? static_cast<uint8_t>(bytes[i + k]) : 0);
      for (size_t k = 0; k < 4; ++k) out += k <= (bytes.size() - i) ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
  }
  std::string real_blob() {
    return *decode_base64_text(xlmr_file()["normalizer"]["normalizers"][0]["precompiled_charsmap"].get<std::string>());
  }
  testing::TempDir dir_{"unigram_bad"};
};

TEST_F(UnigramBadFile, CorruptCharsmapsAreNamed) {
  refused(with_charsmap("not*base64!"), StatusCode::corrupt, "precompiled_charsmap is not base64");
  const std::string blob = real_blob();
  ASSERT_EQ(base64(blob), xlmr_file()["normalizer"]["normalizers"][0]["precompiled_charsmap"].get<std::string>());
  uint32_t trie_bytes = 0;
  for (int i = 3; i >= 0; --i) trie_bytes = trie_bytes << 8 | static_cast<uint8_t>(blob[static_cast<size_t>(i)]);
  refused(with_charsmap(base64(blob.substr(0, 4 + trie_bytes / 2))), StatusCode::corrupt, "precompiled_charsmap is truncated");
  refused(with_charsmap(base64(blob.substr(0, 3))), StatusCode::corrupt, "precompiled_charsmap is shorter than its 4-byte header");
  // The pool cut to a few bytes: the trie's replacement offsets now point outside it.
  refused(with_charsmap(base64(blob.substr(0, 4 + trie_bytes + 8))), StatusCode::corrupt, "outside its pool");
}

TEST_F(UnigramBadFile, UnknownTypesAndBadModelsAreNamed) {
  json t = xlmr_file();
  t["normalizer"] = {{"type", "Nmt"}};
  refused(t, StatusCode::unsupported, "normalizer type 'Nmt'");
  t = xlmr_file();
  t["pre_tokenizer"] = {{"type", "ByteLevel"}};
  refused(t, StatusCode::unsupported, "pre_tokenizer type 'ByteLevel'");
  t = xlmr_file();
  t["decoder"] = {{"type", "WordPiece"}};
  refused(t, StatusCode::unsupported, "decoder type 'WordPiece'");
  t = xlmr_file();
  t["model"]["unk_id"] = 100000;
  refused(t, StatusCode::corrupt, "model.unk_id 100000 is outside the vocab");
  t = xlmr_file();
  t["model"]["vocab"][7] = json::array({"x", "high"});
  refused(t, StatusCode::corrupt, "model.vocab entry 7 is not [string, number]");
  t["model"]["vocab"][7] = "x";
  refused(t, StatusCode::corrupt, "model.vocab entry 7 is not [string, number]");
  t = xlmr_file();
  t["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", "(unclosed"}};
  refused(t, StatusCode::corrupt, "does not compile");
}

// Without unk_id a character no piece covers is an error, not a crash.
TEST(UnigramTokenizer, WithoutUnkIdAnUncoveredCharacterIsAnError) {
  json t = xlmr_file();
  t["model"]["unk_id"] = nullptr;
  auto tok = load_json(t, "unigram_nounk");
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->encode("hello", false).has_value());
  EXPECT_EQ(tok->encode("\u2603", false).status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace brigade
