// The Jinja parser: tokens (models/jinja_lexer.h) to a tree of nodes, with Jinja's grammar and
// operator precedence (loosest first): `x if c else y`, or, and, not, comparisons (==, !=, <, <=,
// >, >=, in, not in; chained), + -, ~, * / // %, **, unary - +, then postfix: .attr, [item],
// [a:b:c], (call), |filter, `is [not] test`.
// Statements: if/elif/else, for (targets, `if` filter, else, loop.*, break/continue), set
// (name, tuple, namespace attribute, block set with filters), macro, call (caller()), filter
// blocks, raw, and transformers' {% generation %} (its body renders as is).
// Throws jinja::Error naming the line for anything else, and for nesting deeper than kMaxDepth.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/jinja_lexer.h"
#include "models/jinja_value.h"

namespace brigade::jinja {

enum class NodeKind {
  // expressions
  literal, name, list, dict, attr, item, slice, call, filter, test, unary, binary, logic_and, logic_or,
  logic_not, compare, cond,
  // statements
  text, output, if_, for_, set, set_block, macro, call_block, filter_block, break_, continue_
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string name;          // name/attr/filter/test/macro/set target; unary/binary/compare: the operator(s) joined by ' '
  Value value;               // literal; text: the data
  std::vector<NodePtr> kids; // operands, call and filter arguments, list items, dict keys and values alternating
  std::vector<std::pair<std::string, NodePtr>> kwargs;  // keyword arguments; macro parameters with defaults
  std::vector<std::string> names;  // for/set targets; compare operators; call block caller parameters
  std::vector<NodePtr> body, else_body;
  std::string attr;      // set: the attribute of a namespace target (`set ns.attr = ...`)
  bool negated = false;  // test: `is not`
};

constexpr int kMaxDepth = 200;

// The template's statements. Throws Error ("line N: ...").
std::vector<NodePtr> parse(const std::vector<Token>& tokens);

}  // namespace brigade::jinja
