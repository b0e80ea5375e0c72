#include "models/jinja_filters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "models/jinja_ops.h"
#include "models/py_json.h"

namespace brigade::jinja {
namespace {

using Filter = Value (*)(const Value& v, CallArgs& a);
using Test = bool (*)(const Value& v, CallArgs& a);

Value arg(CallArgs& a, size_t pos, const std::string& name, const Value& def) {
  const Value* v = a.get(pos, name);
  return v ? *v : def;
}
const Value kNone = Value::none();
const Value kUndef;

// Jinja's attribute lookup for map/selectattr/sort: "a.b" walks, a number indexes.
Value lookup_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  for (;;) {
    const size_t dot = path.find('.', b);
    const std::string part = path.substr(b, dot == std::string::npos ? std::string::npos : dot - b);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = digits ? get_item(cur, Value(static_cast<int64_t>(std::atoll(part.c_str())))) : get_item(cur, Value(part));
    if (dot == std::string::npos || cur.is_undefined()) return cur;
    b = dot + 1;
  }
}

CallArgs rest(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.args.size(); ++i) r.args.push_back(a.args[i]);
  return r;
}

nlohmann::ordered_json sorted_json(const nlohmann::ordered_json& j) {
  if (j.is_array()) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& e : j) out.push_back(sorted_json(e));
    return out;
  }
  if (!j.is_object()) return j;
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  auto out = nlohmann::ordered_json::object();
  for (const auto& k : keys) out[k] = sorted_json(j.at(k));
  return out;
}

Value f_tojson(const Value& v, CallArgs& a) {
  if (arg(a, 99, "ensure_ascii", Value(false)).truthy()) throw Error("tojson: ensure_ascii=True is not supported");
  if (!arg(a, 99, "separators", kNone).is_none()) throw Error("tojson: separators are not supported");
  const Value& indent = arg(a, 0, "indent", kNone);
  nlohmann::ordered_json j = v.to_json();
  if (arg(a, 99, "sort_keys", Value(false)).truthy()) j = sorted_json(j);
  return Value(py_json_dumps(j, indent.is_none() ? -1 : static_cast<int>(indent.as_int())));
}

Value f_default(const Value& v, CallArgs& a) {
  const bool boolean = arg(a, 1, "boolean", Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return arg(a, 0, "default_value", Value(""));
  return v;
}

Value f_int(const Value& v, CallArgs& a) {
  const Value& def = arg(a, 0, "default", Value(0));
  if (v.kind() == Kind::integer || v.kind() == Kind::boolean || v.kind() == Kind::floating) return Value(v.as_int());
  if (v.is_string()) {
    const std::string s = py_strip(v.str_ref(), nullptr, true, true);
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, static_cast<int>(arg(a, 1, "base", Value(10)).as_int()));
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(d));
  }
  return def;
}

Value f_float(const Value& v, CallArgs& a) {
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    const std::string s = py_strip(v.str_ref(), nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return arg(a, 0, "default", Value(0.0));
}

Value f_join(const Value& v, CallArgs& a) {
  const std::string sep = arg(a, 0, "d", Value("")).str();
  const Value& attr = arg(a, 1, "attribute", kNone);
  std::string out;
  bool first = true;
  for (const Value& e : v.items_for_iteration()) {
    out += (first ? "" : sep) + (attr.is_none() ? e : lookup_path(e, attr.str())).str();
    first = false;
    if (out.size() > kMaxValueSize) throw Error("join: the result exceeds the size limit");
  }
  return Value(std::move(out));
}

Value f_first(const Value& v, CallArgs&) {
  ValueList l = v.items_for_iteration();
  return l.empty() ? Value::undefined("No first item, sequence was empty.") : l.front();
}
Value f_last(const Value& v, CallArgs&) {
  ValueList l = v.items_for_iteration();
  return l.empty() ? Value::undefined("No last item, sequence was empty.") : l.back();
}

Value f_map(const Value& v, CallArgs& a) {
  ValueList out;
  const Value* attr = a.get(99, "attribute");
  for (const Value& e : v.items_for_iteration()) {
    if (attr) {
      Value x = lookup_path(e, attr->str());
      if (x.is_undefined()) x = arg(a, 99, "default", kUndef);
      out.push_back(x);
    } else {
      if (a.args.empty()) throw Error("map takes a filter name or attribute=");
      CallArgs r = rest(a, 1);
      out.push_back(apply_filter(a.args[0].str(), e, r));
    }
  }
  return Value(std::move(out));
}

Value select_impl(const Value& v, CallArgs& a, bool attr_mode, bool keep) {
  ValueList out;
  const size_t test_pos = attr_mode ? 1 : 0;
  for (const Value& e : v.items_for_iteration()) {
    const Value x = attr_mode ? lookup_path(e, arg(a, 0, "attribute", Value("")).str()) : e;
    bool ok;
    if (a.args.size() <= test_pos) {
      ok = x.truthy();
    } else {
      CallArgs r = rest(a, test_pos + 1);
      ok = apply_test(a.args[test_pos].str(), x, r);
    }
    if (ok == keep) out.push_back(e);
  }
  return Value(std::move(out));
}
Value f_select(const Value& v, CallArgs& a) { return select_impl(v, a, false, true); }
Value f_reject(const Value& v, CallArgs& a) { return select_impl(v, a, false, false); }
Value f_selectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, true); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, false); }

