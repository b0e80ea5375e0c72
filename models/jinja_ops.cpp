#include "models/jinja_ops.h"

#include <cctype>
#include <cmath>

namespace brigade::jinja {
namespace {

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  throw Error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::string checked(std::string s) {
  if (s.size() > kMaxValueSize) throw Error("a string grew past " + std::to_string(kMaxValueSize) + " bytes");
  return s;
}

// Python's index normalisation for a sequence of n elements.
int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

Value method(const Value& self, const std::string& name, Function f) {
  (void)self;
  return Value(std::move(f), name);
}

const std::string& str_arg(const Value* v, const std::string& what) {
  if (!v || !v->is_string()) throw Error(what + " takes a string argument");
  return v->str_ref();
}

int64_t int_arg(const Value* v, int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (v->kind() != Kind::integer && v->kind() != Kind::boolean) throw Error("expected an integer argument, got '" + v->type_name() + "'");
  return v->as_int();
}

bool affix(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& p = str_arg(&a, prefix ? "startswith" : "endswith");
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (arg.is_list()) {
    for (const Value& a : arg.list())
      if (one(a)) return true;
    return false;
  }
  return one(arg);
}

Value string_method(const std::string& s, const std::string& name) {
  const Value self(s);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return method(self, name, [s, l, r](CallArgs& a) { return Value(py_strip(s, a.get(0, "chars"), l, r)); });
  }
  if (name == "split")
    return method(self, name, [s](CallArgs& a) { return Value(py_split(s, a.get(0, "sep"), int_arg(a.get(1, "maxsplit"), -1))); });
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method(self, name, [s, prefix](CallArgs& a) {
      if (a.args.empty()) throw Error("startswith/endswith take an argument");
      return Value(affix(s, a.args[0], prefix));
    });
  }
  if (name == "upper") return method(self, name, [s](CallArgs&) { return Value(py_upper(s)); });
  if (name == "lower") return method(self, name, [s](CallArgs&) { return Value(py_lower(s)); });
  if (name == "title") return method(self, name, [s](CallArgs&) { return Value(py_title(s)); });
  if (name == "capitalize") return method(self, name, [s](CallArgs&) { return Value(py_capitalize(s)); });
  if (name == "replace")
    return method(self, name, [s](CallArgs& a) {
      return Value(py_replace(s, str_arg(a.get(0, "old"), "replace"), str_arg(a.get(1, "new"), "replace"),
                              int_arg(a.get(2, "count"), -1)));
    });
  if (name == "find" || name == "count")
    return method(self, name, [s, name](CallArgs& a) {
      const std::string& sub = str_arg(a.get(0, "sub"), name);
      if (name == "find") {
        const size_t at = s.find(sub);
        return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(to_code_points(s.substr(0, at)).size()));
      }
      if (sub.empty()) return Value(static_cast<int64_t>(to_code_points(s).size()) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value(n);
    });
  if (name == "join")
    return method(self, name, [s](CallArgs& a) {
      if (a.args.empty()) throw Error("join takes an iterable");
      std::string out;
      bool first = true;
      for (const Value& v : a.args[0].items_for_iteration()) {
        if (!v.is_string()) throw Error("sequence item: expected str instance, " + v.type_name() + " found");
        out += (first ? "" : s) + v.str_ref();
        first = false;
      }
      return Value(checked(std::move(out)));
    });
  if (name == "splitlines")
    return method(self, name, [s](CallArgs&) {
      ValueList out;
      size_t b = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          out.emplace_back(s.substr(b, i - b));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          b = i + 1;
        }
      }
      if (b < s.size()) out.emplace_back(s.substr(b));
      return Value(std::move(out));
    });
  if (name == "removeprefix" || name == "removesuffix")
    return method(self, name, [s, name](CallArgs& a) {
      const std::string& x = str_arg(a.get(0, "affix"), name);
      if (name == "removeprefix") return Value(s.starts_with(x) ? s.substr(x.size()) : s);
      return Value(s.ends_with(x) ? s.substr(0, s.size() - x.size()) : s);
    });
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" || name == "isupper")
    return method(self, name, [s, name](CallArgs&) {
      if (s.empty()) return Value(false);
      bool cased = false, ok = true;
      for (unsigned char c : s) {
        if (name == "isdigit") ok = ok && std::isdigit(c);
        else if (name == "isalpha") ok = ok && std::isalpha(c);
        else if (name == "isalnum") ok = ok && std::isalnum(c);
        else if (name == "isspace") ok = ok && std::isspace(c);
        else if (std::isalpha(c)) {
          cased = true;
          ok = ok && (name == "islower" ? std::islower(c) : std::isupper(c));
        }
      }
      return Value(ok && (cased || name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace"));
    });
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values")
    return method(d, name, [d, name](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : d.dict().items) {
        if (name == "items") out.push_back(Value::tuple(ValueList{Value(k), v}));
        else if (name == "keys") out.emplace_back(k);
        else out.push_back(v);
      }
      return Value(std::move(out));
    });
  if (name == "get")
    return method(d, name, [d](CallArgs& a) {
      const Value* key = a.get(0, "key");
      if (!key) throw Error("dict.get takes a key");
      const Value* v = key->is_string() ? d.dict().find(key->str_ref()) : nullptr;
      if (v) return *v;
      const Value* def = a.get(1, "default");
      return def ? *def : Value::none();
    });
  return Value();
}

}  // namespace

