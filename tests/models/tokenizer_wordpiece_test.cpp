// BERT's WordPiece tokenizer against Hugging Face `tokenizers`: tests/fixtures/tokenizers/wordpiece/
// holds two WordPiece tokenizer.json files trained by the reference library (uncased like
// bert-base-uncased, with a TemplateProcessing; cased like bert-base-cased, with BertProcessing)
// and vectors.json: the library's normalized text, ids, tokens and decodes for tricky texts, its
// pairs with token type ids, and unicodedata's strip_accents (scripts/make_tokenizer_fixtures.py
// wordpiece wrote them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/detokenizer.h"
#include "models/mapped_file.h"
#include "models/tokenizer.h"
#include "models/tokenizer_bert_text.h"
#include "models/utf8.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using json = nlohmann::json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/wordpiece/";

using testing::escaped;
using testing::read_json;

class WordPieceReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    vectors_ = read_json(kDir + "vectors.json");
    ASSERT_TRUE(vectors_.contains(GetParam()));
    ASSERT_GT(vectors_[GetParam()]["cases"].size(), 40u);
    auto tok = Tokenizer::load(kDir + GetParam() + ".json");
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    tok_ = std::move(*tok);
  }
  const json& cases() const { return vectors_[GetParam()]["cases"]; }

  json vectors_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(WordPieceReference, NormalizesEveryTextAsTheReference) {
  const json file = read_json(kDir + GetParam() + ".json");
  auto options = parse_bert_normalizer(file["normalizer"], "fixture");
  ASSERT_TRUE(options.has_value() && options->has_value()) << options.status().to_string();
  for (const json& c : cases()) {
    const std::string text = c["text"];
    EXPECT_EQ(u32_to_utf8(bert_normalize(utf8_to_u32(text), **options)), c["normalized"].get<std::string>())
        << "input " << escaped(text);
  }
}

TEST_P(WordPieceReference, EncodesEveryTextAsTheReference) {
  for (const json& c : cases()) {
    const std::string text = c["text"];
    auto plain = tok_->encode(text, /*add_bos=*/false);
    auto special = tok_->encode(text, /*add_bos=*/true);
    ASSERT_TRUE(plain.has_value() && special.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, c["ids"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    EXPECT_EQ(*special, c["special"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    std::vector<std::string> tokens;
    for (int32_t id : *plain) tokens.push_back(tok_->token_string(id));
    EXPECT_EQ(tokens, c["tokens"].get<std::vector<std::string>>()) << "input " << escaped(text);
  }
}

TEST_P(WordPieceReference, DecodesAsTheReference) {
  for (const json& c : cases()) {
    const auto ids = c["special"].get<std::vector<int32_t>>();
    auto with = tok_->decode(ids, /*skip_special=*/false);
    auto without = tok_->decode(ids, /*skip_special=*/true);
    ASSERT_TRUE(with.has_value() && without.has_value());
    EXPECT_EQ(*with, c["decoded"].get<std::string>()) << "input " << escaped(c["text"]);
    EXPECT_EQ(*without, c["decoded_skip"].get<std::string>()) << "input " << escaped(c["text"]);
  }
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{tok_->vocab_size()}).status().code(), StatusCode::invalid_argument);
}

// Streamed one id at a time, the text is decode's, but for the space before the first word.
TEST_P(WordPieceReference, StreamsWhatDecodeGives) {
  for (const json& c : cases()) {
    IncrementalDetokenizer detok(*tok_);
    std::string streamed;
    for (int32_t id : c["special"].get<std::vector<int32_t>>()) streamed += detok.push(id);
    streamed += detok.flush();
    if (!streamed.empty() && streamed[0] == ' ') streamed.erase(0, 1);
    EXPECT_EQ(streamed, c["decoded_skip"].get<std::string>()) << "input " << escaped(c["text"]);
  }
}

// tokenizer(text=a, text_pair=b): [CLS] A [SEP] B [SEP], type ids 0 through the first [SEP], then 1.
TEST_P(WordPieceReference, EncodesPairsWithTheirTokenTypeIds) {
  for (const json& p : vectors_[GetParam()]["pairs"]) {
    std::vector<int32_t> type_ids;
    auto ids = tok_->encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>(), &type_ids);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, p["ids"].get<std::vector<int32_t>>()) << p["a"] << " | " << p["b"];
    EXPECT_EQ(type_ids, p["type_ids"].get<std::vector<int32_t>>()) << p["a"] << " | " << p["b"];
    auto ids_only = tok_->encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>());
    ASSERT_TRUE(ids_only.has_value());
    EXPECT_EQ(*ids_only, *ids);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WordPieceReference, ::testing::Values("uncased", "cased"));

// NFD then dropping nonspacing marks gives what Python's unicodedata gives (Hangul syllables
// decompose into jamo, marks reorder by combining class, Vietnamese and polytonic Greek lose
// stacked accents), but where the reference library's older Unicode tables disagree (a mark
// assigned since, like U+0898): there the tables follow the library.
TEST(WordPieceNormalizer, StripAccentsMatchesUnicodedata) {
  const json vectors = read_json(kDir + "vectors.json");
  ASSERT_GE(vectors["strip_accents"].size(), 15u);
  BertNormalizerOptions strip_only{.clean_text = false, .handle_chinese_chars = false, .strip_accents = true, .lowercase = false};
  int n_differ = 0;
  for (const json& c : vectors["strip_accents"]) {
    const std::string text = c["text"];
    const std::string want = c["unicodedata"] == c["tokenizers"] ? c["unicodedata"] : c["tokenizers"];
    n_differ += c["unicodedata"] != c["tokenizers"];
    EXPECT_EQ(u32_to_utf8(bert_normalize(utf8_to_u32(text), strip_only)), want) << "input " << escaped(text);
  }
  EXPECT_LE(n_differ, 1) << "unicodedata and tokenizers should disagree on the newer-Unicode case only";
}

