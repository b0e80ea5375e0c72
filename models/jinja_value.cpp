#include "models/jinja_value.h"

#include <cmath>

#include "models/py_json.h"
#include "models/utf8.h"

namespace brigade::jinja {

const Value* CallArgs::get(size_t pos, const std::string& name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return pos < args.size() ? &args[pos] : nullptr;
}

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void ValueDict::set(const std::string& key, Value v) {
  Value::check_nesting(v, 1);
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

Value::Value(ValueList l) : kind_(Kind::list) {
  for (const Value& e : l) check_nesting(e, 1);
  list_ = std::make_shared<ValueList>(std::move(l));
}

void Value::check_nesting(const Value& v, int depth) {
  check_nesting(depth);
  if (v.kind_ == Kind::list) {
    for (const Value& e : *v.list_) check_nesting(e, depth + 1);
  } else if (v.kind_ == Kind::dict) {
    for (const auto& [k, e] : v.dict_->items) check_nesting(e, depth + 1);
  }
}

Value Value::new_dict() { return Value(std::make_shared<ValueDict>()); }

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  check_nesting(depth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList l;
      for (const auto& e : j) l.push_back(from_json(e, depth + 1));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = new_dict();
      for (const auto& [k, v] : j.items()) d.dict().items.emplace_back(k, from_json(v, depth + 1));
      return d;
    }
    default: return none();
  }
}

nlohmann::ordered_json Value::to_json(int depth) const {
  check_nesting(depth);
  switch (kind_) {
    case Kind::none: return nullptr;
    case Kind::boolean: return as_bool();
    case Kind::integer: return i_;
    case Kind::floating: return f_;
    case Kind::string: return s_;
    case Kind::list: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& e : *list_) a.push_back(e.to_json(depth + 1));
      return a;
    }
    case Kind::dict: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& [k, v] : dict_->items) o[k] = v.to_json(depth + 1);
      return o;
    }
    case Kind::undefined: throw Error("tojson: " + undefined_message());
    case Kind::function: throw Error("tojson: a function is not JSON serializable");
  }
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean:
    case Kind::integer: return i_ != 0;
    case Kind::floating: return f_ != 0.0;
    case Kind::string: return !s_.empty();
    case Kind::list: return !list_->empty();
    case Kind::dict: return namespace_ || !dict_->items.empty();
    case Kind::function: return true;
  }
  return false;
}

namespace {

std::string py_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  return py_json_dumps(nlohmann::ordered_json(f));
}

// Python's repr of a str: single quotes unless it holds ' and no ", escapes for \\, the quote,
// \n \r \t and other control characters.
std::string py_str_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == q) out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::string: return s_;
    default: return repr();
  }
}

std::string Value::repr(int depth) const {
  check_nesting(depth);
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::none: return "None";
    case Kind::boolean: return i_ ? "True" : "False";
    case Kind::integer: return std::to_string(i_);
    case Kind::floating: return py_float_repr(f_);
    case Kind::string: return py_str_repr(s_);
    case Kind::list: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr(depth + 1);
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::dict: {
      std::string out = namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        out += (first ? "" : ", ") + py_str_repr(k) + ": " + v.repr(depth + 1);
        first = false;
      }
      return out + (namespace_ ? "}>" : "}");
    }
    case Kind::function: return "<function " + s_ + ">";
  }
  return "";
}

bool Value::equals(const Value& o, int depth) const {
  check_nesting(depth);
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::floating || o.kind_ == Kind::floating) return as_float() == o.as_float();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return s_ == o.s_;
    case Kind::list: {
      if (tuple_ != o.tuple_ || list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i)
        if (!(*list_)[i].equals((*o.list_)[i], depth + 1)) return false;
      return true;
    }
    case Kind::dict: {
      if (namespace_ || o.namespace_) return dict_ == o.dict_;
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* w = o.dict_->find(k);
        if (!w || !v.equals(*w, depth + 1)) return false;
      }
      return true;
    }
    case Kind::function: return fn_ == o.fn_;
    default: return false;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list: return "list";
    case Kind::dict: return namespace_ ? "Namespace" : "dict";
    case Kind::function: return "function";
  }
  return "?";
}

ValueList Value::items_for_iteration() const {
  switch (kind_) {
    case Kind::undefined: return {};
    case Kind::list: return *list_;
    case Kind::dict: {
      ValueList keys;
      for (const auto& [k, v] : dict_->items) keys.emplace_back(k);
      return keys;
    }
    case Kind::string: {
      ValueList chars;
      for (char32_t c : to_code_points(s_)) chars.emplace_back(from_code_points(std::u32string(1, c)));
      return chars;
    }
    default: throw Error("'" + type_name() + "' object is not iterable");
  }
}

int64_t Value::length() const {
  switch (kind_) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(to_code_points(s_).size());
    case Kind::list: return static_cast<int64_t>(list_->size());
    case Kind::dict: return static_cast<int64_t>(dict_->items.size());
    default: throw Error("object of type '" + type_name() + "' has no len()");
  }
}

std::u32string to_code_points(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {  // not UTF-8: one byte is one character (the input was validated before)
      out.push_back(static_cast<unsigned char>(s[i++]));
      continue;
    }
    out.push_back(decode_utf8(s, i, n));
    i += n;
  }
  return out;
}

std::string from_code_points(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

}  // namespace brigade::jinja
