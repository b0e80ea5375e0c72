// Gemma 4's tool calls: <|tool_call>call:NAME{ARGS}<tool_call|> blocks (the tagged state machine
// of tool_call_tagged.cpp), ARGS in the serialisation Gemma 4's chat template writes with its
// format_argument macro: key:value pairs with bare keys, strings between <|"|> delimiters (no
// escapes), nested {..} objects and [..] arrays, numbers, true / false, null. Values are read as
// vLLM's gemma4 parser reads them (_parse_gemma4_args), so the arguments JSON is the one it gives.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "models/py_json.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server::tool_parse {

namespace {

using ojson = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;
constexpr std::string_view kQuote = "<|\"|>";
constexpr std::string_view kBlank = " \n\t";  // what vLLM skips between members (not '\r')

std::string_view strip(std::string_view s) {  // Python's str.strip over ASCII whitespace
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Digits with single underscores between them (Python's int() and float() accept those).
bool digit_run(std::string_view s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front())) ||
      !std::isdigit(static_cast<unsigned char>(s.back())))
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_' ? s[i - 1] == '_' : !std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string without_underscores(std::string_view s) {
  std::string out(s);
  out.erase(std::remove(out.begin(), out.end(), '_'), out.end());
  return out;
}

// Python's int(s) for s without a '.': [+-]digits (leading zeros allowed). An integer past 64
// bits becomes a float (Python keeps it exact).
std::optional<ojson> python_int(std::string_view s) {
  const bool negative = !s.empty() && s[0] == '-';
  const std::string_view sign_less = !s.empty() && (s[0] == '+' || s[0] == '-') ? s.substr(1) : s;
  if (!digit_run(sign_less)) return std::nullopt;
  const std::string digits = without_underscores(sign_less);
  uint64_t magnitude = 0;
  const bool fits = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude).ec == std::errc();
  if (fits && !negative) return ojson(magnitude);
  if (fits && magnitude <= uint64_t{1} << 63) return ojson(static_cast<int64_t>(0 - magnitude));
  return ojson(std::strtod(without_underscores(s).c_str(), nullptr));
}

// Python's float(s) for s with a '.': [+-](digits[.digits]|.digits)[e[+-]digits].
std::optional<ojson> python_float(std::string_view s) {
  std::string_view rest = !s.empty() && (s[0] == '+' || s[0] == '-') ? s.substr(1) : s;
  const size_t e = rest.find_first_of("eE");
  const std::string_view mantissa = rest.substr(0, e);
  if (e != npos) {
    std::string_view exponent = rest.substr(e + 1);
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) exponent.remove_prefix(1);
    if (!digit_run(exponent)) return std::nullopt;
  }
  const size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot), fraction = dot == npos ? "" : mantissa.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return std::nullopt;
  if ((!whole.empty() && !digit_run(whole)) || (!fraction.empty() && !digit_run(fraction))) return std::nullopt;
  return ojson(std::strtod(without_underscores(s).c_str(), nullptr));
}

// A bare value (vLLM's _parse_gemma4_value): true / false, null / none / nil (any case), an
// integer, a number when it has a '.', else the text itself.
ojson bare_value(std::string_view text) {
  const std::string_view v = strip(text);
  if (v == "true") return true;
  if (v == "false") return false;
  std::string lower(v);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "null" || lower == "none" || lower == "nil") return nullptr;
  const auto number = v.find('.') != npos ? python_float(v) : python_int(v);
  return number ? *number : ojson(std::string(v));
}

// The end of the bracketed value opened at s[from] (exclusive; its close counted with `open`
// and `close` only, strings skipped); npos when s ends first.
size_t bracket_end(std::string_view s, size_t from, char open, char close) {
  int depth = 0;
  for (size_t i = from; i < s.size();) {
    if (s.substr(i).starts_with(kQuote)) {
      const size_t q = s.find(kQuote, i + kQuote.size());
      if (q == npos) return npos;
      i = q + kQuote.size();
      continue;
    }
    if (s[i] == open) ++depth;
    else if (s[i] == close && --depth == 0) return i + 1;
    ++i;
  }
  return npos;
}

