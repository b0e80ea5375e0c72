// CompiledGrammar + GrammarMatcher on their own: GBNF syntax (llama.cpp's grammars/README.md),
// the errors with their line and column, left recursion, the bounds, byte-level UTF-8 and the
// state's value semantics. Agreement with llama.cpp's own grammar sampler over real vocabularies
// is grammar_llamacpp_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

#include "core/grammar.h"
#include "core/grammar_matcher.h"
#include "core/token_trie.h"

namespace brigade {
namespace {

std::shared_ptr<const CompiledGrammar> compile_ok(const std::string& text) {
  auto g = CompiledGrammar::compile(text);
  EXPECT_TRUE(g.has_value()) << text << "\n" << g.status().to_string();
  return g.has_value() ? *g : nullptr;
}

std::string error_of(const std::string& text) {
  auto g = CompiledGrammar::compile(text);
  return g.has_value() ? "(compiled)" : g.status().message();
}

// Whether `text` is a whole derivation / a prefix of one.
bool matches(const CompiledGrammar& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.feed(text) && m.complete();
}
bool prefix(const CompiledGrammar& g, const std::string& text) { return GrammarMatcher(g).feed(text); }

TEST(GrammarTest, LiteralsClassesAndRepetition) {
  auto g = compile_ok(R"(
# a comment
root ::= "id-" [0-9]{2,3} suffix?   # trailing comment
suffix ::= ("-" [a-z]+)
)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(*g, "id-12"));
  EXPECT_TRUE(matches(*g, "id-123-abc"));
  EXPECT_FALSE(matches(*g, "id-1"));
  EXPECT_FALSE(matches(*g, "id-1234"));
  EXPECT_FALSE(matches(*g, "id-12-"));
  EXPECT_TRUE(prefix(*g, "id-12-"));
  EXPECT_FALSE(prefix(*g, "id-x"));
}

TEST(GrammarTest, EscapesAndUnicode) {
  auto g = compile_ok(R"(root ::= "\x41\u00e9\U0001F600\n\t\"\\" [\[\]\-] [ぁ-ゟ]+ .)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(*g, "A\xC3\xA9\xF0\x9F\x98\x80\n\t\"\\-\xE3\x81\x82\xE3\x81\x84z"));
  EXPECT_TRUE(matches(*g, "A\xC3\xA9\xF0\x9F\x98\x80\n\t\"\\]\xE3\x81\x82\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(*g, "A\xC3\xA9\xF0\x9F\x98\x80\n\t\"\\]a!"));
  // An unfinished character: a prefix, but not complete, and a wrong continuation byte fails.
  GrammarMatcher m(*g);
  EXPECT_TRUE(m.feed(std::string("A\xC3")));
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.feed(uint8_t{'x'}));
}

TEST(GrammarTest, NegatedClassesAndAnyChar) {
  auto g = compile_ok("root ::= \"\\\"\" [^\"\\\\\\n]* \"\\\"\"");  // root ::= "\"" [^"\\\n]* "\""
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(*g, "\"h\xC3\xA9llo\""));
  EXPECT_FALSE(matches(*g, "\"a\nb\""));
  EXPECT_FALSE(prefix(*g, "\"a\\"));
  // A lead byte is kept while some completion is allowed: [^é] still takes è.
  auto ne = compile_ok("root ::= [^\\u00e9]");
  ASSERT_TRUE(ne);
  EXPECT_TRUE(matches(*ne, "\xC3\xA8"));
  EXPECT_FALSE(matches(*ne, "\xC3\xA9"));
  EXPECT_FALSE(prefix(*ne, std::string("\xC3\xA9")));
  // NUL and a stray continuation byte are refused, as llama.cpp's decoder refuses them.
  auto any = compile_ok("root ::= .*");
  ASSERT_TRUE(any);
  EXPECT_FALSE(prefix(*any, std::string("a\0", 2)));
  EXPECT_FALSE(prefix(*any, "\x80"));
  EXPECT_TRUE(matches(*any, ""));
}

