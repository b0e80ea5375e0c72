// Structured-output fields of an OpenAI/vLLM request body → GenerateOptions: OpenAI's
// response_format ({"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict"}}), vLLM's guided_json (a schema object or its text), guided_choice
// (strings; the output is exactly one of them) and guided_regex (a pattern the whole output
// matches), and SGLang's top-level `regex` (the same). guided_grammar is refused. No server
// brigade follows takes a regex inside response_format, so neither does brigade.
#pragma once

#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "core/status.h"

namespace brigade::server {

// Sets gen.response_format and gen.json_schema / gen.guided_choice / gen.regex; invalid_argument naming the
// field for a wrong shape or for two fields that both constrain the output. A schema object
// becomes its JSON text in the body's key order when `body` is an ordered_json (with
// nlohmann::json the properties come sorted by name, and so would the output's keys). The schema
// itself (and the regex) is checked by the engine (core/json_schema.h, core/regex_dfa.h), which
// refuses it with the reason.
Status read_guided_output(const nlohmann::json& body, GenerateOptions& gen);
Status read_guided_output(const nlohmann::ordered_json& body, GenerateOptions& gen);

}  // namespace brigade::server
