#include "models/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace brigade {
namespace {

using json = nlohmann::ordered_json;

// Python's float repr: the shortest digits that round-trip; fixed notation when the decimal
// exponent is in [-4, 16), else d[.ddd]e±XX.
std::string py_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]XX
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exp = std::atoi(sci.c_str() + e + 1);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = std::abs(exp);
    return out + (exp < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
  }
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return sign + out;
}

void py_string(const std::string& s, std::string& out) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dump(const json& v, int indent, int level, std::string& out) {
  const auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.type()) {
    case json::value_t::object: {
      if (v.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, member] : v.items()) {
        if (!first) out += item_sep;
        first = false;
        if (indent >= 0) newline(level + 1);
        py_string(key, out);
        out += ": ";
        dump(member, indent, level + 1, out);
      }
      if (indent >= 0) newline(level);
      out += '}';
      return;
    }
    case json::value_t::array: {
      if (v.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent >= 0) newline(level + 1);
        dump(v[i], indent, level + 1, out);
      }
      if (indent >= 0) newline(level);
      out += ']';
      return;
    }
    case json::value_t::string: py_string(v.get_ref<const std::string&>(), out); return;
    case json::value_t::number_float: out += py_float(v.get<double>()); return;
    case json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case json::value_t::null:
    case json::value_t::discarded: out += "null"; return;
    default: out += v.dump(); return;  // integers
  }
}

}  // namespace

std::string py_json_dumps(const json& value, int indent) {
  std::string out;
  dump(value, indent, 0, out);
  return out;
}

}  // namespace brigade
