// JSON Schema `pattern` and `format` on strings (SchemaMatcher over a CompiledRegex) against
// Python: tests/fixtures/regex/cases.json (scripts/make_regex_fixtures.py) holds JSON string
// texts labelled by re.fullmatch on their decoded value, and format values labelled by Python's
// datetime/uuid/email parsers. The matcher must accept exactly the matching JSON strings, only
// valid format values, and every canonical one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_schema.h"
#include "core/schema_matcher.h"
#include "core/token_trie.h"

namespace brigade {
namespace {

nlohmann::json load_cases() {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/regex/cases.json");
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// ordered_json: the schema keeps its key order (properties come in schema order).
std::shared_ptr<const CompiledSchema> compile_ok(const nlohmann::ordered_json& schema) {
  auto s = CompiledSchema::compile(schema.dump());
  EXPECT_TRUE(s.has_value()) << schema.dump() << ": " << s.status().to_string();
  return s.has_value() ? *s : nullptr;
}

bool accepts(const CompiledSchema& s, const std::string& text) {
  SchemaMatcher m(s);
  return m.feed(text) && m.complete();
}

TEST(SchemaPatternTest, JsonStringsAgreeWithPythonFullmatch) {
  const nlohmann::json doc = load_cases();
  ASSERT_TRUE(doc.is_object() && doc.contains("json")) << "tests/fixtures/regex/cases.json (scripts/make_regex_fixtures.py)";
  size_t n = 0, n_full = 0;
  for (const auto& p : doc["json"]) {
    auto schema = compile_ok({{"type", "string"}, {"pattern", p["pattern"]}});
    if (!schema) continue;
    for (const auto& c : p["cases"]) {
      const std::string text = c["text"];
      EXPECT_EQ(accepts(*schema, text), c["full"].get<bool>()) << "pattern " << p["pattern"] << " JSON text " << text;
      n_full += c["full"].get<bool>();
      ++n;
    }
  }
  EXPECT_GT(n, 200u);
  EXPECT_GT(n_full, 50u);
}

TEST(SchemaPatternTest, FormatsAcceptOnlyValidValues) {
  const nlohmann::json doc = load_cases();
  ASSERT_TRUE(doc.is_object() && doc.contains("formats"));
  std::map<std::string, std::shared_ptr<const CompiledSchema>> schemas;
  for (const auto& c : doc["formats"]) {
    const std::string fmt = c["format"];
    auto& s = schemas[fmt];
    if (!s) s = compile_ok({{"type", "string"}, {"format", fmt}});
    ASSERT_TRUE(s);
    const bool accepted = accepts(*s, nlohmann::json(c["text"]).dump());
    if (accepted) {
      EXPECT_TRUE(c["valid"].get<bool>()) << fmt << " accepted an invalid value: " << c["text"];
    }
    if (c["canonical"].get<bool>()) {
      EXPECT_TRUE(accepted) << fmt << " refused " << c["text"];
    }
  }
  EXPECT_EQ(schemas.size(), 5u);
}

TEST(SchemaPatternTest, PatternInsideObjectsWithLengthsAndEscapes) {
  auto s = compile_ok(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "code": {"type": "string", "pattern": "^[A-Z]{2}\\d+$", "maxLength": 4},
      "when": {"type": "string", "format": "date"},
      "note": {"type": "string", "pattern": "a\"b|c\\\\d|e/f", "minLength": 3}},
      "required": ["code", "when", "note"]})"));
  ASSERT_TRUE(s);
  EXPECT_TRUE(accepts(*s, R"({"code": "AB12", "when": "2024-02-29", "note": "a\"b"})"));
  EXPECT_TRUE(accepts(*s, R"({"code":"XY1","when":"2000-02-29","note":"c\\d"})"));
  EXPECT_TRUE(accepts(*s, R"({"code":"XY1","when":"2000-02-29","note":"e\/f"})"));  // \/ decodes to /
  EXPECT_FALSE(accepts(*s, R"({"code": "AB123", "when": "2024-02-29", "note": "a\"b"})"));  // maxLength
  EXPECT_FALSE(accepts(*s, R"({"code": "A1", "when": "2024-02-29", "note": "a\"b"})"));
  EXPECT_FALSE(accepts(*s, R"({"code": "AB1", "when": "2023-02-29", "note": "a\"b"})"));  // no leap day
  EXPECT_FALSE(accepts(*s, R"({"code": "AB1", "when": "2024-02-29", "note": "a\u0022b"})"));  // \u refused
  SchemaMatcher m(*s);
  EXPECT_FALSE(m.feed(R"x({"code": "A1)x"));  // refused at the byte: a digit cannot follow one letter
}

TEST(SchemaPatternTest, ErrorsNameTheKeywordAndConstruct) {
  auto lookahead = CompiledSchema::compile(R"x({"type": "object", "properties": {"x": {"type": "string", "pattern": "a(?=b)"}}})x");
  ASSERT_FALSE(lookahead.has_value());
  EXPECT_NE(lookahead.status().message().find("#/properties/x"), std::string::npos) << lookahead.status().message();
  EXPECT_NE(lookahead.status().message().find("lookaround"), std::string::npos) << lookahead.status().message();
  auto clash = CompiledSchema::compile(R"({"type": "string", "pattern": "\\d{5}", "maxLength": 3})");
  ASSERT_FALSE(clash.has_value());
  EXPECT_NE(clash.status().message().find("no string satisfies"), std::string::npos) << clash.status().message();
  auto controls = CompiledSchema::compile(R"({"type": "string", "pattern": "\\x01"})");
  ASSERT_FALSE(controls.has_value());
  EXPECT_NE(controls.status().message().find("control characters"), std::string::npos) << controls.status().message();
  // Unknown formats stay annotations; a pattern alone implies type string.
  auto other = compile_ok(nlohmann::ordered_json::parse(R"({"type": "string", "format": "hostname"})"));
  ASSERT_TRUE(other);
  EXPECT_TRUE(accepts(*other, "\"anything at all\""));
  auto implied = compile_ok(nlohmann::ordered_json::parse(R"({"pattern": "a+"})"));
  ASSERT_TRUE(implied);
  EXPECT_TRUE(accepts(*implied, "\"aa\""));
  EXPECT_FALSE(accepts(*implied, "1"));
}

TEST(SchemaPatternTest, MaskOverAVocabularyNeverDeadEnds) {
  auto s = compile_ok(nlohmann::ordered_json::parse(R"({"type": "string", "pattern": "[0-9]{2}-x"})"));
  ASSERT_TRUE(s);
  const std::vector<std::string> pieces = {"\"", "1", "12", "-", "-x", "x", "\"1", "x\"", "a", "\\n"};
  auto trie = std::make_shared<const TokenTrie>(pieces);
  MaskCache<SchemaMatcher> cache(trie);
  SchemaMatcher m(*s);
  // Greedy walk by the lowest allowed id: every state has an allowed token until complete.
  std::string out;
  for (int step = 0; step < 10 && !m.complete(); ++step) {
    const auto& mask = cache.allowed(m);
    size_t id = 0;
    while (id < mask.size() && !mask[id]) ++id;
    ASSERT_LT(id, mask.size()) << "dead end after " << out;
    out += pieces[id];
    ASSERT_TRUE(m.feed(pieces[id]));
  }
  EXPECT_EQ(out, "\"11-x\"");
}

}  // namespace
}  // namespace brigade
