#include "models/jinja_expression.h"

namespace brigade::jinja {

NodePtr ExpressionParser::literal(Value v, int line) {
  auto n = make_node(NodeKind::literal, line);
  n->value = std::move(v);
  return n;
}

// `a, b` (a tuple, as a list) or one expression.
NodePtr ExpressionParser::tuple_or_expr(bool allow_cond) {
  const int line = cur().line;
  NodePtr first = allow_cond ? expression() : or_expr();
  if (!is_op(",")) return first;
  auto n = make_node(NodeKind::list, line);
  n->name = "tuple";
  n->kids.push_back(std::move(first));
  while (accept_op(",")) {
    if (cur().type == TokenType::block_end) break;
    n->kids.push_back(allow_cond ? expression() : or_expr());
  }
  return n;
}

NodePtr ExpressionParser::expression() {
  DepthGuard guard(*this);
  NodePtr e = or_expr();
  while (is_name("if")) {
    const int line = next_tok().line;
    auto n = make_node(NodeKind::cond, line);
    n->kids.push_back(std::move(e));
    n->kids.push_back(or_expr());
    n->kids.push_back(accept_name("else") ? expression() : nullptr);
    e = std::move(n);
  }
  return e;
}

NodePtr ExpressionParser::or_expr() {
  NodePtr e = and_expr();
  while (is_name("or")) {
    auto n = make_node(NodeKind::logic_or, next_tok().line);
    n->kids.push_back(std::move(e));
    n->kids.push_back(and_expr());
    e = std::move(n);
  }
  return e;
}

NodePtr ExpressionParser::and_expr() {
  NodePtr e = not_expr();
  while (is_name("and")) {
    auto n = make_node(NodeKind::logic_and, next_tok().line);
    n->kids.push_back(std::move(e));
    n->kids.push_back(not_expr());
    e = std::move(n);
  }
  return e;
}

NodePtr ExpressionParser::not_expr() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto n = make_node(NodeKind::logic_not, next_tok().line);
    n->kids.push_back(not_expr());
    return n;
  }
  return compare();
}

NodePtr ExpressionParser::compare() {
  const int line = cur().line;
  NodePtr e = math1();
  NodePtr chain;
  for (;;) {
    std::string op;
    if (cur().type == TokenType::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                        cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = next_tok().text;
    } else if (accept_name("in")) {
      op = "in";
    } else if (is_name("not") && t_[p_ + 1].type == TokenType::name && t_[p_ + 1].text == "in") {
      p_ += 2;
      op = "not in";
    } else {
      break;
    }
    if (!chain) {
      chain = make_node(NodeKind::compare, line);
      chain->kids.push_back(std::move(e));
    }
    chain->names.push_back(op);
    chain->kids.push_back(math1());
  }
  return chain ? std::move(chain) : std::move(e);
}

NodePtr ExpressionParser::binary(const std::string& op, NodePtr a, NodePtr b, int line) {
  auto n = make_node(NodeKind::binary, line);
  n->name = op;
  n->kids.push_back(std::move(a));
  n->kids.push_back(std::move(b));
  return n;
}

// One left-associative level: next (op next)*.
NodePtr ExpressionParser::left_assoc(std::initializer_list<const char*> ops, NodePtr (ExpressionParser::*next)()) {
  NodePtr e = (this->*next)();
  for (;;) {
    bool found = false;
    for (const char* op : ops) found = found || is_op(op);
    if (!found) return e;
    const Token& t = next_tok();
    e = binary(t.text, std::move(e), (this->*next)(), t.line);
  }
}

NodePtr ExpressionParser::math1() { return left_assoc({"+", "-"}, &ExpressionParser::concat); }

NodePtr ExpressionParser::concat() { return left_assoc({"~"}, &ExpressionParser::math2); }

NodePtr ExpressionParser::math2() { return left_assoc({"*", "/", "//", "%"}, &ExpressionParser::power); }

NodePtr ExpressionParser::power() { return left_assoc({"**"}, &ExpressionParser::filtered_unary); }

NodePtr ExpressionParser::filtered_unary() { return unary(true); }

NodePtr ExpressionParser::unary(bool with_filter) {
  DepthGuard guard(*this);
  NodePtr e;
  if (is_op("-") || is_op("+")) {
    const Token& t = next_tok();
    e = make_node(NodeKind::unary, t.line);
    e->name = t.text;
    e->kids.push_back(unary(false));
  } else {
    e = primary();
  }
  e = postfix(std::move(e));
  return with_filter ? filters_and_tests(std::move(e)) : std::move(e);
}

