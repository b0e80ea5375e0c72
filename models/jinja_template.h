// A Jinja2 interpreter for Hugging Face chat templates: parse a template once, render it with a
// context of values. It follows jinja2 3.1 in the environment transformers' apply_chat_template
// uses (trim_blocks, lstrip_blocks, loop controls, default Undefined; models/jinja_lexer.h,
// jinja_parser.h, jinja_ops.h and jinja_filters.h list what is covered).
//
// A template cannot hang or crash the process: rendering is bounded in output bytes, in steps
// (statements, expressions and loop iterations evaluated) and in nesting depth (macro recursion
// included), and fails with a Status naming the limit instead. Thread safety: a parsed
// JinjaTemplate is immutable; render may be called from several threads at once.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/jinja_value.h"

namespace brigade::jinja {

struct Node;

struct RenderOptions {
  size_t max_output_bytes = size_t{32} << 20;
  int64_t max_steps = 20'000'000;
  int max_depth = 500;  // nested statements, expressions and macro calls
  // The local time strftime_now formats; unset: the system clock.
  std::function<std::tm()> now;
};

class JinjaTemplate {
 public:
  // invalid_argument "line N: ..." when the source does not parse (unknown statement, missing
  // {% endfor %}, unterminated string, ...).
  static Expected<JinjaTemplate> parse(const std::string& source);

  // Renders with `context` (a dict of the template's variables; globals such as range and
  // namespace are added underneath). invalid_argument when the template calls
  // raise_exception (the message is the template's), when an operation fails ("line N: ..."),
  // or out_of_resources when a limit is reached.
  Expected<std::string> render(const Value& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace brigade::jinja
