// The values of the Jinja interpreter (models/jinja_template.h), with Python's semantics where
// Hugging Face chat templates observe them: truthiness, equality (1 == 1.0 == True), str() and
// repr() printing ("None", "True", "['a', 1]"), dicts keeping insertion order, lists and dicts
// shared by reference as Python objects are. Strings are UTF-8; where Python counts characters
// (length, indexing, slicing) these count code points.
//
// Undefined is Jinja's default Undefined: it prints as "", is falsy, iterates as empty, has
// length 0, and fails (jinja::Error) when an attribute, item or operator needs its value.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace brigade::jinja {

// A template error (parse or render); jinja_template.cpp turns it into a Status. Never escapes
// JinjaTemplate's public functions.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The template called raise_exception(message).
struct RaisedError : Error {
  using Error::Error;
};
// A render limit (output size, steps, depth) was reached.
struct LimitError : Error {
  using Error::Error;
};

class Value;
using ValueList = std::vector<Value>;
struct ValueDict;

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The keyword `name`, else positional `pos`, else nullptr.
  const Value* get(size_t pos, const std::string& name) const;
};
using Function = std::function<Value(CallArgs&)>;  // throws Error

enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, function };

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string hint) {
    Value v;
    v.s_ = std::move(hint);
    return v;
  }
  static Value none() { return Value(Kind::none); }
  Value(bool b) : kind_(Kind::boolean), i_(b) {}  // NOLINT
  Value(int v) : kind_(Kind::integer), i_(v) {}   // NOLINT
  Value(int64_t v) : kind_(Kind::integer), i_(v) {}  // NOLINT
  Value(double v) : kind_(Kind::floating), f_(v) {}  // NOLINT
  Value(std::string s) : kind_(Kind::string), s_(std::move(s)) {}  // NOLINT
  Value(const char* s) : kind_(Kind::string), s_(s) {}  // NOLINT
  static void check_nesting(int depth) {
    if (depth > kMaxNesting) throw Error("a value nests deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  // Walks v's containers, Error past kMaxNesting levels below `depth`.
  static void check_nesting(const Value& v, int depth);
  // Error when an element nests kMaxNesting levels deep (so destruction, printing and
  // comparison recurse a bounded depth).
  Value(ValueList l);  // NOLINT
  Value(std::shared_ptr<ValueDict> d, bool is_namespace = false)  // NOLINT
      : kind_(Kind::dict), dict_(std::move(d)), namespace_(is_namespace) {}
  Value(Function f, std::string name)
      : kind_(Kind::function), s_(std::move(name)), fn_(std::make_shared<Function>(std::move(f))) {}
  static Value new_dict();
  // A Python tuple: a list that prints as (a, b) and is never equal to a list.
  static Value tuple(ValueList l) {
    Value v(std::move(l));
    v.tuple_ = true;
    return v;
  }
  // nlohmann JSON to Value (objects keep their order); and back, for tojson (Error for values
  // JSON cannot hold). Error for nesting deeper than kMaxNesting, as for repr and equals: the
  // recursion is bounded whatever a request or a template builds.
  static constexpr int kMaxNesting = 256;
  static Value from_json(const nlohmann::ordered_json& j, int depth = 0);
  nlohmann::ordered_json to_json(int depth = 0) const;

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating || kind_ == Kind::boolean; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_namespace() const { return kind_ == Kind::dict && namespace_; }
  bool is_tuple() const { return kind_ == Kind::list && tuple_; }
  bool is_function() const { return kind_ == Kind::function; }
  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return kind_ == Kind::floating ? static_cast<int64_t>(f_) : i_; }
  double as_float() const { return kind_ == Kind::floating ? f_ : static_cast<double>(i_); }
  const std::string& str_ref() const { return s_; }  // string contents; undefined: its hint
  ValueList& list() const { return *list_; }
  ValueDict& dict() const { return *dict_; }
  Value call(CallArgs& args) const { return (*fn_)(args); }
  const std::string& function_name() const { return s_; }

  bool truthy() const;
  // Python's str(value): what {{ value }} prints (undefined prints "").
  std::string str() const;
  // Python's repr(value): how a value prints inside a printed list or dict.
  std::string repr(int depth = 0) const;
  // Python's ==.
  bool equals(const Value& o, int depth = 0) const;
  // The Python type name used in error messages ("str", "dict", "int", "undefined", ...).
  std::string type_name() const;
  // Elements for iteration (a dict iterates its keys, a string its characters); Error if not
  // iterable; undefined gives none.
  ValueList items_for_iteration() const;
  // Python's len(); Error when it has none.
  int64_t length() const;
  // The hint an undefined carries, as Jinja's UndefinedError says it.
  std::string undefined_message() const { return s_.empty() ? "a value is undefined" : s_; }

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::undefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Function> fn_;
  bool namespace_ = false;
  bool tuple_ = false;
};

// A dict with string keys in insertion order (templates only use string keys).
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  // Error when v nests too deep (Value::check_nesting).
  void set(const std::string& key, Value v);
};

// The code points of a UTF-8 string, and back (for Python's character-counted operations).
std::u32string to_code_points(const std::string& s);
std::string from_code_points(const std::u32string& s);
// Python's str.isspace for one code point.
bool is_py_space(char32_t c);

}  // namespace brigade::jinja
