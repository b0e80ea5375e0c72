// SchemaMatcher and CompiledSchema: against the `jsonschema` package's verdicts on generated
// instances (tests/fixtures/json_schema/cases.json, written by scripts/make_schema_fixtures.py),
// random walks that never reach a dead end, TokenTrie masks against brute force, the compile
// errors, and guided_choice.
#include "core/schema_matcher.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <string>

#include "core/token_trie.h"

namespace brigade {
namespace {

using json = nlohmann::ordered_json;  // keeps the schemas' property order

std::shared_ptr<const CompiledSchema> compile_ok(const std::string& text) {
  auto s = CompiledSchema::compile(text);
  EXPECT_TRUE(s.has_value()) << text << ": " << s.status().to_string();
  return s.has_value() ? *s : nullptr;
}

// Bytes accepted before the first refusal (= s.size() when all were).
size_t feed_all(SchemaMatcher& m, const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!m.feed(static_cast<uint8_t>(s[i]))) return i;
  return s.size();
}

bool accepts(const CompiledSchema& schema, const std::string& s) {
  SchemaMatcher m(schema);
  return feed_all(m, s) == s.size() && m.complete();
}

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "maxItems": 2},
    "kind": {"anyOf": [{"const": "x"}, {"type": "number"}]}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

json load_cases() {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/json_schema/cases.json");
  if (!in) return json();
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// The jsonschema package's verdicts: every valid text (and each of its prefixes) is accepted and
// complete at its end; every invalid one is refused or incomplete.
TEST(SchemaMatcher, AgreesWithTheJsonschemaPackage) {
  const json cases = load_cases();
  ASSERT_TRUE(cases.is_array() && !cases.empty()) << "tests/fixtures/json_schema/cases.json (scripts/make_schema_fixtures.py)";
  size_t n_valid = 0, n_invalid = 0;
  for (const json& c : cases) {
    const std::string name = c["name"];
    auto s = compile_ok(c["schema"].dump());
    ASSERT_TRUE(s) << name;
    for (const std::string text : c["valid"]) {
      SchemaMatcher m(*s);
      const size_t fed = feed_all(m, text);
      EXPECT_EQ(fed, text.size()) << name << ": refused at byte " << fed << " of " << text;
      EXPECT_TRUE(fed < text.size() || m.complete()) << name << ": incomplete " << text;
      ++n_valid;
    }
    for (const std::string text : c["invalid"]) {
      EXPECT_FALSE(accepts(*s, text)) << name << ": accepted the invalid " << text;
      ++n_invalid;
    }
  }
  EXPECT_GT(n_valid, 300u);
  EXPECT_GT(n_invalid, 300u);
}

// From every state a random walk reaches, some byte continues or the instance is complete.
TEST(SchemaMatcher, NeverReachesADeadEnd) {
  const json cases = load_cases();
  ASSERT_TRUE(cases.is_array());
  std::vector<std::string> schemas;
  for (const json& c : cases) schemas.push_back(c["schema"].dump());
  schemas.push_back(kPerson);
  schemas.push_back(R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 95, "maximum": 105},
      "b": {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "string", "minLength": 2, "maxLength": 2}},
      "c": {"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x"]}},
      "required": ["a", "b", "c"], "additionalProperties": {"enum": ["ab", "abc", 1]}})");
  std::mt19937_64 rng(11);
  for (const std::string& text : schemas) {
    auto s = compile_ok(text);
    ASSERT_TRUE(s);
    for (int walk = 0; walk < 40; ++walk) {
      SchemaMatcher m(*s);
      std::string path;
      for (int step = 0; step < 400; ++step) {
        std::vector<uint8_t> next;
        for (int b = 0; b < 256; ++b) {
          SchemaMatcher c = m;
          if (c.feed(static_cast<uint8_t>(b))) next.push_back(static_cast<uint8_t>(b));
        }
        ASSERT_TRUE(!next.empty() || m.complete()) << "dead end after " << path << " in " << text;
        if (next.empty() || (m.complete() && rng() % 4 == 0)) break;
        // Prefer structure over long strings: a closing byte when one is allowed, half the time.
        uint8_t pick = next[rng() % next.size()];
        for (uint8_t b : next)
          if ((b == '"' || b == '}' || b == ']') && rng() % 2 == 0) pick = b;
        ASSERT_TRUE(m.feed(pick));
        path += static_cast<char>(pick);
      }
    }
  }
}