// The key Jinja compares by: lower-cased strings unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value(py_lower(v.str_ref())) : v;
}

Value f_unique(const Value& v, CallArgs& a) {
  const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
  const Value& attr = arg(a, 1, "attribute", kNone);
  ValueList out, seen;
  for (const Value& e : v.items_for_iteration()) {
    const Value k = sort_key(attr.is_none() ? e : lookup_path(e, attr.str()), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(k); })) {
      seen.push_back(k);
      out.push_back(e);
    }
  }
  return Value(std::move(out));
}

Value f_items(const Value& v, CallArgs& a) {
  if (v.is_undefined()) return Value(ValueList{});
  if (!v.is_dict()) throw Error("items: can only get items from a mapping, not '" + v.type_name() + "'");
  CallArgs none;
  return get_attr(v, "items").call(none);
  (void)a;
}

void sort_values(ValueList& l, bool cs, bool reverse, const std::function<Value(const Value&)>& key) {
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(key(x), cs), ky = sort_key(key(y), cs);
    return reverse ? compare_op("<", ky, kx) : compare_op("<", kx, ky);
  });
}

Value f_sort(const Value& v, CallArgs& a) {
  ValueList l = v.items_for_iteration();
  const Value& attr = arg(a, 2, "attribute", kNone);
  sort_values(l, arg(a, 1, "case_sensitive", Value(false)).truthy(), arg(a, 0, "reverse", Value(false)).truthy(),
              [&](const Value& e) { return attr.is_none() ? e : lookup_path(e, attr.str()); });
  return Value(std::move(l));
}

Value f_dictsort(const Value& v, CallArgs& a) {
  CallArgs none;
  ValueList l = f_items(v, none).list();
  const bool by_value = arg(a, 1, "by", Value("key")).str() == "value";
  sort_values(l, arg(a, 0, "case_sensitive", Value(false)).truthy(), arg(a, 2, "reverse", Value(false)).truthy(),
              [&](const Value& e) { return e.list()[by_value ? 1 : 0]; });
  return Value(std::move(l));
}

Value f_indent(const Value& v, CallArgs& a) {
  const Value& width = arg(a, 0, "width", Value(4));
  const std::string ind = width.is_string() ? width.str_ref() : std::string(static_cast<size_t>(std::max<int64_t>(width.as_int(), 0)), ' ');
  const bool first = arg(a, 1, "first", Value(false)).truthy(), blank = arg(a, 2, "blank", Value(false)).truthy();
  CallArgs none;
  const ValueList lines = get_attr(Value(v.str() + "\n"), "splitlines").call(none).list();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].str_ref();
    if (i > 0) out += "\n";
    out += (i > 0 && (blank || !line.empty()) ? ind : "") + line;
  }
  return Value(first ? ind + out : out);
}

