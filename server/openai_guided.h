// Structured-output fields of an OpenAI/vLLM request body → GenerateOptions: OpenAI's
// response_format ({"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict"}}), vLLM's guided_json (a schema object or its text), guided_choice
// (strings; the output is exactly one of them), guided_regex (a pattern the whole output
// matches) and guided_grammar (GBNF text; the output derives from its root rule), vLLM's newer
// structured_outputs object with one of json / json_object / regex / choice / grammar, SGLang's
// top-level `regex` and `ebnf`, and llama.cpp's `grammar`. No server brigade follows takes a
// regex inside response_format, so neither does brigade.
#pragma once

#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "core/status.h"

namespace brigade::server {

// Sets gen.response_format and gen.json_schema / gen.guided_choice / gen.regex / gen.grammar; invalid_argument naming the
// field for a wrong shape or for two fields that both constrain the output. A schema object
// becomes its JSON text in the body's key order when `body` is an ordered_json (with
// nlohmann::json the properties come sorted by name, and so would the output's keys). The schema
// itself (and the regex, the grammar) is checked by the engine (core/json_schema.h,
// core/regex_dfa.h, core/grammar.h), which refuses it with the reason before admission.
Status read_guided_output(const nlohmann::json& body, GenerateOptions& gen);
Status read_guided_output(const nlohmann::ordered_json& body, GenerateOptions& gen);

}  // namespace brigade::server
