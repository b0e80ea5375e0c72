#include "models/jinja_lexer.h"

#include <cctype>
#include <cstdlib>

#include "models/jinja_value.h"
#include "models/utf8.h"

namespace brigade::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && kind != '{') {
        const size_t l = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        const bool line_start = l > 0 || pos_ == 0 || src_[pos_ - 1] == '\n';
        bool blank = l < text.size();
        for (size_t i = l; i < text.size() && blank; ++i) blank = is_space(text[i]);
        if (line_start && blank) text.resize(l);
      }
      count_lines(pos_, open);
      emit_text(std::move(text));
      pos_ = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') comment();
      else tag(kind == '{');
    }
    tokens_.push_back({TokenType::eof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }
  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += src_[i] == '\n';
  }
  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({TokenType::text, std::move(text), line_});
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("line " + std::to_string(line_) + ": " + what);
  }
  // After a closing tag: `-` strips all following whitespace; trim_blocks one newline.
  void after_close(bool strip, bool block) {
    if (strip) {
      const size_t from = pos_;
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      count_lines(from, pos_);
    } else if (block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }
  void comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("unterminated comment ({# without #})");
    count_lines(pos_, end);
    const bool strip = end > pos_ && src_[end - 1] == '-';
    pos_ = end + 2;
    after_close(strip, true);
  }
  void tag(bool variable) {
    tokens_.push_back({variable ? TokenType::var_begin : TokenType::block_begin, "", line_});
    const size_t first = tokens_.size();
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) fail(variable ? "unterminated '{{' (no '}}')" : "unterminated '{%' (no '%}')");
      const char close = variable ? '}' : '%';
      const bool dash = src_[pos_] == '-' && pos_ + 2 < src_.size() + 0 && src_[pos_ + 1] == close &&
                        src_[pos_ + 2] == '}';
      if (depth == 0 && (dash || (src_[pos_] == close && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}'))) {
        pos_ += dash ? 3 : 2;
        tokens_.push_back({variable ? TokenType::var_end : TokenType::block_end, "", line_});
        const bool raw = !variable && tokens_.size() == first + 2 && tokens_[first].type == TokenType::name &&
                         tokens_[first].text == "raw";
        after_close(dash, !variable);
        if (raw) raw_block(first);
        return;
      }
      depth += one_token(depth);
    }
  }
  // `{% raw %}`: the text up to `{% endraw %}` is data.
  void raw_block(size_t first) {
    tokens_.resize(first - 1);
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t i = at + 2;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") != 0) continue;
      i += 6;
      while (i < src_.size() && is_space(src_[i])) ++i;
      const bool dash = i < src_.size() && src_[i] == '-';
      if (src_.compare(i + (dash ? 1 : 0), 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, at - pos_);
      if (src_[at + 2] == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      count_lines(pos_, at);
      emit_text(std::move(text));
      pos_ = i + (dash ? 3 : 2);
      after_close(dash, true);
      return;
    }
    fail("{% raw %} without {% endraw %}");
  }
  // Lexes one expression token; returns the change of bracket depth.
  int one_token(int depth) {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos_;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      tokens_.push_back({TokenType::name, src_.substr(pos_, e - pos_), line_});
      pos_ = e;
      return 0;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(), 0;
    if (c == '\'' || c == '"') return string(c), 0;
    static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenType::op, op, line_});
        pos_ += 2;
        return 0;
      }
    }
    if (std::string("+-/*%~[](){}<>=.:|,;").find(c) == std::string::npos)
      fail(std::string("unexpected character '") + c + "' in a tag");
    tokens_.push_back({TokenType::op, std::string(1, c), line_});
    ++pos_;
    if (c == '(' || c == '[' || c == '{') return 1;
    if (c == ')' || c == ']' || c == '}') return depth > 0 ? -1 : 0;
    return 0;
  }
  void number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    const bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::op && tokens_.back().text == ".";
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      ++e;
      digits();
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = x;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? TokenType::floating : TokenType::integer, text, line_};
    if (is_float) t.f = std::strtod(text.c_str(), nullptr);
    else t.i = std::strtoll(text.c_str(), nullptr, 10);
    tokens_.push_back(std::move(t));
    pos_ = e;
  }
  // A quoted string, unescaped as Python's unicode-escape codec does.
  void string(char quote) {
    const int start_line = line_;
    std::string out;
    size_t i = pos_ + 1;
    for (;; ++i) {
      if (i >= src_.size()) {
        line_ = start_line;
        fail("unterminated string");
      }
      const char c = src_[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        continue;
      }
      const char n = src_[++i];
      switch (n) {
        case '\n': ++line_; break;  // a line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': case 'u': case 'U': {
          const size_t n_hex = n == 'x' ? 2 : n == 'u' ? 4 : 8;
          if (i + n_hex >= src_.size()) fail("truncated \\" + std::string(1, n) + " escape in a string");
          const std::string hex = src_.substr(i + 1, n_hex);
          for (char h : hex)
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad \\" + std::string(1, n) + " escape in a string");
          const auto cp = static_cast<uint32_t>(std::strtoul(hex.c_str(), nullptr, 16));
          if (cp >= 0x110000 || (cp >= 0xd800 && cp < 0xe000)) fail("escape \\" + std::string(1, n) + hex + " is not a character");
          append_utf8(out, cp);
          i += n_hex;
          break;
        }
        default:
          if (n >= '0' && n <= '7') {
            uint32_t cp = 0;
            size_t k = 0;
            for (; k < 3 && i + k < src_.size() && src_[i + k] >= '0' && src_[i + k] <= '7'; ++k) cp = cp * 8 + (src_[i + k] - '0');
            append_utf8(out, cp);
            i += k - 1;
          } else {
            out += '\\';
            out += n;
          }
      }
    }
    tokens_.push_back({TokenType::string, std::move(out), start_line});
    pos_ = i + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) {
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r' && i + 1 < source.size() && source[i + 1] == '\n') continue;
    src += source[i];
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).run();
}

}  // namespace brigade::jinja
