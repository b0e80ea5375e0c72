// The Jinja lexer: template source to tokens, in the environment transformers renders chat
// templates with (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` all after it;
//   - trim_blocks: the first newline after a block or comment tag is dropped;
//   - lstrip_blocks: spaces and tabs from the start of a line to a block or comment tag are
//     dropped (not before `{{`, not for `{%+`);
//   - one newline ending the template is dropped; "\r\n" reads as "\n";
//   - `{% raw %}...{% endraw %}` is text.
// Throws jinja::Error with the line for an unterminated tag, comment or string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::jinja {

enum class TokenType { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };

struct Token {
  TokenType type;
  std::string text;  // text: the data; name: the identifier; string: the unescaped value; op: the operator
  int line = 1;
  int64_t i = 0;  // integer
  double f = 0;   // floating
};

std::vector<Token> lex(const std::string& source);

}  // namespace brigade::jinja
