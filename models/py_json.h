// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, which is what
// Hugging Face chat templates emit through their `tojson` filter (transformers overrides Jinja's
// filter with json.dumps): ", " and ": " separators on one line, or with indent = n each member
// on its own line indented n spaces per level and "," / ": " separators; keys in the value's own
// order (pass an ordered_json to keep a request's order); strings escaped only where JSON needs
// it (", \, control characters; \u00XX in lower-case hex), the rest written as UTF-8; floats as
// Python's repr (shortest round trip, exponent form below 1e-4 and from 1e16 on).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace brigade {

// indent < 0: one line. Strings are written byte for byte (parsed JSON's are valid UTF-8).
std::string py_json_dumps(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace brigade
