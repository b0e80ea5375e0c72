// The expression half of the Jinja parser (models/jinja_parser.h gives the grammar): precedence
// climbing from the conditional expression down to primaries, postfix subscripts and calls,
// filters and tests. Internal to the parser.
#pragma once

#include <initializer_list>
#include <string>

#include "models/jinja_cursor.h"

namespace brigade::jinja {

class ExpressionParser : protected TokenCursor {
 public:
  using TokenCursor::TokenCursor;

 protected:
  // What the statement parser calls.
  NodePtr expression();
  // `a, b` (a tuple) or one expression; allow_cond false: no `x if c else y` (for targets).
  NodePtr tuple_or_expr(bool allow_cond);
  // `name(args)` or `name` after '|'; obj may be null (filter blocks, block set).
  NodePtr filter_call(NodePtr obj);
  NodePtr literal(Value v, int line);

 private:
  NodePtr or_expr();
  NodePtr and_expr();
  NodePtr not_expr();
  NodePtr compare();
  NodePtr binary(const std::string& op, NodePtr a, NodePtr b, int line);
  // One left-associative level: next (op next)*.
  NodePtr left_assoc(std::initializer_list<const char*> ops, NodePtr (ExpressionParser::*next)());
  NodePtr math1();
  NodePtr concat();
  NodePtr math2();
  NodePtr power();
  NodePtr filtered_unary();
  NodePtr unary(bool with_filter);
  NodePtr primary();
  NodePtr postfix(NodePtr e);
  NodePtr subscript(NodePtr obj, int line);
  // `(args)` into n->kids (after any already there) and n->kwargs.
  void call_args(Node& n);
  NodePtr call(NodePtr callee);
  NodePtr filters_and_tests(NodePtr e);
};

}  // namespace brigade::jinja