Value f_center(const Value& v, CallArgs& a) {
  const std::string s = v.str();
  const int64_t width = arg(a, 0, "width", Value(80)).as_int(), n = static_cast<int64_t>(to_code_points(s).size());
  if (width <= n) return Value(s);
  const int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

Value f_round(const Value& v, CallArgs& a) {
  const double scale = std::pow(10.0, static_cast<double>(arg(a, 0, "precision", Value(0)).as_int()));
  const std::string method = arg(a, 1, "method", Value("common")).str();
  const double x = v.as_float() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
  return Value(r / scale);
}

Value f_sum(const Value& v, CallArgs& a) {
  Value total = arg(a, 1, "start", Value(0));
  const Value& attr = arg(a, 0, "attribute", kNone);
  for (const Value& e : v.items_for_iteration()) total = binary_op("+", total, attr.is_none() ? e : lookup_path(e, attr.str()));
  return total;
}

Value min_max(const Value& v, CallArgs& a, bool max) {
  ValueList l = v.items_for_iteration();
  if (l.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  sort_values(l, arg(a, 0, "case_sensitive", Value(false)).truthy(), false, [](const Value& e) { return e; });
  return max ? l.back() : l.front();
}

Value f_reverse(const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string s = to_code_points(v.str_ref());
    std::reverse(s.begin(), s.end());
    return Value(from_code_points(s));
  }
  ValueList l = v.items_for_iteration();
  std::reverse(l.begin(), l.end());
  return Value(std::move(l));
}

Value f_escape(const Value& v, CallArgs&) {
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> m = {
      {"abs", [](const Value& v, CallArgs&) { return v.kind() == Kind::floating ? Value(std::fabs(v.as_float())) : Value(static_cast<int64_t>(std::llabs(v.as_int()))); }},
      {"attr", [](const Value& v, CallArgs& a) { return get_attr(v, arg(a, 0, "name", Value("")).str()); }},
      {"capitalize", [](const Value& v, CallArgs&) { return Value(py_capitalize(v.str())); }},
      {"center", f_center},
      {"count", [](const Value& v, CallArgs&) { return Value(v.length()); }},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", [](const Value& v, CallArgs&) { return Value(v.length()); }},
      {"list", [](const Value& v, CallArgs&) { return Value(v.items_for_iteration()); }},
      {"lower", [](const Value& v, CallArgs&) { return Value(py_lower(v.str())); }},
      {"map", f_map},
      {"max", [](const Value& v, CallArgs& a) { return min_max(v, a, true); }},
      {"min", [](const Value& v, CallArgs& a) { return min_max(v, a, false); }},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace",
       [](const Value& v, CallArgs& a) {
         return Value(py_replace(v.str(), arg(a, 0, "old", Value("")).str(), arg(a, 1, "new", Value("")).str(),
                                 arg(a, 2, "count", Value(-1)).as_int()));
       }},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", [](const Value& v, CallArgs&) { return v; }},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", [](const Value& v, CallArgs&) { return Value(v.str()); }},
      {"sum", f_sum},
      {"title", [](const Value& v, CallArgs&) { return Value(py_title(v.str())); }},
      {"tojson", f_tojson},
      {"trim", [](const Value& v, CallArgs& a) { return Value(py_strip(v.str(), a.get(0, "chars"), true, true)); }},
      {"unique", f_unique},
      {"upper", [](const Value& v, CallArgs&) { return Value(py_upper(v.str())); }},
      {"wordcount", [](const Value& v, CallArgs&) { return Value(static_cast<int64_t>(py_split(v.str(), nullptr, -1).size())); }},
  };
  return m;
}