// TokenTrie::allowed with a SchemaMatcher equals feeding each token to a copy, and MaskCache
// gives the same masks.
TEST(SchemaMatcher, TrieMasksMatchBruteForce) {
  auto s = compile_ok(kPerson);
  ASSERT_TRUE(s);
  std::mt19937_64 rng(5);
  const std::string alphabet = "{}[]:,\" \n-.e0123456789abgmnetrsxul\xc3\xa9";
  std::vector<std::string> pieces(2000);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (rng() % 20 == 0) continue;
    if (i > 0 && rng() % 3 == 0) pieces[i] = pieces[rng() % i];
    for (int n = 1 + static_cast<int>(rng() % 5); n > 0; --n) pieces[i] += alphabet[rng() % alphabet.size()];
  }
  for (const char* word : {"\"name\"", "\"age\"", "\"tags\"", "\"kind\"", ": ", "\"x\"", "null", "]}"})
    pieces.push_back(word);
  auto trie = std::make_shared<const TokenTrie>(pieces);
  MaskCache<SchemaMatcher> cache(trie);
  const std::string doc = R"({"name": "b\u00e9", "age": 42, "tags": [null, 3], "kind": -1.5})";
  SchemaMatcher m(*s);
  std::vector<uint8_t> got;
  for (size_t p = 0; p <= doc.size(); ++p) {
    trie->allowed(m, got);
    for (size_t id = 0; id < pieces.size(); ++id) {
      SchemaMatcher c = m;
      const bool want = !pieces[id].empty() && c.feed(pieces[id]);
      ASSERT_EQ(got[id], want ? 1 : 0) << "token " << pieces[id] << " after " << doc.substr(0, p);
    }
    ASSERT_EQ(cache.allowed(m), got);
    if (p < doc.size()) {
      ASSERT_TRUE(m.feed(static_cast<uint8_t>(doc[p]))) << doc.substr(0, p + 1);
    }
  }
  const size_t misses = cache.misses();
  ASSERT_EQ(cache.allowed(m), got);  // the same state again: from the cache
  EXPECT_EQ(cache.misses(), misses);
  EXPECT_GT(cache.hits(), 0u);
}

TEST(SchemaMatcher, AcceptsInstancesInSchemaOrder) {
  auto s = compile_ok(kPerson);
  ASSERT_TRUE(s);
  EXPECT_TRUE(accepts(*s, R"({"name": "ab", "age": 7})"));
  EXPECT_TRUE(accepts(*s, R"({"name":"ab","age":150,"tags":["a",null]})"));
  EXPECT_TRUE(accepts(*s, R"({"name":"ab","age":0,"kind":"x"})"));
  EXPECT_TRUE(accepts(*s, R"({"name":"ab","age":0,"kind":-1.5e3})"));
  EXPECT_TRUE(accepts(*s, "{\n  \"name\": \"\xc3\xa9\\n\",\n  \"age\": 12\n}"));
  EXPECT_FALSE(accepts(*s, R"({"age": 7, "name": "ab"})")) << "schema order";
  EXPECT_FALSE(accepts(*s, R"({"name": "ab"})")) << "age is required";
  EXPECT_FALSE(accepts(*s, R"({"name": "", "age": 1})")) << "minLength";
  EXPECT_FALSE(accepts(*s, R"({"name": "123456789", "age": 1})")) << "maxLength";
  EXPECT_FALSE(accepts(*s, R"({"name": "a", "age": 151})"));
  EXPECT_FALSE(accepts(*s, R"({"name": "a", "age": -1})"));
  EXPECT_FALSE(accepts(*s, R"({"name": "a", "age": 1.0})")) << "integers are written without a fraction";
  EXPECT_FALSE(accepts(*s, R"({"name": "a", "age": 1, "x": 1})")) << "additionalProperties false";
  EXPECT_FALSE(accepts(*s, R"({"name":"ab","age":1,"tags":["a","b","a"]})")) << "maxItems";
  EXPECT_FALSE(accepts(*s, R"({"name":"ab","age":1,"tags":["c"]})")) << "enum";
  EXPECT_FALSE(accepts(*s, R"({"name":"ab","age":1,"kind":"y"})"));
  EXPECT_FALSE(accepts(*s, R"({"name": "\ud83d\ude00", "age": 1})")) << "surrogate escapes";
  SchemaMatcher m(*s);
  EXPECT_FALSE(m.feed(std::string(R"({"nam"x)")));
}

