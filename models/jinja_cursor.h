// The token cursor the Jinja parser's two halves share (models/jinja_parser.cpp for statements,
// jinja_expression.cpp for expressions): look-ahead, expectations that fail with the line, and a
// nesting guard. Internal to the parser.
#pragma once

#include <string>
#include <vector>

#include "models/jinja_lexer.h"
#include "models/jinja_parser.h"

namespace brigade::jinja {

inline NodePtr make_node(NodeKind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class TokenCursor {
 public:
  explicit TokenCursor(const std::vector<Token>& t) : t_(t) {}

 protected:
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
    explicit DepthGuard(TokenCursor& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail("the template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    TokenCursor& p_;
  };

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace brigade::jinja