TEST(GrammarTest, MultiLineRulesAndAlternatives) {
  auto g = compile_ok(
      "root ::= (\n"
      "    \"a\" item\n"
      "  | \"b\"\n"
      ") end\n"
      "item ::= \"x\" |\n"
      "  \"y\"\n"
      "end ::= | \"!\"\n");
  ASSERT_TRUE(g);
  for (const char* ok : {"ax", "ay!", "b", "b!"}) EXPECT_TRUE(matches(*g, ok)) << ok;
  for (const char* bad : {"a", "bx", "ax!!"}) EXPECT_FALSE(matches(*g, bad)) << bad;
}

TEST(GrammarTest, RepetitionBounds) {
  auto g = compile_ok("root ::= \"ab\"{2} x{0,2} y{1,} z*\nx ::= \"x\"\ny ::= \"y\"\nz ::= \"z\"");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(*g, "ababy"));
  EXPECT_TRUE(matches(*g, "ababxxyyyzz"));
  EXPECT_FALSE(matches(*g, "abxy"));
  EXPECT_FALSE(matches(*g, "ababxxxy"));
  EXPECT_FALSE(matches(*g, "ababx"));
  // Above 2000 the maximum is dropped (llama.cpp); a count above 2000 is refused.
  auto open = compile_ok("root ::= \"a\"{1,5000}");
  ASSERT_TRUE(open);
  EXPECT_TRUE(matches(*open, std::string(3000, 'a')));
  EXPECT_NE(error_of("root ::= \"a\"{2001}").find("above 2000"), std::string::npos);
}

TEST(GrammarTest, ErrorsSayWhereAndWhat) {
  EXPECT_EQ(error_of("root ::= \"a\" foo\n"), "grammar line 1, column 14: rule 'foo' is used but never defined");
  EXPECT_NE(error_of("item ::= \"a\"\n").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("item ::= \"a\"\n").find("item"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\"").rfind("grammar line 2, column 1: rule 'root' is defined twice", 0), 0u);
  EXPECT_EQ(error_of("root ::= \"a\n").rfind("grammar line 1, column 10: unterminated literal", 0), 0u);
  EXPECT_EQ(error_of("root ::= [a-z\n").rfind("grammar line 1, column 10", 0), 0u);
  EXPECT_EQ(error_of("root ::= \"\\q\"").rfind("grammar line 1, column 11: unknown escape '\\q'", 0), 0u);
  EXPECT_EQ(error_of("root = \"a\"").rfind("grammar line 1, column 6: expecting '::='", 0), 0u);
  EXPECT_EQ(error_of("root ::= (\"a\"").rfind("grammar line 1, column 14: expecting ')'", 0), 0u);
  EXPECT_EQ(error_of("root ::= * \"a\"").rfind("grammar line 1, column 10: '*' has nothing before it", 0), 0u);
  EXPECT_EQ(error_of("root ::= [z-a]").rfind("grammar line 1, column 12: the range's end", 0), 0u);
  EXPECT_EQ(error_of("root ::= []").rfind("grammar line 1, column 10: an empty character class", 0), 0u);
  EXPECT_EQ(error_of("root ::= <think>").rfind("grammar line 1, column 10: token terms", 0), 0u);
  EXPECT_EQ(error_of("root ::= \"a\" \"b\" )").rfind("grammar line 1, column 18: unexpected ')'", 0), 0u);
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}").rfind("grammar line 1, column 13: the repetition's maximum", 0), 0u);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("  # only a comment\n").find("empty"), std::string::npos);
  // Columns count characters, not bytes.
  EXPECT_EQ(error_of("root ::= \"é\" x").rfind("grammar line 1, column 14", 0), 0u);
}

