// The Jinja interpreter on its own: each construct renders what jinja2 renders in transformers'
// environment (tests/fixtures/chat_templates/unit.json, from scripts/make_chat_template_fixtures.py),
// what jinja2 rejects fails here too with a message naming the problem, and the render limits
// stop runaway templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/jinja_template.h"
#include "tests/models/chat_test_util.h"

namespace brigade::jinja {
namespace {

using ojson = nlohmann::ordered_json;

Expected<std::string> render(const std::string& source, const ojson& context = ojson::object(),
                             const RenderOptions& options = {}) {
  auto t = JinjaTemplate::parse(source);
  if (!t) return t.status();
  return t->render(Value::from_json(context), options);
}

std::string error_of(const std::string& source, const RenderOptions& options = {}) {
  auto r = render(source, ojson::object(), options);
  return r ? "(rendered: " + *r + ")" : r.status().message();
}

TEST(JinjaTemplate, RendersLikeJinja2) {
  const ojson data = testing::load_fixture_json("chat_templates/unit.json");
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_templates/unit.json: run scripts/make_chat_template_fixtures.py";
  int n_rendered = 0, n_errors = 0;
  for (const auto& c : data["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + c["template"].get<std::string>());
    auto out = render(c["template"].get<std::string>(), c["context"]);
    if (c.contains("expected")) {
      ASSERT_TRUE(out.has_value()) << out.status().to_string();
      EXPECT_EQ(*out, c["expected"].get<std::string>());
      ++n_rendered;
    } else {
      EXPECT_FALSE(out.has_value()) << "jinja2 raised " << c["error"].get<std::string>() << ", this rendered " << *out;
      if (!out) {
        EXPECT_EQ(out.status().code(), StatusCode::invalid_argument);
      }
      ++n_errors;
    }
  }
  EXPECT_GE(n_rendered, 30);
  EXPECT_GE(n_errors, 8);
}

TEST(JinjaTemplate, ErrorsSayWhatFailedAndWhere) {
  EXPECT_EQ(error_of("{{ raise_exception('Roles must alternate') }}"),
            "the chat template refused the request: Roles must alternate");
  EXPECT_EQ(error_of("x\n{{ missing.attr }}"), "chat template: line 2: 'missing' is undefined");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "chat template: line 1: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_NE(error_of("{{ 1 | nosuchfilter }}").find("unknown filter 'nosuchfilter' (supported: abs,"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 is nosuchtest }}").find("unknown test 'nosuchtest'"), std::string::npos);
  EXPECT_EQ(error_of("a\n{% for x in y %}no end"),
            "chat template does not parse: line 2: missing {% else %} or {% endfor %} (the template ended first)");
  EXPECT_EQ(error_of("\n\n{{ 'abc }}"), "chat template does not parse: line 3: unterminated string");
  EXPECT_EQ(error_of("{% frobnicate %}").substr(0, 62), "chat template does not parse: line 1: unknown statement 'frobn");
  EXPECT_EQ(error_of("{% endif %}"), "chat template does not parse: line 1: unexpected {% endif %} (no open block it closes)");
  EXPECT_EQ(error_of("{{ 1 +  }}"), "chat template does not parse: line 1: unexpected '}}' in an expression");
  EXPECT_EQ(error_of("{{ [1].append(2) }}"), "chat template: line 1: 'list object' has no attribute 'append'");
  EXPECT_EQ(error_of("{% set d = {} %}{% set d.x = 1 %}").substr(0, 62), "chat template: line 1: cannot assign attribute 'x' on 'd' (not");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "chat template: line 1: integer division by zero");
  EXPECT_EQ(error_of("{{ 'x'[::0] }}"), "chat template: line 1: slice step cannot be zero");
  EXPECT_EQ(error_of("{{ none() }}"), "chat template: line 1: 'NoneType' object is not callable");
  EXPECT_EQ(error_of("{% for a, b in [1] %}{% endfor %}"), "chat template: line 1: cannot unpack int into 2 names");
}

TEST(JinjaTemplate, RunawayTemplatesStopAtTheLimits) {
  RenderOptions small;
  small.max_output_bytes = 1000;
  small.max_steps = 100'000;
  auto code = [&](const std::string& src) {
    auto r = render(src, ojson::object(), small);
    return r ? StatusCode::ok : r.status().code();
  };
  // Output size, steps (a loop printing nothing), recursion, and values that double.
  EXPECT_EQ(code("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}"), StatusCode::out_of_resources);
  EXPECT_EQ(code("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"), StatusCode::out_of_resources);
  EXPECT_EQ(code("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), StatusCode::out_of_resources);
  EXPECT_EQ(code("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"),
            StatusCode::invalid_argument);
  EXPECT_EQ(code("{{ 'x' * 100000000000 }}"), StatusCode::invalid_argument);
  EXPECT_EQ(code("{{ range(100000000) | length }}"), StatusCode::invalid_argument);
  EXPECT_NE(error_of("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", small).find("the output passed 1000 bytes"),
            std::string::npos);
  // Deep nesting in the source is refused by the parser, not by the stack.
  EXPECT_EQ(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(render("{{ " + std::string(100000, '[')).status().code(), StatusCode::invalid_argument);
  // Values nested past the limit (built by a loop) fail to print instead of exhausting the stack.
  EXPECT_EQ(code("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
            StatusCode::invalid_argument);
  EXPECT_EQ(code("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | tojson }}"),
            StatusCode::invalid_argument);
  EXPECT_EQ(code("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x == ns.x }}"),
            StatusCode::invalid_argument);
  // A namespace holding itself renders (and, under ASan, leaks nothing); printing it is bounded.
  EXPECT_EQ(*render("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns.me.me.a }}"), "1");
  EXPECT_EQ(code("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}"), StatusCode::invalid_argument);
  // Within the limits the same constructs work.
  EXPECT_EQ(*render("{% macro f(n) %}{% if n < 3 %}{{ n }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}"), "012");
}

TEST(JinjaTemplate, StrftimeNowUsesTheClock) {
  RenderOptions fixed;
  fixed.now = [] {
    std::tm t{};
    t.tm_year = 124, t.tm_mon = 6, t.tm_mday = 26;
    return t;
  };
  EXPECT_EQ(*render("{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %b %Y') }}", ojson::object(), fixed),
            "2024-07-26 26 Jul 2024");
}

TEST(JinjaTemplate, ParsedTemplateRendersManyContexts) {
  auto t = JinjaTemplate::parse("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t->render(Value::from_json(ojson::parse(R"({"messages": [{"role": "a", "content": "x"}]})"))), "a:x;");
  EXPECT_EQ(*t->render(Value::from_json(ojson::parse(R"({"messages": []})"))), "");
  EXPECT_EQ(*t->render(Value::from_json(ojson::object())), "") << "undefined iterates as empty";
}

}  // namespace
}  // namespace brigade::jinja
