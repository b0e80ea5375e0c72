#include "models/jinja_parser.h"

#include <initializer_list>

namespace brigade::jinja {
namespace {

NodePtr make(NodeKind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  std::vector<NodePtr> run() {
    std::string end;
    auto body = statements({}, end);
    return body;
  }

 private:
  // --- token helpers ---
  const Token& cur() const { return t_[p_]; }
  const Token& next_tok() { return t_[p_++]; }
  bool is_op(const char* op) const { return cur().type == TokenType::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::name && cur().text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++p_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++p_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("line " + std::to_string(cur().line) + ": " + what);
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::eof: return "the end of the template";
      case TokenType::var_end: return "'}}'";
      case TokenType::block_end: return "'%}'";
      case TokenType::text: return "text";
      case TokenType::string: return "a string";
      case TokenType::integer:
      case TokenType::floating: return "a number";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', found " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::name) fail("expected a name, found " + describe(cur()));
    return next_tok().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::block_end) fail("expected '%}', found " + describe(cur()));
    ++p_;
  }
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail("the template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

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
        auto n = make(NodeKind::text, t.line);
        n->value = Value(t.text);
        out.push_back(std::move(n));
        ++p_;
      } else if (t.type == TokenType::var_begin) {
        ++p_;
        auto n = make(NodeKind::output, t.line);
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
      return make(kw == "break" ? NodeKind::break_ : NodeKind::continue_, line);
    }
    if (kw == "generation") {  // transformers' AssistantTracker: marks assistant text, renders as is
      expect_block_end();
      auto n = make(NodeKind::if_, line);
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
    auto n = make(NodeKind::if_, line);
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
    auto n = make(NodeKind::for_, line);
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
      auto n = make(NodeKind::set, line);
      n->names = std::move(targets);
      n->attr = attr;
      n->kids.push_back(tuple_or_expr(/*allow_cond=*/true));
      expect_block_end();
      return n;
    }
    if (targets.size() != 1 || !attr.empty()) fail("a block set takes one name ({% set name %}...{% endset %})");
    auto n = make(NodeKind::set_block, line);
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
    auto n = make(NodeKind::macro, line);
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
    auto n = make(NodeKind::call_block, line);
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
    auto n = make(NodeKind::filter_block, line);
    do {
      n->kids.push_back(filter_call(nullptr));
    } while (accept_op("|"));
    expect_block_end();
    std::string end;
    n->body = statements({"endfilter"}, end);
    expect_block_end();
    return n;
  }

  // --- expressions ---
  NodePtr literal(Value v, int line) {
    auto n = make(NodeKind::literal, line);
    n->value = std::move(v);
    return n;
  }

  // `a, b` (a tuple, as a list) or one expression.
  NodePtr tuple_or_expr(bool allow_cond) {
    const int line = cur().line;
    NodePtr first = allow_cond ? expression() : or_expr();
    if (!is_op(",")) return first;
    auto n = make(NodeKind::list, line);
    n->name = "tuple";
    n->kids.push_back(std::move(first));
    while (accept_op(",")) {
      if (cur().type == TokenType::block_end) break;
      n->kids.push_back(allow_cond ? expression() : or_expr());
    }
    return n;
  }