TEST(SchemaMatcher, AdditionalPropertiesAndAnyValues) {
  auto s = compile_ok(R"({"type":"object","properties":{"a":{"type":"integer"}},
                          "additionalProperties":{"type":"string"}})");
  ASSERT_TRUE(s);
  EXPECT_TRUE(accepts(*s, R"({"a": 1, "b": "x", "ab": "y"})"));
  EXPECT_TRUE(accepts(*s, R"({"b": "x"})"));
  EXPECT_TRUE(accepts(*s, R"({})"));
  EXPECT_FALSE(accepts(*s, R"({"b": "x", "a": 1})")) << "declared keys come first";
  EXPECT_FALSE(accepts(*s, R"({"b": 1})"));
  auto any = compile_ok(R"({"type":"object","properties":{"v":true},"required":["v"]})");
  ASSERT_TRUE(any);
  EXPECT_TRUE(accepts(*any, R"({"v": {"x": [1, "2", {"y": null}], "z": true}})"));
  EXPECT_FALSE(accepts(*any, R"({"v": {"x": [1, "2", {"y": nul}]}})"));
}

TEST(SchemaMatcher, RecursiveRefsAreBoundedByDepth) {
  auto s = compile_ok(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}})");
  ASSERT_TRUE(s);
  EXPECT_TRUE(accepts(*s, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]})"));
  std::string deep;
  for (int i = 0; i < 30; ++i) deep += R"({"v":1,"kids":[)";
  SchemaMatcher m(*s);
  EXPECT_LT(feed_all(m, deep), deep.size()) << "nesting stops at kMaxDepth";
}

TEST(SchemaMatcher, RootScalarsAndLiterals) {
  auto i = compile_ok(R"({"type": "integer", "minimum": 10, "maximum": 20})");
  ASSERT_TRUE(i);
  EXPECT_TRUE(accepts(*i, "15"));
  EXPECT_TRUE(accepts(*i, "20"));
  EXPECT_FALSE(accepts(*i, "1"));
  EXPECT_FALSE(accepts(*i, "21"));
  SchemaMatcher m(*i);
  EXPECT_FALSE(m.feed('3')) << "no integer in [10, 20] starts with 3";
  auto n = compile_ok(R"({"enum": [1, 12, "a"]})");
  ASSERT_TRUE(n);
  EXPECT_TRUE(accepts(*n, "1"));
  EXPECT_TRUE(accepts(*n, "12"));
  EXPECT_TRUE(accepts(*n, "\"a\""));
  EXPECT_FALSE(accepts(*n, "13"));
  auto neg = compile_ok(R"({"type": "integer", "maximum": -5})");
  ASSERT_TRUE(neg);
  EXPECT_TRUE(accepts(*neg, "-5"));
  EXPECT_TRUE(accepts(*neg, "-123"));
  EXPECT_FALSE(accepts(*neg, "-4"));
  EXPECT_FALSE(accepts(*neg, "5"));
}

