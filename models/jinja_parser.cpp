#include "models/jinja_parser.h"

#include <initializer_list>

#include "models/jinja_expression.h"

namespace brigade::jinja {
namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  std::vector<NodePtr> run() {
    std::string end;
    auto body = statements({}, end);
    return body;
  }

 private:
  // --- statements ---
  // Parses until a block tag whose keyword is in `ends` (stored in `end`, the stream left after
  // the keyword); with no ends, until the end of the template.
  std::vector<NodePtr> statements(std::initializer_list<const char*> ends, std::string& end) {
    DepthGuard guard(*this);
    std::vector<NodePtr> out;
    for (;;) {
      const Token& t = cur();
      if (t.type == TokenType::eof) {
        if (ends.size() == 0) return out;
        std::string want;
        for (const char* e : ends) want += (want.empty() ? "" : " or ") + std::string("{% ") + e + " %}";
        fail("missing " + want + " (the template ended first)");
      }
      if (t.type == TokenType::text) {
        auto n = make_node(NodeKind::text, t.line);
        n->value = Value(t.text);
        out.push_back(std::move(n));
        ++p_;
      } else if (t.type == TokenType::var_begin) {
        ++p_;
        auto n = make_node(NodeKind::output, t.line);
        n->kids.push_back(expression());
        if (cur().type != TokenType::var_end) fail("expected '}}', found " + describe(cur()));
        ++p_;
        out.push_back(std::move(n));
      } else if (t.type == TokenType::block_begin) {
        ++p_;
        if (cur().type != TokenType::name) fail("expected a statement keyword after '{%', found " + describe(cur()));
        const std::string kw = cur().text;
        for (const char* e : ends) {
          if (kw == e) {
            ++p_;
            end = kw;
            return out;
          }
        }
        ++p_;
        out.push_back(statement(kw, t.line));
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  NodePtr statement(const std::string& kw, int line) {
    if (kw == "if") return if_stmt(line);
    if (kw == "for") return for_stmt(line);
    if (kw == "set") return set_stmt(line);
    if (kw == "macro") return macro_stmt(line);
    if (kw == "call") return call_stmt(line);
    if (kw == "filter") return filter_stmt(line);
    if (kw == "break" || kw == "continue") {
      expect_block_end();
      return make_node(kw == "break" ? NodeKind::break_ : NodeKind::continue_, line);
    }
    if (kw == "generation") {  // transformers' AssistantTracker: marks assistant text, renders as is
      expect_block_end();
      auto n = make_node(NodeKind::if_, line);
      n->kids.push_back(literal(Value(true), line));
      std::string end;
      n->body = statements({"endgeneration"}, end);
      expect_block_end();
      return n;
    }
    if (kw.starts_with("end") || kw == "else" || kw == "elif")
      fail("unexpected {% " + kw + " %} (no open block it closes)");
    fail("unknown statement '" + kw +
         "' (supported: if, for, set, macro, call, filter, break, continue, raw, generation)");
  }

  NodePtr if_stmt(int line) {
    auto n = make_node(NodeKind::if_, line);
    n->kids.push_back(expression());
    expect_block_end();
    std::string end;
    n->body = statements({"elif", "else", "endif"}, end);
    if (end == "elif") {
      n->else_body.push_back(if_stmt(cur().line));
      return n;
    }
    if (end == "else") {
      expect_block_end();
      n->else_body = statements({"endif"}, end);
    }
    expect_block_end();
    return n;
  }

  NodePtr for_stmt(int line) {
    auto n = make_node(NodeKind::for_, line);
    do {
      n->names.push_back(expect_name());
    } while (accept_op(","));
    if (!accept_name("in")) fail("expected 'in' in the for statement, found " + describe(cur()));
    n->kids.push_back(tuple_or_expr(/*allow_cond=*/false));
    n->kids.push_back(accept_name("if") ? expression() : nullptr);
    if (accept_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    std::string end;
    n->body = statements({"else", "endfor"}, end);
    if (end == "else") {
      expect_block_end();
      n->else_body = statements({"endfor"}, end);
    }
    expect_block_end();
    return n;
  }

  NodePtr set_stmt(int line) {
    std::vector<std::string> targets{expect_name()};
    std::string attr;
    if (accept_op(".")) attr = expect_name();
    while (attr.empty() && accept_op(",")) targets.push_back(expect_name());
    if (accept_op("=")) {
      auto n = make_node(NodeKind::set, line);
      n->names = std::move(targets);
      n->attr = attr;
      n->kids.push_back(tuple_or_expr(/*allow_cond=*/true));
      expect_block_end();
      return n;
    }
    if (targets.size() != 1 || !attr.empty()) fail("a block set takes one name ({% set name %}...{% endset %})");
    auto n = make_node(NodeKind::set_block, line);
    n->name = targets[0];
    while (accept_op("|")) n->kids.push_back(filter_call(nullptr));
    expect_block_end();
    std::string end;
    n->body = statements({"endset"}, end);
    expect_block_end();
    return n;
  }

  // `name(a, b=default, ...)` for macro and call-block parameters.
  void parameters(Node& n) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!n.kwargs.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string name = expect_name();
      n.kwargs.emplace_back(std::move(name), accept_op("=") ? expression() : nullptr);
    }
  }

  NodePtr macro_stmt(int line) {
    auto n = make_node(NodeKind::macro, line);
    n->name = expect_name();
    parameters(*n);
    expect_block_end();
    std::string end;
    n->body = statements({"endmacro"}, end);
    if (cur().type == TokenType::name) ++p_;  // {% endmacro name %}
    expect_block_end();
    return n;
  }

  NodePtr call_stmt(int line) {
    auto n = make_node(NodeKind::call_block, line);
    if (is_op("(")) {
      Node params;
      parameters(params);
      for (auto& [name, def] : params.kwargs) n->names.push_back(name);
    }
    n->kids.push_back(expression());
    if (n->kids[0]->kind != NodeKind::call) fail("{% call %} takes a macro call");
    expect_block_end();
    std::string end;
    n->body = statements({"endcall"}, end);
    expect_block_end();
    return n;
  }

  NodePtr filter_stmt(int line) {
    auto n = make_node(NodeKind::filter_block, line);
    do {
      n->kids.push_back(filter_call(nullptr));
    } while (accept_op("|"));
    expect_block_end();
    std::string end;
    n->body = statements({"endfilter"}, end);
    expect_block_end();
    return n;
  }
};

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace brigade::jinja
