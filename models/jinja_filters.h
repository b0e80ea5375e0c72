// Jinja's built-in filters and tests as jinja2 3.1 defines them, with transformers' tojson
// (json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys)), and the globals a
// chat template gets: range, namespace, dict, raise_exception(message) (throws RaisedError) and
// strftime_now(format).
//   filters: abs attr capitalize center count d default dictsort e escape first float indent int
//            items join last length list lower map max min replace reject rejectattr reverse round
//            safe select selectattr sort string sum title tojson trim unique upper wordcount
//   tests:   boolean callable defined divisibleby eq equalto even false float ge gt in integer
//            iterable le lower lt mapping ne none number odd sameas sequence string true undefined
//            upper, and == != < <= > >= (for select/reject)
// Unknown names throw Error listing the supported ones.
#pragma once

#include <ctime>
#include <functional>
#include <string>

#include "models/jinja_value.h"

namespace brigade::jinja {

Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
bool apply_test(const std::string& name, const Value& v, CallArgs& args);

// The global functions; `now` gives the local time strftime_now formats; `on_namespace` sees each
// namespace() made (the only mutable values, so the only way to a reference cycle: the renderer
// clears them when it ends).
ValueDict make_globals(std::function<std::tm()> now, std::function<void(const Value&)> on_namespace);

}  // namespace brigade::jinja