  NodePtr expression() {
    DepthGuard guard(*this);
    NodePtr e = or_expr();
    while (is_name("if")) {
      const int line = next_tok().line;
      auto n = make(NodeKind::cond, line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(or_expr());
      n->kids.push_back(accept_name("else") ? expression() : nullptr);
      e = std::move(n);
    }
    return e;
  }

  NodePtr or_expr() {
    NodePtr e = and_expr();
    while (is_name("or")) {
      auto n = make(NodeKind::logic_or, next_tok().line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(and_expr());
      e = std::move(n);
    }
    return e;
  }
  NodePtr and_expr() {
    NodePtr e = not_expr();
    while (is_name("and")) {
      auto n = make(NodeKind::logic_and, next_tok().line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(not_expr());
      e = std::move(n);
    }
    return e;
  }
  NodePtr not_expr() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto n = make(NodeKind::logic_not, next_tok().line);
      n->kids.push_back(not_expr());
      return n;
    }
    return compare();
  }
  NodePtr compare() {
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
        chain = make(NodeKind::compare, line);
        chain->kids.push_back(std::move(e));
      }
      chain->names.push_back(op);
      chain->kids.push_back(math1());
    }
    return chain ? std::move(chain) : std::move(e);
  }
  NodePtr binary(const std::string& op, NodePtr a, NodePtr b, int line) {
    auto n = make(NodeKind::binary, line);
    n->name = op;
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return n;
  }
  // One left-associative level: next (op next)*.
  NodePtr left_assoc(std::initializer_list<const char*> ops, NodePtr (Parser::*next)()) {
    NodePtr e = (this->*next)();
    for (;;) {
      bool found = false;
      for (const char* op : ops) found = found || is_op(op);
      if (!found) return e;
      const Token& t = next_tok();
      e = binary(t.text, std::move(e), (this->*next)(), t.line);
    }
  }
  NodePtr math1() { return left_assoc({"+", "-"}, &Parser::concat); }
  NodePtr concat() { return left_assoc({"~"}, &Parser::math2); }
  NodePtr math2() { return left_assoc({"*", "/", "//", "%"}, &Parser::power); }
  NodePtr power() { return left_assoc({"**"}, &Parser::filtered_unary); }
  NodePtr filtered_unary() { return unary(true); }
  NodePtr unary(bool with_filter) {
    DepthGuard guard(*this);
    NodePtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next_tok();
      e = make(NodeKind::unary, t.line);
      e->name = t.text;
      e->kids.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filters_and_tests(std::move(e)) : std::move(e);
  }

  NodePtr primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::name: {
        ++p_;
        if (t.text == "true" || t.text == "True") return literal(Value(true), t.line);
        if (t.text == "false" || t.text == "False") return literal(Value(false), t.line);
        if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
        auto n = make(NodeKind::name, t.line);
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
        auto n = make(NodeKind::list, t.line);
        n->name = "tuple";
        return n;
      }
      NodePtr e = tuple_or_expr(/*allow_cond=*/true);
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto n = make(NodeKind::list, t.line);
      while (!accept_op("]")) {
        if (!n->kids.empty()) expect_op(",");
        if (accept_op("]")) break;
        n->kids.push_back(expression());
      }
      return n;
    }
    if (accept_op("{")) {
      auto n = make(NodeKind::dict, t.line);
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

  NodePtr postfix(NodePtr e) {
    for (;;) {
      const int line = cur().line;
      if (accept_op(".")) {
        auto n = make(NodeKind::attr, line);
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

  NodePtr subscript(NodePtr obj, int line) {
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
      auto n = make(NodeKind::item, line);
      n->kids.push_back(std::move(obj));
      n->kids.push_back(std::move(parts[0]));
      return n;
    }
    auto n = make(NodeKind::slice, line);
    n->kids.push_back(std::move(obj));
    for (auto& p : parts) n->kids.push_back(std::move(p));
    return n;
  }

  // `(args)` into n->kids (after any already there) and n->kwargs.
  void call_args(Node& n) {
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
  NodePtr call(NodePtr callee) {
    auto n = make(NodeKind::call, cur().line);
    n->kids.push_back(std::move(callee));
    call_args(*n);
    return n;
  }
  // `name(args)` or `name` after '|'; obj may be null (filter blocks, block set).
  NodePtr filter_call(NodePtr obj) {
    auto n = make(NodeKind::filter, cur().line);
    n->name = expect_name();
    while (accept_op(".")) n->name += "." + expect_name();
    n->kids.push_back(std::move(obj));
    if (is_op("(")) call_args(*n);
    return n;
  }

  NodePtr filters_and_tests(NodePtr e) {
    for (;;) {
      if (accept_op("|")) {
        e = postfix(filter_call(std::move(e)));
      } else if (is_name("is")) {
        auto n = make(NodeKind::test, next_tok().line);
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

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace brigade::jinja
