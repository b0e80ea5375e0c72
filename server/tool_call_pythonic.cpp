// Pythonic tool calls (Llama 3.2 / Llama 4 with a pythonic template, vLLM's `pythonic` and
// `llama4_pythonic`): the whole output is a Python list of calls with keyword arguments,
// [get_weather(city="Oslo", days=2), get_time()], optionally inside <|python_start|> ..
// <|python_end|>. Values are Python literals (strings in either quote, numbers, True/False/None,
// lists, tuples, dicts with string keys), turned into JSON as vLLM's ast.literal_eval + json.dumps.
// The same reader serves LFM2's call lists and OLMo 3's call lines, which may also write JSON's
// true, false and null.
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdlib>

#include "models/py_json.h"
#include "models/utf8.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server::tool_parse {

namespace {

using ojson = nlohmann::ordered_json;
constexpr std::string_view kStart = "<|python_start|>", kEnd = "<|python_end|>";

// A recursive-descent reader of the call list; any deviation makes the whole output content.
// json_names: JSON's true, false and null are values too (LFM2, OLMo 3).
class PythonReader {
 public:
  explicit PythonReader(std::string_view s, bool json_names = false) : s_(s), json_names_(json_names) {}

  // Calls one a line or comma-separated, no brackets (OLMo 3's).
  std::optional<std::vector<ToolCallDelta>> call_lines() {
    std::vector<ToolCallDelta> out;
    while (true) {
      auto c = call();
      if (!c) return std::nullopt;
      out.push_back(std::move(*c));
      const size_t from = i_;
      space();
      const bool newline = s_.substr(from, i_ - from).find('\n') != std::string_view::npos;
      if (i_ == s_.size()) return out;
      if (!eat(',') && !newline) return std::nullopt;
      space();
      if (i_ == s_.size()) return std::nullopt;
    }
  }

  std::optional<std::vector<ToolCallDelta>> calls() {
    std::vector<ToolCallDelta> out;
    if (!eat('[')) return std::nullopt;
    while (!eat(']')) {
      if (!out.empty() && !eat(',')) return std::nullopt;
      if (!out.empty() && eat(']')) break;  // a trailing comma
      auto c = call();
      if (!c) return std::nullopt;
      out.push_back(std::move(*c));
    }
    space();
    if (i_ != s_.size() || out.empty()) return std::nullopt;
    return out;
  }

  // One literal and nothing after it.
  std::optional<ojson> literal() {
    auto v = value(0);
    space();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void space() {
    while (i_ < s_.size() && kSpace.find(s_[i_]) != std::string_view::npos) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string identifier() {
    space();
    const size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '-')) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }
  std::optional<ToolCallDelta> call() {
    const std::string name = identifier();
    if (!valid_function_name(name) || !eat('(')) return std::nullopt;
    ojson args = ojson::object();
    while (!eat(')')) {
      if (!args.empty() && !eat(',')) return std::nullopt;
      if (!args.empty() && eat(')')) break;
      const std::string key = identifier();
      if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0])) || !eat('=')) return std::nullopt;
      auto v = value(0);
      if (!v) return std::nullopt;
      args[key] = std::move(*v);
    }
    return ToolCallDelta{0, name, py_json_dumps(args), ""};
  }
  std::optional<ojson> value(int depth) {
    if (depth > 64) return std::nullopt;
    space();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (c == '"' || c == '\'') return string();
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(depth);
    const std::string word = identifier_or_number();
    if (word == "True") return ojson(true);
    if (word == "False") return ojson(false);
    if (word == "None") return ojson(nullptr);
    if (json_names_ && word == "true") return ojson(true);
    if (json_names_ && word == "false") return ojson(false);
    if (json_names_ && word == "null") return ojson(nullptr);
    return number(word);
  }
  std::string identifier_or_number() {
    const size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.' ||
                              s_[i_] == '-' || s_[i_] == '+'))
      ++i_;
    return std::string(s_.substr(b, i_ - b));
  }
  // Python int or float literal (decimal); JSON's number grammar covers the forms models write.
  static std::optional<ojson> number(const std::string& w) {
    if (w.empty()) return std::nullopt;
    ojson j = ojson::parse(w, nullptr, /*allow_exceptions=*/false);
    if (j.is_number()) return j;
    return std::nullopt;
  }
  std::optional<ojson> string() {
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      char c = s_[i_++];
      if (c == '\n') return std::nullopt;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      c = s_[i_++];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': case '\'': case '"': out += c; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return std::nullopt;
          const std::string hex(s_.substr(i_, 4));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4 || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
          append_utf8(out, static_cast<char32_t>(cp));
          i_ += 4;
          break;
        }
        default: return std::nullopt;
      }
    }
    if (i_ >= s_.size()) return std::nullopt;
    ++i_;
    if (!is_valid_utf8(out)) return std::nullopt;
    return ojson(std::move(out));
  }
  std::optional<ojson> sequence(char close, int depth) {
    ++i_;
    ojson out = ojson::array();
    while (!eat(close)) {
      if (!out.empty() && !eat(',')) return std::nullopt;
      if (!out.empty() && eat(close)) break;
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
    }
    return out;
  }
  std::optional<ojson> dict(int depth) {
    ++i_;
    ojson out = ojson::object();
    bool first = true;
    while (!eat('}')) {
      if (!first && !eat(',')) return std::nullopt;
      if (!first && eat('}')) break;
      first = false;
      space();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) return std::nullopt;  // string keys only
      auto k = string();
      if (!k || !eat(':')) return std::nullopt;
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out[k->get<std::string>()] = std::move(*v);
    }
    return out;
  }
  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view s_;
  bool json_names_ = false;
  size_t i_ = 0;
};

}  // namespace

std::optional<std::vector<ToolCallDelta>> pythonic_calls(std::string_view text) {
  std::string_view body = trim(text);
  if (body.starts_with(kStart)) {
    body.remove_prefix(kStart.size());
    if (body.ends_with(kEnd)) body.remove_suffix(kEnd.size());
  }
  return PythonReader(body).calls();
}

std::optional<std::vector<ToolCallDelta>> python_call_list(std::string_view text, bool json_names) {
  return PythonReader(trim(text), json_names).calls();
}

std::optional<std::vector<ToolCallDelta>> olmo3_calls(std::string_view text) {
  static constexpr std::string_view kOpen = "<function_calls>", kClose = "</function_calls>";
  std::string_view body = trim(text);
  if (body.starts_with(kOpen)) {
    body.remove_prefix(kOpen.size());
    if (body.ends_with(kClose)) body.remove_suffix(kClose.size());
    body = trim(body);
  }
  if (body.empty()) return std::nullopt;
  return PythonReader(body, /*json_names=*/true).call_lines();
}

std::optional<ojson> python_literal(std::string_view text) { return PythonReader(text).literal(); }

}  // namespace brigade::server::tool_parse