TEST(GrammarTest, LeftRecursionIsRefusedWithTheCycle) {
  // Direct, and through a rule with an empty alternative (llama.cpp refuses both).
  EXPECT_EQ(error_of("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]").rfind(
                "grammar line 2, column 1: left recursion: rule 'expr' can reach itself before reading any character (expr -> expr)", 0),
            0u);
  EXPECT_NE(error_of("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= | \"b\"").find("(a -> a)"), std::string::npos);
  EXPECT_NE(error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"").find("left recursion"), std::string::npos);
  // Through a rule that derives "" only indirectly, where the stack would grow (llama.cpp hangs).
  EXPECT_NE(error_of("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= c\nc ::= | \"c\"").find("can match nothing"), std::string::npos);
  // Right recursion and repetition of items that may be empty (tail position) are fine.
  auto g = compile_ok("root ::= item root | \"\"\nitem ::= \"a\"? \"b\"\nlist ::= (\"x\"?)*");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(*g, "babab"));
  EXPECT_FALSE(matches(*g, "aa"));
}

TEST(GrammarTest, NestingKeepsOneStackPerParse) {
  auto g = compile_ok(R"(root ::= value
value ::= "[" ws (value ("," ws value)*)? "]" ws | [0-9]+ ws
ws ::= [ ]*)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(*g, "[1, [2,[3 ]], []]"));
  EXPECT_FALSE(matches(*g, "[1, [2,[3 ]], []"));
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.feed(std::string(100, '[')));
  EXPECT_LE(m.n_stacks(), 4u);
  EXPECT_FALSE(m.overflowed());
  // Past kMaxDepth the deeper parse is cut off, and overflowed() says so.
  GrammarMatcher deep(*g);
  EXPECT_FALSE(deep.feed(std::string(GrammarMatcher::kMaxDepth, '[')));
  EXPECT_TRUE(deep.overflowed());
}

TEST(GrammarTest, AmbiguityIsBounded) {
  // Every split of a run of 'a's between 12 optional runs is a parse: the stack sets stay bounded.
  std::string rule = "root ::=";
  for (int i = 0; i < 12; ++i) rule += " \"a\"*";
  rule += " \"b\"";
  auto g = compile_ok(rule);
  ASSERT_TRUE(g);
  GrammarMatcher m(*g);
  EXPECT_TRUE(m.feed(std::string(40, 'a')));
  EXPECT_LE(m.n_stacks(), GrammarMatcher::kMaxStacks);
  EXPECT_TRUE(m.feed(uint8_t{'b'}));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.finished());
}

TEST(GrammarTest, AGrammarTooAmbiguousAtItsStartIsRefused) {
  // 1000 nested optional copies of an item that may be empty: every count of them is a parse.
  EXPECT_NE(error_of("root ::= x{0,1000} \"b\"\nx ::= \"a\"?").find("too ambiguous"), std::string::npos);
}

TEST(GrammarTest, StatesAreValuesAndMaskTokens) {
  auto g = compile_ok(R"(root ::= "yes" | "no" | "maybe" [!]*)");
  ASSERT_TRUE(g);
  GrammarMatcher a(*g), b(*g);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  a.feed(uint8_t{'m'});
  EXPECT_NE(a, b);
  b.feed(uint8_t{'m'});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());

  const std::vector<std::string> vocab = {"", "y", "yes", "no", "n", "maybe", "may", "be!", "!", "!!", "x", "yes!"};
  auto trie = std::make_shared<const TokenTrie>(vocab);
  MaskCache<GrammarMatcher> masks(trie);
  GrammarMatcher m(*g);
  std::vector<uint8_t> want = {0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
  EXPECT_EQ(masks.allowed(m), want);
  m.feed("may");
  want = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  EXPECT_EQ(masks.allowed(m), want);
  m.feed("be!");
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.finished());
  want = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0};
  EXPECT_EQ(masks.allowed(m), want);
  GrammarMatcher yes(*g);
  yes.feed("yes");
  EXPECT_TRUE(yes.finished());  // nothing can follow: only the end ids remain
  EXPECT_EQ(masks.allowed(yes), std::vector<uint8_t>(vocab.size(), 0));
}

}  // namespace
}  // namespace brigade
