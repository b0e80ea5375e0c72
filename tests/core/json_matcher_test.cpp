// JsonMatcher against nlohmann::json's parser (the reference): on documents it writes and on
// random byte strings, a whole string is accepted and complete exactly when the reference
// parses it as an object; every prefix of a valid document is accepted.
#include "core/json_matcher.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

namespace brigade {
namespace {

using nlohmann::json;

// fed: bytes accepted before the first refusal (= s.size() when all were).
size_t feed_all(JsonMatcher& m, const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!m.feed(static_cast<uint8_t>(s[i]))) return i;
  return s.size();
}

bool matcher_accepts(const std::string& s) {
  JsonMatcher m;
  return feed_all(m, s) == s.size() && m.complete();
}

bool reference_accepts(const std::string& s) {
  json j = json::parse(s, nullptr, /*allow_exceptions=*/false);
  return !j.is_discarded() && j.is_object();
}

TEST(JsonMatcher, AcceptsDocumentsAndEveryPrefix) {
  for (const std::string doc :
       {R"({})", R"( {"a": 1} )", R"({"k":[1,-2.5e+3,0,0.25,1E9,true,false,null,"x\n\u00e9\"",{}]})",
        "{\"utf8\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", R"({"a":{"b":{"c":[[],[[]]]}}})", R"({"":""})"}) {
    JsonMatcher m;
    for (size_t i = 0; i < doc.size(); ++i) {
      ASSERT_TRUE(m.feed(static_cast<uint8_t>(doc[i]))) << doc << " at byte " << i;
      EXPECT_EQ(m.complete(), reference_accepts(doc.substr(0, i + 1)) && doc.find_first_not_of(" ", i + 1) == std::string::npos)
          << doc.substr(0, i + 1);
    }
    EXPECT_TRUE(m.complete()) << doc;
    EXPECT_TRUE(reference_accepts(doc)) << doc;
  }
}

TEST(JsonMatcher, RefusesAtTheFirstBadByte) {
  struct Case {
    std::string text;
    size_t fed;  // bytes accepted before the refusal
  };
  for (const Case& c : {Case{"[1]", 0}, Case{"\"x\"", 0}, Case{"{a", 1}, Case{"{\"a\" 1", 5}, Case{"{\"a\":01", 6},
                        Case{"{\"a\":+1", 5}, Case{"{\"a\":.5", 5}, Case{"{\"a\":1.}", 7}, Case{"{\"a\":1e}", 7},
                        Case{"{\"a\":tru}", 8}, Case{"{\"a\":[1,]}", 8}, Case{"{\"a\":1,}", 7}, Case{"{\"a\":1]", 6},
                        Case{"{\"a\":\"\x01\"}", 6}, Case{"{\"a\":\"\\x\"}", 7}, Case{"{\"a\":\"\\u12g4\"}", 10},
                        Case{"{\"a\":\"\xc0\xaf\"}", 6}, Case{"{\"a\":\"\xed\xa0\x80\"}", 7},
                        Case{"{\"a\":\"\xf4\x90\x80\x80\"}", 7}, Case{"{\"a\":\"\xe2\x82\"}", 8}, Case{"{} x", 3},
                        Case{"{\"a\":1}}", 7}}) {
    JsonMatcher m;
    EXPECT_EQ(feed_all(m, c.text), c.fed) << c.text;
    EXPECT_FALSE(m.feed('{')) << "a refused matcher stays refused: " << c.text;
  }
}

TEST(JsonMatcher, LimitsBlankRunsAndDepthButNotTrailingBlanks) {
  const size_t cap = JsonMatcher::kMaxBlank;
  std::string blanks(cap, ' ');
  blanks.append("{").append(cap, '\n');
  JsonMatcher m;
  EXPECT_EQ(feed_all(m, blanks), 1 + 2 * cap);
  EXPECT_FALSE(m.feed(' '));
  std::string trailing("{}");
  trailing.append(100, ' ');
  JsonMatcher done;
  EXPECT_EQ(feed_all(done, trailing), 102u);
  EXPECT_TRUE(done.complete());
  std::string opens("{\"a\":");
  opens.append(JsonMatcher::kMaxDepth - 1, '[');
  JsonMatcher deep;
  std::string one_more = opens;
  one_more.push_back('[');
  EXPECT_EQ(feed_all(deep, one_more), opens.size());
}

// Random values written by the reference with random indentation and separators: accepted,
// complete, and any single-byte change is judged as the reference judges it.
TEST(JsonMatcher, AgreesWithTheReferenceOnRandomDocumentsAndMutations) {
  std::mt19937_64 rng(7);
  std::function<json(int)> value = [&](int depth) -> json {
    switch (rng() % (depth > 0 ? 8 : 6)) {
      case 0: return nullptr;
      case 1: return static_cast<bool>(rng() & 1);
      case 2: return static_cast<int64_t>(rng() % 2001) - 1000;
      case 3: return std::ldexp(static_cast<double>(rng() % 100000) - 50000, static_cast<int>(rng() % 40) - 20);
      case 4:
      case 5: {
        static const char* words[] = {"", "a", "hello world", "q\"uote", "back\\slash", "tab\t", "\xc3\xa9t\xc3\xa9", "\xf0\x9f\x98\x80", "\x01"};
        return std::string(words[rng() % std::size(words)]);
      }
      case 6: {
        json a = json::array();
        for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) a.push_back(value(depth - 1));
        return a;
      }
      default: {
        json o = json::object();
        for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) o[std::string(1, static_cast<char>('k' + rng() % 5))] = value(depth - 1);
        return o;
      }
    }
  };
  const std::string alphabet = "{}[]:,\" \n\\-+.eE0123456789tfalsenurx\x01\xc3\xa9\xff";
  int agreed_valid = 0;
  for (int i = 0; i < 3000; ++i) {
    json doc = json::object();
    for (int k = 0, n = static_cast<int>(rng() % 4); k < n; ++k) doc[std::string(1, static_cast<char>('a' + k))] = value(3);
    const int indent = static_cast<int>(rng() % 3) - 1;  // -1: compact
    std::string text = doc.dump(indent);
    ASSERT_TRUE(matcher_accepts(text)) << text;
    for (size_t p = 1; p < text.size(); ++p) {
      JsonMatcher m;
      ASSERT_EQ(feed_all(m, text.substr(0, p)), p) << "prefix of " << text;
    }
    std::string mutated = text;
    const size_t at = rng() % mutated.size();
    switch (rng() % 3) {
      case 0: mutated[at] = alphabet[rng() % alphabet.size()]; break;
      case 1: mutated.erase(at, 1); break;
      default: mutated.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
    }
    // The reference refuses numbers beyond a double's range (out_of_range 406), which the JSON
    // grammar allows and the matcher accepts: such cases say nothing about the grammar.
    bool overflow = false;
    try {
      const json parsed = json::parse(mutated);
      EXPECT_FALSE(parsed.is_discarded());
    } catch (const json::out_of_range&) {
      overflow = true;
    } catch (const json::exception&) {
    }
    if (overflow) continue;
    const bool ref = reference_accepts(mutated);
    // The reference takes lone surrogate escapes the matcher does not model, and any run of
    // blanks; neither can come from these mutations (no 'd', no 17-blank runs in dump(1)).
    EXPECT_EQ(matcher_accepts(mutated), ref) << mutated;
    agreed_valid += ref;
  }
  EXPECT_GT(agreed_valid, 300) << "mutations that stay valid are part of the check";
}

}  // namespace
}  // namespace brigade