NodePtr ExpressionParser::primary() {
  const Token& t = cur();
  switch (t.type) {
    case TokenType::name: {
      ++p_;
      if (t.text == "true" || t.text == "True") return literal(Value(true), t.line);
      if (t.text == "false" || t.text == "False") return literal(Value(false), t.line);
      if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
      auto n = make_node(NodeKind::name, t.line);
      n->name = t.text;
      return n;
    }
    case TokenType::string: {
      std::string s;
      while (cur().type == TokenType::string) s += next_tok().text;  // adjacent strings join
      return literal(Value(std::move(s)), t.line);
    }
    case TokenType::integer: ++p_; return literal(Value(t.i), t.line);
    case TokenType::floating: ++p_; return literal(Value(t.f), t.line);
    default: break;
  }
  if (accept_op("(")) {
    if (accept_op(")")) {  // ()
      auto n = make_node(NodeKind::list, t.line);
      n->name = "tuple";
      return n;
    }
    NodePtr e = tuple_or_expr(/*allow_cond=*/true);
    expect_op(")");
    return e;
  }
  if (accept_op("[")) {
    auto n = make_node(NodeKind::list, t.line);
    while (!accept_op("]")) {
      if (!n->kids.empty()) expect_op(",");
      if (accept_op("]")) break;
      n->kids.push_back(expression());
    }
    return n;
  }
  if (accept_op("{")) {
    auto n = make_node(NodeKind::dict, t.line);
    while (!accept_op("}")) {
      if (!n->kids.empty()) expect_op(",");
      if (accept_op("}")) break;
      n->kids.push_back(expression());
      expect_op(":");
      n->kids.push_back(expression());
    }
    return n;
  }
  fail("unexpected " + describe(t) + " in an expression");
}

NodePtr ExpressionParser::postfix(NodePtr e) {
  for (;;) {
    const int line = cur().line;
    if (accept_op(".")) {
      auto n = make_node(NodeKind::attr, line);
      if (cur().type == TokenType::integer) {  // x.0 is x[0]
        n->kind = NodeKind::item;
        n->kids.push_back(std::move(e));
        n->kids.push_back(literal(Value(next_tok().i), line));
      } else {
        n->name = expect_name();
        n->kids.push_back(std::move(e));
      }
      e = std::move(n);
    } else if (accept_op("[")) {
      e = subscript(std::move(e), line);
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

NodePtr ExpressionParser::subscript(NodePtr obj, int line) {
  NodePtr parts[3];
  int n_colons = 0;
  for (;;) {
    if (is_op("]")) break;
    if (accept_op(":")) {
      if (++n_colons > 2) fail("a slice takes at most start:stop:step");
      continue;
    }
    if (parts[n_colons]) fail("expected ':' or ']' in a subscript, found " + describe(cur()));
    parts[n_colons] = expression();
  }
  expect_op("]");
  if (n_colons == 0) {
    if (!parts[0]) fail("empty subscript []");
    auto n = make_node(NodeKind::item, line);
    n->kids.push_back(std::move(obj));
    n->kids.push_back(std::move(parts[0]));
    return n;
  }
  auto n = make_node(NodeKind::slice, line);
  n->kids.push_back(std::move(obj));
  for (auto& p : parts) n->kids.push_back(std::move(p));
  return n;
}

// `(args)` into n->kids (after any already there) and n->kwargs.
void ExpressionParser::call_args(Node& n) {
  expect_op("(");
  bool first = true;
  while (!accept_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (accept_op(")")) break;
    if (cur().type == TokenType::name && t_[p_ + 1].type == TokenType::op && t_[p_ + 1].text == "=") {
      std::string key = next_tok().text;
      ++p_;
      n.kwargs.emplace_back(std::move(key), expression());
    } else {
      if (!n.kwargs.empty()) fail("a positional argument follows a keyword argument");
      n.kids.push_back(expression());
    }
  }
}

NodePtr ExpressionParser::call(NodePtr callee) {
  auto n = make_node(NodeKind::call, cur().line);
  n->kids.push_back(std::move(callee));
  call_args(*n);
  return n;
}

// `name(args)` or `name` after '|'; obj may be null (filter blocks, block set).
NodePtr ExpressionParser::filter_call(NodePtr obj) {
  auto n = make_node(NodeKind::filter, cur().line);
  n->name = expect_name();
  while (accept_op(".")) n->name += "." + expect_name();
  n->kids.push_back(std::move(obj));
  if (is_op("(")) call_args(*n);
  return n;
}

NodePtr ExpressionParser::filters_and_tests(NodePtr e) {
  for (;;) {
    if (accept_op("|")) {
      e = postfix(filter_call(std::move(e)));
    } else if (is_name("is")) {
      auto n = make_node(NodeKind::test, next_tok().line);
      n->negated = accept_name("not");
      n->name = expect_name();
      n->kids.push_back(std::move(e));
      if (is_op("(")) {
        call_args(*n);
      } else if ((cur().type == TokenType::name || cur().type == TokenType::string || cur().type == TokenType::integer ||
                  cur().type == TokenType::floating || is_op("[") || is_op("{")) &&
                 !is_name("else") && !is_name("or") && !is_name("and") && !is_name("is") && !is_name("if")) {
        n->kids.push_back(postfix(primary()));
      }
      e = std::move(n);
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

}  // namespace brigade::jinja
