// CompiledRegex + RegexMatcher against Python: tests/fixtures/regex/cases.json (written by
// scripts/make_regex_fixtures.py) labels each text with re.fullmatch (a whole match) and the
// `regex` package's partial match and known matches (a prefix of one); the matcher must agree on every case, and
// refuse every pattern no finite automaton can match. Also the UTF-8 range encoder against a
// brute force over all code points, and masks over a vocabulary.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/regex_dfa.h"
#include "core/regex_matcher.h"
#include "core/token_trie.h"
#include "core/utf8_ranges.h"

namespace brigade {
namespace {

nlohmann::json load_cases() {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/regex/cases.json");
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return doc;
}

std::shared_ptr<const CompiledRegex> compile_ok(const std::string& pattern) {
  auto re = CompiledRegex::compile(pattern);
  EXPECT_TRUE(re.has_value()) << pattern << ": " << re.status().to_string();
  return re.has_value() ? *re : nullptr;
}

TEST(RegexTest, AgreesWithPythonOnEveryFixtureCase) {
  const nlohmann::json doc = load_cases();
  ASSERT_TRUE(doc.is_object() && doc.contains("patterns")) << "tests/fixtures/regex/cases.json (scripts/make_regex_fixtures.py)";
  size_t n = 0;
  for (const auto& p : doc["patterns"]) {
    const std::string pattern = p["pattern"];
    auto re = compile_ok(pattern);
    if (!re) continue;
    for (const auto& c : p["cases"]) {
      const std::string text = c["text"];
      RegexMatcher m(*re);
      const bool prefix = m.feed(text);
      if (c["prefix"].is_boolean()) {  // null: Python could not settle it (make_regex_fixtures.py)
        EXPECT_EQ(prefix, c["prefix"].get<bool>()) << "pattern " << pattern << " text '" << text << "' (prefix)";
      }
      EXPECT_EQ(prefix && m.complete(), c["full"].get<bool>()) << "pattern " << pattern << " text '" << text << "' (full)";
      ++n;
    }
  }
  EXPECT_GT(n, 1000u);
}

TEST(RegexTest, RefusesWhatIsNotRegularNamingTheConstruct) {
  const nlohmann::json doc = load_cases();
  ASSERT_TRUE(doc.is_object() && doc.contains("errors"));
  for (const auto& e : doc["errors"]) {
    auto re = CompiledRegex::compile(e["pattern"].get<std::string>());
    ASSERT_FALSE(re.has_value()) << e["pattern"];
    EXPECT_EQ(re.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(re.status().message().find(e["reason"].get<std::string>()), std::string::npos)
        << e["pattern"] << " -> " << re.status().message();
  }
  auto at = CompiledRegex::compile("ab(?=c)");  // the offset of the construct refused
  ASSERT_FALSE(at.has_value());
  EXPECT_NE(at.status().message().find("at offset 2"), std::string::npos) << at.status().message();
  for (const auto& p : doc["malformed"]) {
    auto re = CompiledRegex::compile(p.get<std::string>());
    EXPECT_FALSE(re.has_value()) << p;
  }
}

TEST(RegexTest, BoundsTheAutomaton) {
  // Exponential subset construction ((a|b)*a(a|b){n} needs 2^n states) is refused, not built.
  auto big = CompiledRegex::compile("(a|b)*a(a|b){20}");
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.status().message().find("too large"), std::string::npos) << big.status().message();
  auto ok = CompiledRegex::compile("(a|b)*a(a|b){5}");
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_LE((*ok)->n_states(), CompiledRegex::kMaxStates);
  EXPECT_FALSE(CompiledRegex::compile("[^\\x00-\\U0010FFFF]").has_value());  // matches nothing
}

TEST(RegexTest, Utf8SequencesEncodeExactlyTheRange) {
  const std::pair<uint32_t, uint32_t> ranges[] = {{0, 0x10FFFF}, {0x41, 0x5A}, {0x7F, 0x80}, {0x3B1, 0x2FFF},
                                                  {0xD000, 0xE0FF}, {0xFFFF, 0x10000}, {0x1F600, 0x10FFFE}};
  for (const auto& [lo, hi] : ranges) {
    std::vector<Utf8Sequence> seqs;
    utf8_sequences(lo, hi, seqs);
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x11000 ? 1 : 97)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      uint8_t b[4];
      int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      if (n == 1) b[0] = static_cast<uint8_t>(cp);
      if (n == 2) b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      if (n == 3) b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      if (n == 4) b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      for (int i = 1; i < n; ++i) b[i] = static_cast<uint8_t>(0x80 | ((cp >> (6 * (n - 1 - i))) & 0x3F));
      int hits = 0;
      for (const Utf8Sequence& s : seqs) {
        bool in = s.n == n;
        for (int i = 0; in && i < n; ++i) in = b[i] >= s.bytes[i].first && b[i] <= s.bytes[i].second;
        hits += in;
      }
      ASSERT_EQ(hits, (cp >= lo && cp <= hi) ? 1 : 0) << std::hex << "cp " << cp << " range " << lo << "-" << hi;
    }
  }
}

TEST(RegexTest, InvalidUtf8NeverMatches) {
  auto re = compile_ok(".+");
  for (std::string bad : {"\xC0\x80", "\xED\xA0\x80", "\xF5\x80\x80\x80", "\x80", "\xE0\x80\x80"}) {
    RegexMatcher m(*re);
    EXPECT_FALSE(m.feed(bad)) << "bytes of '" << bad << "'";
  }
}

TEST(RegexTest, MasksAndStops) {
  auto re = compile_ok("(yes|no)!?");
  const std::vector<std::string> pieces = {"y", "yes", "n", "no", "!", "o", "es", "x", "", "no!", "yes!!"};
  auto trie = std::make_shared<const TokenTrie>(pieces);
  MaskCache<RegexMatcher> cache(trie);
  RegexMatcher m(*re);
  auto allowed_ids = [&](const RegexMatcher& s) {
    std::vector<int> ids;
    const auto& mask = cache.allowed(s);
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i]) ids.push_back(static_cast<int>(i));
    return ids;
  };
  EXPECT_EQ(allowed_ids(m), (std::vector<int>{0, 1, 2, 3, 9}));
  ASSERT_TRUE(m.feed("no"));
  EXPECT_TRUE(m.complete());
  EXPECT_EQ(allowed_ids(m), (std::vector<int>{4}));
  ASSERT_TRUE(m.feed("!"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(allowed_ids(m).empty());  // nothing extends the match: only the end ids remain
  RegexMatcher again(*re);
  again.feed("no");
  const size_t hits = cache.hits();
  EXPECT_EQ(allowed_ids(again), (std::vector<int>{4}));
  EXPECT_EQ(cache.hits(), hits + 1);  // the same state: the same mask, from the cache
  EXPECT_FALSE(m.feed("!"));
  EXPECT_FALSE(m.complete());
}

}  // namespace
}  // namespace brigade
