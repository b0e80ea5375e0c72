#include "server/openai_guided.h"

namespace brigade::server {

namespace {

template <class Json>
Status shape_error(const std::string& field, const char* want, const Json& v) {
  return invalid_argument("'" + field + "' must be " + want + " (got " + std::string(v.type_name()) + ")");
}

// A schema given as an object (or boolean) or as its text.
template <class Json>
Status read_schema(const Json& v, const std::string& field, std::string& out) {
  if (v.is_string()) {
    out = v.template get<std::string>();
  } else if (v.is_object() || v.is_boolean()) {
    out = v.dump(-1, ' ', false, Json::error_handler_t::replace);  // invalid UTF-8 → U+FFFD, never a throw
  } else {
    return shape_error(field, "a JSON schema (an object, or its text)", v);
  }
  return Status::ok();
}

template <class Json>
Status read_response_format(const Json& rf, GenerateOptions& gen) {
  if (!rf.is_object()) return shape_error("response_format", "an object", rf);
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) return invalid_argument("'response_format' needs a string 'type'");
  const std::string t = type->template get<std::string>();
  if (t == "text") {
    gen.response_format = ResponseFormat::text;
  } else if (t == "json_object") {
    gen.response_format = ResponseFormat::json_object;
  } else if (t == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
      return invalid_argument("'response_format' json_schema needs a 'json_schema' object with a 'schema'");
    auto name = js->find("name");
    if (name != js->end() && !name->is_string()) return shape_error("response_format.json_schema.name", "a string", *name);
    auto strict = js->find("strict");  // brigade always enforces the schema
    if (strict != js->end() && !strict->is_null() && !strict->is_boolean())
      return shape_error("response_format.json_schema.strict", "a boolean", *strict);
    auto schema = js->find("schema");
    if (schema == js->end()) return invalid_argument("'response_format.json_schema' needs a 'schema'");
    BRIGADE_RETURN_IF_ERROR(read_schema(*schema, "response_format.json_schema.schema", gen.json_schema));
    gen.response_format = ResponseFormat::json_schema;
  } else {
    return invalid_argument("'response_format.type' must be text, json_object or json_schema (got " +
                            type->dump(-1, ' ', false, Json::error_handler_t::replace) + ")");
  }
  return Status::ok();
}

template <class Json>
Status read_guided_choice(const Json& v, const std::string& field, GenerateOptions& gen) {
  if (!v.is_array() || v.empty()) return shape_error(field, "a non-empty array of strings", v);
  gen.guided_choice.clear();
  for (const auto& c : v) {
    if (!c.is_string()) return shape_error(field + "[]", "a string", c);
    gen.guided_choice.push_back(c.template get<std::string>());
  }
  gen.response_format = ResponseFormat::choice;
  return Status::ok();
}

template <class Json>
Status read_regex(const Json& v, const std::string& field, GenerateOptions& gen) {
  if (!v.is_string() || v.template get<std::string>().empty())
    return shape_error(field, "a non-empty string (a regex the whole output matches)", v);
  gen.regex = v.template get<std::string>();
  gen.response_format = ResponseFormat::regex;
  return Status::ok();
}

template <class Json>
Status read_grammar(const Json& v, const std::string& field, GenerateOptions& gen) {
  if (!v.is_string() || v.template get<std::string>().empty())
    return shape_error(field, "a non-empty string (a GBNF grammar; the whole output derives from its root rule)", v);
  gen.grammar = v.template get<std::string>();
  gen.response_format = ResponseFormat::grammar;
  return Status::ok();
}

// vLLM's structured_outputs (which replaced its guided_* fields in v0.12): one of json, regex,
// choice, grammar or json_object. n_constraints counts the keys set.
template <class Json>
Status read_structured_outputs(const Json& so, GenerateOptions& gen, int& n_constraints) {
  if (!so.is_object()) return shape_error("structured_outputs", "an object", so);
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    const std::string field = "structured_outputs." + key;
    if (key == "json") {
      BRIGADE_RETURN_IF_ERROR(read_schema(value, field, gen.json_schema));
      gen.response_format = ResponseFormat::json_schema;
    } else if (key == "json_object") {
      if (!value.is_boolean()) return shape_error(field, "a boolean", value);
      if (!value.template get<bool>()) continue;
      gen.response_format = ResponseFormat::json_object;
    } else if (key == "regex") {
      BRIGADE_RETURN_IF_ERROR(read_regex(value, field, gen));
    } else if (key == "choice") {
      BRIGADE_RETURN_IF_ERROR(read_guided_choice(value, field, gen));
    } else if (key == "grammar") {
      BRIGADE_RETURN_IF_ERROR(read_grammar(value, field, gen));
    } else {
      return invalid_argument("'" + field + "' is not supported (structured_outputs takes json, json_object, regex, choice or grammar)");
    }
    ++n_constraints;
  }
  return Status::ok();
}

template <class Json>
Status read_guided(const Json& body, GenerateOptions& gen) {
  int n_constraints = 0;
  auto rf = body.find("response_format");
  if (rf != body.end() && !rf->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_response_format(*rf, gen));
    n_constraints += gen.response_format != ResponseFormat::text;
  }
  auto gj = body.find("guided_json");
  if (gj != body.end() && !gj->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_schema(*gj, "guided_json", gen.json_schema));
    gen.response_format = ResponseFormat::json_schema;
    ++n_constraints;
  }
  auto gc = body.find("guided_choice");
  if (gc != body.end() && !gc->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_guided_choice(*gc, "guided_choice", gen));
    ++n_constraints;
  }
  for (const char* field : {"guided_regex", "regex"}) {  // vLLM's, SGLang's
    auto re = body.find(field);
    if (re == body.end() || re->is_null()) continue;
    BRIGADE_RETURN_IF_ERROR(read_regex(*re, field, gen));
    ++n_constraints;
  }
  for (const char* field : {"guided_grammar", "grammar", "ebnf"}) {  // vLLM's, llama.cpp's, SGLang's
    auto g = body.find(field);
    if (g == body.end() || g->is_null()) continue;
    BRIGADE_RETURN_IF_ERROR(read_grammar(*g, field, gen));
    ++n_constraints;
  }
  auto so = body.find("structured_outputs");
  if (so != body.end() && !so->is_null()) BRIGADE_RETURN_IF_ERROR(read_structured_outputs(*so, gen, n_constraints));
  if (n_constraints > 1)
    return invalid_argument("give at most one of 'response_format' (json_object, json_schema), 'guided_json', "
                            "'guided_choice', 'guided_regex' (or 'regex'), 'guided_grammar' (or 'grammar', 'ebnf') "
                            "and one key of 'structured_outputs'");
  return Status::ok();
}

}  // namespace

Status read_guided_output(const nlohmann::json& body, GenerateOptions& gen) { return read_guided(body, gen); }
Status read_guided_output(const nlohmann::ordered_json& body, GenerateOptions& gen) { return read_guided(body, gen); }

}  // namespace brigade::server