const Value& require_defined(const Value& v) {
  if (v.is_undefined()) throw Error(v.undefined_message());
  return v;
}

Value get_attr(const Value& obj, const std::string& name) {
  require_defined(obj);
  if (obj.is_string()) return string_method(obj.str_ref(), name);
  if (obj.is_dict()) {
    if (!obj.is_namespace()) {
      Value m = dict_method(obj, name);
      if (m.is_function()) return m;
    }
    if (const Value* v = obj.dict().find(name)) return *v;
    return Value::undefined("'" + std::string(obj.is_namespace() ? "Namespace" : "dict") + " object' has no attribute '" + name + "'");
  }
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  require_defined(obj);
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().find(key.str_ref())) return *v;
    if (!obj.is_namespace()) {
      Value m = dict_method(obj, key.str_ref());
      if (m.is_function()) return m;
    }
    return Value::undefined("'dict object' has no attribute '" + key.str_ref() + "'");
  }
  if ((obj.is_list() || obj.is_string()) && (key.kind() == Kind::integer || key.kind() == Kind::boolean)) {
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.list().size());
      const int64_t i = norm_index(key.as_int(), n);
      if (i < 0 || i >= n) return Value::undefined("'list object' has no element " + std::to_string(key.as_int()));
      return obj.list()[static_cast<size_t>(i)];
    }
    const std::u32string cps = to_code_points(obj.str_ref());
    const auto n = static_cast<int64_t>(cps.size());
    const int64_t i = norm_index(key.as_int(), n);
    if (i < 0 || i >= n) return Value::undefined("'str object' has no element " + std::to_string(key.as_int()));
    return Value(from_code_points(cps.substr(static_cast<size_t>(i), 1)));
  }
  if (key.is_string()) return get_attr(obj, key.str_ref());
  return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  require_defined(obj);
  if (!obj.is_list() && !obj.is_string()) throw Error("'" + obj.type_name() + "' object is not subscriptable with a slice");
  auto opt = [](const Value* v) -> const Value* { return v && !v->is_none() ? v : nullptr; };
  start = opt(start), stop = opt(stop), step = opt(step);
  const int64_t st = step ? int_arg(step, 1) : 1;
  if (st == 0) throw Error("slice step cannot be zero");
  std::u32string cps;
  const bool is_str = obj.is_string();
  if (is_str) cps = to_code_points(obj.str_ref());
  const int64_t n = is_str ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(obj.list().size());
  auto clamp = [&](const Value* v, int64_t def) {
    if (!v) return def;
    int64_t i = norm_index(int_arg(v, 0), n);
    if (st > 0) return std::min(std::max<int64_t>(i, 0), n);
    return std::min(std::max<int64_t>(i, -1), n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1), e = clamp(stop, st > 0 ? n : -1);
  ValueList out;
  std::u32string s;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (is_str) s.push_back(cps[static_cast<size_t>(i)]);
    else out.push_back(obj.list()[static_cast<size_t>(i)]);
  }
  return is_str ? Value(from_code_points(s)) : Value(std::move(out));
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(checked(a.str() + b.str()));
  require_defined(a);
  require_defined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(checked(a.str_ref() + b.str_ref()));
    if (a.is_list() && b.is_list()) {
      ValueList l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      if (l.size() > kMaxValueSize) throw Error("a list grew past the size limit");
      return Value(std::move(l));
    }
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = a.is_string() || a.is_list() ? a : b;
    const Value& times = &seq == &a ? b : a;
    if (times.kind() != Kind::integer && times.kind() != Kind::boolean) bad_operands(op, a, b);
    const int64_t n = std::max<int64_t>(times.as_int(), 0);
    const size_t unit = seq.is_string() ? seq.str_ref().size() : seq.list().size();
    if (unit != 0 && static_cast<size_t>(n) > kMaxValueSize / unit) throw Error("a repeated value exceeds the size limit");
    if (seq.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.str_ref();
      return Value(std::move(out));
    }
    ValueList out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
    return Value(std::move(out));
  }
  if (!a.is_number() || !b.is_number()) {
    if (op == "%" && a.is_string()) throw Error("'%' string formatting is not supported; use ~ or the format filter's callers");
    bad_operands(op, a, b);
  }
  const bool ints = a.kind() != Kind::floating && b.kind() != Kind::floating;
  const int64_t x = a.as_int(), y = b.as_int();
  const double fx = a.as_float(), fy = b.as_float();
  if (op == "+") return ints ? Value(x + y) : Value(fx + fy);
  if (op == "-") return ints ? Value(x - y) : Value(fx - fy);
  if (op == "*") return ints ? Value(x * y) : Value(fx * fy);
  if (op == "/") {
    if (fy == 0) throw Error("division by zero");
    return Value(fx / fy);
  }
  if (op == "//" || op == "%") {
    if (ints ? y == 0 : fy == 0) throw Error(op == "%" ? "modulo by zero" : "integer division by zero");
    if (ints) {
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // Python floors
      return op == "//" ? Value(q) : Value(r);
    }
    const double q = std::floor(fx / fy);
    return op == "//" ? Value(q) : Value(fx - q * fy);
  }
  if (op == "**") {
    if (ints && y >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < y; ++i) {
        r *= x;
        if (i > 64) throw Error("** result too large");
      }
      return Value(r);
    }
    return Value(std::pow(fx, fy));
  }
  bad_operands(op, a, b);
}