TEST(WordPieceTokenizer, HasNoBosOrEosAndMarksItsSpecialTokens) {
  auto tok = Tokenizer::load(kDir + "uncased.json");
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  EXPECT_EQ((*tok)->bos_id(), -1);
  EXPECT_TRUE((*tok)->eos_ids().empty());
  auto cls = (*tok)->encode("[CLS]", false);
  ASSERT_TRUE(cls.has_value());
  ASSERT_EQ(cls->size(), 1u);
  EXPECT_TRUE((*tok)->is_special(cls->front()));
  EXPECT_EQ((*tok)->token_string(cls->front()), "[CLS]");
  auto word = (*tok)->encode("hello", false);
  ASSERT_TRUE(word.has_value() && !word->empty());
  EXPECT_FALSE((*tok)->is_special(word->front()));
  EXPECT_EQ((*tok)->encode("ok \xff", false).status().code(), StatusCode::invalid_argument);
  EXPECT_TRUE(check_tokenizer_fits(**tok, (*tok)->vocab_size()).is_ok());
}

// Without a post-processor nothing is added to one text, and a pair is the two encodings joined,
// the second of type 1 (as the reference joins them: tokenizers/post_processor/pairs.json "none").
TEST(WordPieceTokenizer, WithoutAPostProcessorAddsNothing) {
  json t = read_json(kDir + "uncased.json");
  t["post_processor"] = nullptr;
  const testing::TempDir dir("wordpiece_plain");
  testing::write_text(dir.file("tokenizer.json"), t.dump());
  auto tok = Tokenizer::load(dir.file("tokenizer.json"));
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto a = (*tok)->encode("hello world", true), b = (*tok)->encode("paris", false);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(*a, *(*tok)->encode("hello world", false));
  std::vector<int32_t> type_ids;
  auto pair = (*tok)->encode_pair("hello world", "paris", &type_ids);
  ASSERT_TRUE(pair.has_value());
  std::vector<int32_t> want = *a, want_types(a->size(), 0);
  want.insert(want.end(), b->begin(), b->end());
  want_types.resize(want.size(), 1);
  EXPECT_EQ(*pair, want);
  EXPECT_EQ(type_ids, want_types);
}

TEST(WordPieceTokenizer, BadFilesAreClearErrors) {
  const json good = read_json(kDir + "uncased.json");
  const testing::TempDir dir("wordpiece_bad");
  auto refused = [&](const json& t, StatusCode code, const std::string& why) {
    testing::write_text(dir.file("tokenizer.json"), t.dump());
    auto tok = Tokenizer::load(dir.file("tokenizer.json"));
    ASSERT_FALSE(tok.has_value()) << why;
    EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
    EXPECT_NE(tok.status().message().find(why), std::string::npos) << tok.status().message();
  };
  json t = good;
  t["normalizer"] = {{"type", "Precompiled"}};
  refused(t, StatusCode::unsupported, "'Precompiled'");
  t = good;
  t["pre_tokenizer"] = {{"type", "Metaspace"}};
  refused(t, StatusCode::unsupported, "'Metaspace'");
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}}}}};
  refused(t, StatusCode::unsupported, "'Digits'");
  t = good;
  t["decoder"] = {{"type", "ByteLevel"}};
  refused(t, StatusCode::unsupported, "decoder type 'ByteLevel'");
  t = good;
  t["model"]["unk_token"] = "<unk>";
  refused(t, StatusCode::corrupt, "\"<unk>\" is not in the vocab");
  t = good;
  t["model"]["vocab"]["hello"] = "seven";
  refused(t, StatusCode::corrupt, "'hello' has an invalid id");
  t = good;
  t["model"]["type"] = "WordLevel";
  refused(t, StatusCode::unsupported, "(BPE, WordPiece, Unigram)");
  t = good;
  t["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"[CLS]", 1 << 20}}, {"sep", {"[SEP]", 3}}};
  refused(t, StatusCode::corrupt, "outside the vocabulary");
}

// A Sequence of WhitespaceSplit and Punctuation splits as BertPreTokenizer does.
TEST(WordPieceTokenizer, PreTokenizerSequenceOfItsHalves) {
  json t = read_json(kDir + "uncased.json");
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Punctuation"}, {"behavior", "Isolated"}}}}};
  const testing::TempDir dir("wordpiece_seq");
  testing::write_text(dir.file("tokenizer.json"), t.dump());
  auto seq = Tokenizer::load(dir.file("tokenizer.json"));
  auto bert = Tokenizer::load(kDir + "uncased.json");
  ASSERT_TRUE(seq.has_value() && bert.has_value()) << seq.status().to_string();
  for (const std::string text : {"Hello, world!!! (nested [brackets])", "don't\tstop\nme ¿qué?"})
    EXPECT_EQ(*(*seq)->encode(text, false), *(*bert)->encode(text, false)) << text;
}

}  // namespace
}  // namespace brigade