bool t_sequence(const Value& v, CallArgs&) { return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()); }
bool t_eq(const Value& v, CallArgs& a) { return v.equals(arg(a, 0, "other", kUndef)); }
bool cmp(const Value& v, CallArgs& a, const char* op) { return compare_op(op, v, arg(a, 0, "other", kUndef)); }

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> m = {
      {"boolean", [](const Value& v, CallArgs&) { return v.kind() == Kind::boolean; }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_function(); }},
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"divisibleby", [](const Value& v, CallArgs& a) { const int64_t d = arg(a, 0, "num", Value(1)).as_int(); return d != 0 && v.as_int() % d == 0; }},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq},
      {"ne", [](const Value& v, CallArgs& a) { return !t_eq(v, a); }},
      {"!=", [](const Value& v, CallArgs& a) { return !t_eq(v, a); }},
      {"even", [](const Value& v, CallArgs&) { return v.as_int() % 2 == 0; }},
      {"odd", [](const Value& v, CallArgs&) { return v.as_int() % 2 != 0; }},
      {"false", [](const Value& v, CallArgs&) { return v.kind() == Kind::boolean && !v.as_bool(); }},
      {"true", [](const Value& v, CallArgs&) { return v.kind() == Kind::boolean && v.as_bool(); }},
      {"float", [](const Value& v, CallArgs&) { return v.kind() == Kind::floating; }},
      {"integer", [](const Value& v, CallArgs&) { return v.kind() == Kind::integer; }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"in", [](const Value& v, CallArgs& a) { return contains(arg(a, 0, "seq", kUndef), v); }},
      {"iterable", [](const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"sequence", t_sequence},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"lower", [](const Value& v, CallArgs&) { return v.is_string() && py_lower(v.str_ref()) == v.str_ref(); }},
      {"upper", [](const Value& v, CallArgs&) { return v.is_string() && py_upper(v.str_ref()) == v.str_ref(); }},
      {"sameas", [](const Value& v, CallArgs& a) {
         const Value& o = arg(a, 0, "other", kUndef);
         return v.kind() == o.kind() && (v.is_list() || v.is_dict() ? &v.list() == &o.list() || v.equals(o) : v.equals(o));
       }},
      {"lt", [](const Value& v, CallArgs& a) { return cmp(v, a, "<"); }}, {"<", [](const Value& v, CallArgs& a) { return cmp(v, a, "<"); }},
      {"le", [](const Value& v, CallArgs& a) { return cmp(v, a, "<="); }}, {"<=", [](const Value& v, CallArgs& a) { return cmp(v, a, "<="); }},
      {"gt", [](const Value& v, CallArgs& a) { return cmp(v, a, ">"); }}, {">", [](const Value& v, CallArgs& a) { return cmp(v, a, ">"); }},
      {"ge", [](const Value& v, CallArgs& a) { return cmp(v, a, ">="); }}, {">=", [](const Value& v, CallArgs& a) { return cmp(v, a, ">="); }},
  };
  return m;
}

std::string names_of(const auto& m) {
  std::string out;
  for (const auto& [k, v] : m)
    if (std::isalpha(static_cast<unsigned char>(k[0]))) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw Error("unknown filter '" + name + "' (supported: " + names_of(filters()) + ")");
  return it->second(v, args);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw Error("unknown test '" + name + "' (supported: " + names_of(tests()) + ")");
  return it->second(v, args);
}

ValueDict make_globals(std::function<std::tm()> now, std::function<void(const Value&)> on_namespace) {
  ValueDict g;
  g.set("range", Value([](CallArgs& a) {
    if (a.args.empty() || a.args.size() > 3) throw Error("range takes 1 to 3 integers");
    for (const Value& x : a.args)
      if (x.kind() != Kind::integer && x.kind() != Kind::boolean) throw Error("range takes integers, got '" + x.type_name() + "'");
    int64_t b = 0, e, s = 1;
    if (a.args.size() == 1) e = a.args[0].as_int();
    else b = a.args[0].as_int(), e = a.args[1].as_int();
    if (a.args.size() == 3) s = a.args[2].as_int();
    if (s == 0) throw Error("range() arg 3 must not be zero");
    const int64_t n = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e - s - 1) / -s : 0);
    if (n > 1'000'000) throw Error("range of " + std::to_string(n) + " items is over the limit of 1000000");
    ValueList out;
    for (int64_t i = 0; i < n; ++i) out.emplace_back(b + i * s);
    return Value(std::move(out));
  }, "range"));
  auto kw_dict = [](CallArgs& a, bool ns) {
    Value d = Value::new_dict();
    for (const Value& x : a.args) {
      if (!x.is_dict()) throw Error(std::string(ns ? "namespace" : "dict") + "() takes a mapping or keyword arguments");
      for (const auto& [k, v] : x.dict().items) d.dict().set(k, v);
    }
    for (const auto& [k, v] : a.kwargs) d.dict().set(k, v);
    return ns ? Value(std::make_shared<ValueDict>(d.dict()), true) : d;
  };
  g.set("namespace", Value([kw_dict, on_namespace](CallArgs& a) {
    Value ns = kw_dict(a, true);
    on_namespace(ns);
    return ns;
  }, "namespace"));
  g.set("dict", Value([kw_dict](CallArgs& a) { return kw_dict(a, false); }, "dict"));
  g.set("raise_exception", Value([](CallArgs& a) -> Value {
    throw RaisedError(a.args.empty() ? std::string("raise_exception") : a.args[0].str());
  }, "raise_exception"));
  g.set("strftime_now", Value([now](CallArgs& a) {
    const std::string fmt = arg(a, 0, "format", Value("")).str();
    const std::tm t = now();
    char buf[256];
    const size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &t);
    return Value(std::string(buf, n));
  }, "strftime_now"));
  return g;
}

}  // namespace brigade::jinja