bool contains(const Value& haystack, const Value& needle) {
  if (haystack.is_undefined()) return false;
  if (haystack.is_string()) {
    if (!needle.is_string()) throw Error("'in <string>' requires string as left operand, not " + needle.type_name());
    return haystack.str_ref().find(needle.str_ref()) != std::string::npos;
  }
  if (haystack.is_dict()) return needle.is_string() && haystack.dict().find(needle.str_ref()) != nullptr;
  if (haystack.is_list()) {
    for (const Value& v : haystack.list())
      if (v.equals(needle)) return true;
    return false;
  }
  throw Error("argument of type '" + haystack.type_name() + "' is not iterable");
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a.equals(b);
  if (op == "!=") return !a.equals(b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  require_defined(a);
  require_defined(b);
  int c;
  if (a.is_number() && b.is_number()) c = a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
  else if (a.is_string() && b.is_string()) c = a.str_ref().compare(b.str_ref());
  else throw Error("'" + op + "' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string cps = to_code_points(s);
  std::u32string set;
  const bool ws = !chars || chars->is_none() || chars->is_undefined();
  if (!ws) set = to_code_points(str_arg(chars, "strip"));
  auto strip_it = [&](char32_t c) { return ws ? is_py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_it(cps[b])) ++b;
  if (right) while (e > b && strip_it(cps[e - 1])) --e;
  return from_code_points(cps.substr(b, e - b));
}

ValueList py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  ValueList out;
  if (sep && !sep->is_none()) {
    const std::string& d = str_arg(sep, "split");
    if (d.empty()) throw Error("split: empty separator");
    size_t b = 0;
    for (size_t at = s.find(d); at != std::string::npos && (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit);
         at = s.find(d, b)) {
      out.emplace_back(s.substr(b, at - b));
      b = at + d.size();
    }
    out.emplace_back(s.substr(b));
    return out;
  }
  const std::u32string cps = to_code_points(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = cps.size();
      while (e > i && is_py_space(cps[e - 1])) --e;
      out.emplace_back(from_code_points(cps.substr(i, e - i)));
      break;
    }
    size_t e = i;
    while (e < cps.size() && !is_py_space(cps[e])) ++e;
    out.emplace_back(from_code_points(cps.substr(i, e - i)));
    i = e;
  }
  return out;
}

std::string py_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string py_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool letter = std::isalpha(u) != 0;
    if (letter) c = static_cast<char>(prev_letter ? std::tolower(u) : std::toupper(u));
    prev_letter = letter || (u >= 0x80 && prev_letter);
  }
  return out;
}
std::string py_capitalize(const std::string& s) {
  std::string out = py_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) throw Error("replace: an empty string to replace is not supported");
  std::string out;
  size_t b = 0;
  int64_t n = 0;
  for (size_t at = s.find(from); at != std::string::npos && (count < 0 || n < count); at = s.find(from, b), ++n) {
    out.append(s, b, at - b).append(to);
    b = at + from.size();
    if (out.size() > kMaxValueSize) throw Error("a string grew past the size limit");
  }
  return out.append(s, b, std::string::npos);
}

}  // namespace brigade::jinja
