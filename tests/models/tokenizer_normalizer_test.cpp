// TextNormalizer's Unicode forms (NFC, NFD, NFKC, NFKD) against Python's unicodedata and Hugging
// Face `tokenizers`: tests/fixtures/tokenizers/cohere/forms.json holds tricky texts (decomposed
// letters, Hangul jamo, composition exclusions, singletons, marks out of order and blocked,
// compatibility characters) with unicodedata's forms and the library's where its older Unicode
// tables differ, and per form one text of every code point the form changes
// (scripts/make_cohere_tokenizer_fixtures.py wrote it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/tokenizer_normalizer.h"
#include "models/utf8.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::escaped;

constexpr const char* kForms[] = {"NFC", "NFD", "NFKC", "NFKD"};

const json& forms() {
  static const json j = testing::read_json(std::string(BRIGADE_FIXTURES) + "/tokenizers/cohere/forms.json");
  return j;
}

TextNormalizer normalizer(const json& config) {
  auto n = TextNormalizer::parse(config, "test");
  EXPECT_TRUE(n.has_value()) << n.status().to_string();
  return n ? std::move(*n) : TextNormalizer();
}

// brigade follows the library where its tables are older than unicodedata's (U+11938 stays
// decomposed, U+32FF has no compatibility decomposition, marks of Unicode 11 on are class 0).
TEST(TextNormalizerForms, TrickyTextsAsTheReference) {
  ASSERT_GT(forms()["texts"].size(), 90u);
  int n_differ = 0;
  for (const char* form : kForms) {
    const TextNormalizer n = normalizer({{"type", form}});
    for (const json& t : forms()["texts"]) {
      const std::string text = t["text"];
      const json theirs = t.value("tokenizers", json::object());
      const std::string want = theirs.value(form, t[form].get<std::string>());
      n_differ += theirs.contains(form);
      EXPECT_EQ(n.normalize(text), want) << form << " of " << escaped(text);
    }
  }
  EXPECT_GE(n_differ, 5);  // the fixture holds texts where the library's tables are older
}

TEST(TextNormalizerForms, EveryCodePointAFormChangesAsUnicodedata) {
  for (const char* form : kForms) {
    const json& sweep = forms()["sweeps"][form];
    ASSERT_TRUE(sweep.is_object()) << form;
    const std::string text = sweep["text"], want = sweep["normalized"];
    ASSERT_GT(text.size(), 2000u) << form;
    const std::string got = normalizer({{"type", form}}).normalize(text);
    if (got == want) continue;
    // Name the first code point that differs, and what is around it.
    const std::u32string a = utf8_to_u32(got), b = utf8_to_u32(want);
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    const size_t from = i < 8 ? 0 : i - 8;
    ADD_FAILURE() << form << ": differs at code point " << i << ": got " << escaped(u32_to_utf8(a.substr(from, 16)))
                  << ", want " << escaped(u32_to_utf8(b.substr(from, 16)));
  }
}

// Every Hangul syllable decomposes to its jamo and composes back; NFC is NFD's inverse on them.
TEST(TextNormalizerForms, HangulSyllablesRoundTrip) {
  std::u32string syllables;
  for (char32_t cp = 0xAC00; cp < 0xAC00 + 11172; ++cp) syllables += cp;
  const std::string text = u32_to_utf8(syllables);
  const std::string nfd = normalizer({{"type", "NFD"}}).normalize(text);
  EXPECT_EQ(utf8_to_u32(nfd).size(), 11172u * 2 + 11172u / 28 * 27);  // LV for one in 28, LVT else
  EXPECT_EQ(normalizer({{"type", "NFC"}}).normalize(nfd), text);
  EXPECT_EQ(normalizer({{"type", "NFKC"}}).normalize(nfd), text);
}

TEST(TextNormalizerForms, ComposeAfterTheStepsBefore) {
  // Lowercase first: "É" becomes "é" (precomposed), Replace puts a mark after an "e" and NFC joins them.
  const TextNormalizer n = normalizer(json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": "'"}, "content": "\u0301"}, {"type": "NFC"}]})"));
  EXPECT_EQ(n.normalize("\u00c9cole e'te'"), "\u00e9cole \u00e9t\u00e9");
}

TEST(TextNormalizerForms, UnknownTypesListTheForms) {
  auto n = TextNormalizer::parse({{"type", "Nmt"}}, "tokenizer.json");
  ASSERT_FALSE(n.has_value());
  EXPECT_EQ(n.status().code(), StatusCode::unsupported);
  EXPECT_NE(n.status().message().find("NFD, NFKD, NFC, NFKC"), std::string::npos) << n.status().message();
}

}  // namespace
}  // namespace brigade