ojson read_members(std::string_view s, bool partial = false);
ojson read_items(std::string_view s, bool partial = false);

// A value at s[i] that is a string, object or array; moves i past it. nullopt: a bare value.
// An unterminated string takes the rest of s; an unclosed object or array too, read as partial
// (as vLLM's parser reads them).
std::optional<ojson> delimited_value(std::string_view s, size_t& i) {
  if (s.substr(i).starts_with(kQuote)) {
    const size_t start = i + kQuote.size(), end = s.find(kQuote, start);
    i = end == npos ? s.size() : end + kQuote.size();
    return ojson(std::string(s.substr(start, end == npos ? npos : end - start)));
  }
  if (s[i] != '{' && s[i] != '[') return std::nullopt;
  const bool object = s[i] == '{';
  const size_t end = bracket_end(s, i, s[i], object ? '}' : ']');
  const std::string_view inner = s.substr(i + 1, end == npos ? npos : end - i - 2);
  i = end == npos ? s.size() : end;
  return object ? read_members(inner, end == npos) : read_items(inner, end == npos);
}

// The bare value s[i, end) ends the text being read: in a partial read it may be cut short (a
// number's digits after a '.' still to come), so vLLM drops it.
bool cut_short(std::string_view s, size_t i, size_t end, bool partial) {
  return partial && (end == s.size() || strip(s.substr(i, end - i)).ends_with('.'));
}

// key:value,key:value (vLLM's _parse_gemma4_args): the object's members in order. partial: the
// text of an object whose '}' never came; a key without a value, and a last bare value, are dropped.
ojson read_members(std::string_view s, bool partial) {
  ojson out = ojson::object();
  size_t i = 0;
  while ((i = s.find_first_not_of(",\n\t ", i)) != npos) {
    const size_t colon = s.find(':', i);
    if (colon == npos) break;
    std::string_view key = strip(s.substr(i, colon - i));
    if (key.size() >= 2 * kQuote.size() && key.starts_with(kQuote) && key.ends_with(kQuote))
      key = key.substr(kQuote.size(), key.size() - 2 * kQuote.size());
    const std::string name(key);
    i = s.find_first_not_of(kBlank, colon + 1);
    if (i == npos) {
      if (!partial) out[name] = "";
      break;
    }
    if (auto v = delimited_value(s, i)) {
      out[name] = std::move(*v);
      continue;
    }
    const size_t end = std::min(s.find_first_of(",}]", i), s.size());
    if (end == i || cut_short(s, i, end, partial)) break;  // nothing before the separator: malformed
    out[name] = bare_value(s.substr(i, end - i));
    i = end;
  }
  return out;
}

// value,value (vLLM's _parse_gemma4_array): the array's items; partial as read_members.
ojson read_items(std::string_view s, bool partial) {
  ojson out = ojson::array();
  size_t i = 0;
  while ((i = s.find_first_not_of(",\n\t ", i)) != npos) {
    if (auto v = delimited_value(s, i)) {
      out.push_back(std::move(*v));
      continue;
    }
    const size_t end = std::min(s.find_first_of(",]", i), s.size());
    if (end == i || cut_short(s, i, end, partial)) break;
    out.push_back(bare_value(s.substr(i, end - i)));
    i = end;
  }
  return out;
}

// vLLM's pattern for the name: letters, digits, '_', '-' and '.' (ASCII here).
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

}  // namespace

std::optional<ToolCallDelta> gemma4_call(std::string_view body) {
  static constexpr std::string_view kCall = "call:";
  if (!body.starts_with(kCall) || !body.ends_with('}')) return std::nullopt;
  const std::string_view rest = body.substr(kCall.size());
  const size_t brace = rest.find('{');
  if (brace == 0 || brace == npos || !std::all_of(rest.begin(), rest.begin() + brace, name_char)) return std::nullopt;
  const std::string_view args = rest.substr(brace + 1, rest.size() - brace - 2);
  return ToolCallDelta{0, std::string(rest.substr(0, brace)), py_json_dumps(read_members(args)), ""};
}

}  // namespace brigade::server::tool_parse