TEST(SchemaMatcher, GuidedChoice) {
  auto c = CompiledSchema::choice({"yes", "no", "yes!", "maybe so"});
  ASSERT_TRUE(c.has_value());
  for (const char* ok : {"yes", "no", "yes!", "maybe so"}) EXPECT_TRUE(accepts(**c, ok)) << ok;
  for (const char* bad : {"ye", " yes", "\"yes\"", "yes!!", "No", ""}) EXPECT_FALSE(accepts(**c, bad)) << bad;
  EXPECT_FALSE(CompiledSchema::choice({}).has_value());
}

// A choice is raw text: a leading blank is its own byte, not JSON whitespace (vLLM's
// choice_as_grammar makes each choice a literal string of an EBNF alternation, blanks included).
TEST(SchemaMatcher, GuidedChoiceMayBeginWithABlank) {
  auto c = CompiledSchema::choice({" functools[]", "\n\nx", "\tab", "\xc3\xbc", " \xe6\x97\xa5"});
  ASSERT_TRUE(c.has_value());
  for (const char* ok : {" functools[]", "\n\nx", "\tab", "\xc3\xbc", " \xe6\x97\xa5"}) EXPECT_TRUE(accepts(**c, ok)) << ok;
  for (const char* bad : {"functools[]", "  functools[]", "\nx", "ab", " \xc3\xbc", ""}) EXPECT_FALSE(accepts(**c, bad)) << bad;
}

// Cycles of anyOf/$ref that read no byte contribute nothing; deep nesting is refused, not a
// stack overflow.
TEST(CompiledSchema, CyclesAndDeepNestingAreSafe) {
  auto s = compile_ok(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}, {"anyOf": [{"$ref": "#"}, {"const": 1}]}]})");
  ASSERT_TRUE(s);
  EXPECT_TRUE(accepts(*s, "null"));
  EXPECT_TRUE(accepts(*s, "1"));
  EXPECT_FALSE(accepts(*s, "2"));
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += R"({"items":)";
  deep += "true";
  for (int i = 0; i < 100000; ++i) deep += "}";
  auto refused = CompiledSchema::compile(deep);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("nest more than"), std::string::npos) << refused.status().message();
}

TEST(CompiledSchema, RefusesWhatItDoesNotEnforceByName) {
  struct Case {
    const char* schema;
    const char* says;
  };
  const Case cases[] = {
      {R"({"type": "string", "pattern": "(a)\\1"})", "pattern: regex: backreferences"},
      {R"({"not": {"type": "null"}})", "'not'"},
      {R"({"if": {}, "then": {}})", "'if'"},
      {R"({"type": "number", "minimum": 0})", "'minimum' is supported on type integer only"},
      {R"({"$ref": "#/$defs/missing"})", "does not name a schema"},
      {R"({"$ref": "http://example.com/s.json"})", "does not name a schema"},
      {R"({"type": "object", "required": ["a"]})", "required property \"a\" is not listed"},
      {R"({"type": "frog"})", "'type' must be one of"},
      {R"({"allOf": [{}, {}]})", "allOf is supported with exactly one schema"},
      {R"({"anyOf": [{}], "type": "string"})", "'anyOf' beside 'type'"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "no instance"},
      {R"({"$ref": "#/$defs/a", "$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/a"}},
          "required": ["b"]}}})", "no instance"},
      {R"({"enum": ["a"], "type": "integer"})", "no instance"},
      {"[1]", "must be an object or a boolean"},
      {R"({"$ref": "#"})", "no instance"},
      {R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})", "no instance"},
      {"{", "not valid JSON"},
  };
  for (const Case& c : cases) {
    auto s = CompiledSchema::compile(c.schema);
    ASSERT_FALSE(s.has_value()) << c.schema;
    EXPECT_NE(s.status().to_string().find(c.says), std::string::npos) << s.status().to_string();
  }
  auto annotated = compile_ok(R"({"title": "T", "description": "d", "type": "string", "format": "hostname",
                                  "default": "x", "examples": ["y"], "$schema": "https://json-schema.org/draft/2020-12/schema"})");
  ASSERT_TRUE(annotated);
  EXPECT_TRUE(accepts(*annotated, "\"not a host\"")) << "a format brigade does not enforce is an annotation";
}

}  // namespace
}  // namespace brigade
