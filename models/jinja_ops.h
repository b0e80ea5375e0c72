// Jinja's operators and lookups with the Python semantics chat templates rely on: `a.b` tries an
// attribute (a method such as str.strip or dict.items) and falls back to the item, `a[b]` the
// other way round, and a missing one is Undefined (naming what was missing) rather than an error;
// slices and negative indexes as in Python, counting characters for strings. Throws jinja::Error
// ("unsupported operand type(s) for +: 'str' and 'int'", or the undefined's message) when an
// operation cannot apply.
#pragma once

#include <string>

#include "models/jinja_value.h"

namespace brigade::jinja {

// Strings and lists are capped at this many bytes/elements (a template that doubles a string in
// a loop fails instead of exhausting memory).
constexpr size_t kMaxValueSize = size_t{64} << 20;

Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; null pointers for omitted parts.
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);
// + - * / // % ** ~
Value binary_op(const std::string& op, const Value& a, const Value& b);
// == != < <= > >= in, "not in"
bool compare_op(const std::string& op, const Value& a, const Value& b);
// Python's `needle in haystack` (haystack undefined: false).
bool contains(const Value& haystack, const Value& needle);
// Python's str.strip/lstrip/rstrip: chars null strips whitespace.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
// Python's str.split(sep, maxsplit); sep null or none splits on whitespace runs.
ValueList py_split(const std::string& s, const Value* sep, int64_t maxsplit);
// Python's str.upper/lower/title/capitalize (ASCII letters change case; other characters are kept).
std::string py_upper(std::string s);
std::string py_lower(std::string s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
// Throws Error naming the undefined when v is undefined.
const Value& require_defined(const Value& v);

}  // namespace brigade::jinja
