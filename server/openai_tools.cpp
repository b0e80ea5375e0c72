#include "server/openai_tools.h"

#include <algorithm>

#include "core/schema_matcher.h"

namespace brigade::server {

namespace {

template <class Json>
std::string text_of(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <class Json>
Status shape_error(const std::string& field, const char* want, const Json& v) {
  return invalid_argument("'" + field + "' must be " + want + " (got " + std::string(v.type_name()) + ")");
}

// OpenAI's rule for function names.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

template <class Json>
Status read_tool(const Json& tool, size_t i, ToolRequest& out) {
  const std::string at = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object()) return shape_error(at, "an object {\"type\": \"function\", \"function\": {...}}", tool);
  auto type = tool.find("type");
  if (type == tool.end() || *type != "function")
    return invalid_argument("'" + at + ".type' must be \"function\" (the only tool type brigade serves)");
  auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object())
    return invalid_argument("'" + at + ".function' is required: an object {\"name\", \"description\", \"parameters\"}");
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string())
    return invalid_argument("'" + at + ".function.name' is required: a string");
  ToolFunction f{name->template get<std::string>(), ""};
  if (!valid_name(f.name))
    return invalid_argument("'" + at + ".function.name' \"" + f.name +
                            "\" must be 1 to 64 characters of a-z, A-Z, 0-9, underscore and dash");
  for (const auto& other : out.functions) {
    if (other.name == f.name) return invalid_argument("'" + at + ".function.name' \"" + f.name + "\" is given twice");
  }
  auto description = fn->find("description");
  if (description != fn->end() && !description->is_null() && !description->is_string())
    return shape_error(at + ".function.description", "a string", *description);
  auto strict = fn->find("strict");
  if (strict != fn->end() && !strict->is_null() && !strict->is_boolean())
    return shape_error(at + ".function.strict", "a boolean", *strict);
  auto params = fn->find("parameters");
  if (params != fn->end() && !params->is_null()) {
    if (!params->is_object()) return shape_error(at + ".function.parameters", "a JSON schema object", *params);
    f.parameters = text_of(*params);
  }
  out.tools.push_back(text_of(tool));
  out.functions.push_back(std::move(f));
  return Status::ok();
}

template <class Json>
Status read_choice(const Json& v, ToolRequest& out) {
  if (v.is_string()) {
    const std::string s = v.template get<std::string>();
    if (s == "none") out.choice = ToolChoice::none;
    else if (s == "auto") out.choice = ToolChoice::automatic;
    else if (s == "required") out.choice = ToolChoice::required;
    else return invalid_argument("'tool_choice' \"" + s + "\" is not one of: none, auto, required, or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return Status::ok();
  }
  if (!v.is_object()) return shape_error("tool_choice", "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", v);
  auto type = v.find("type");
  auto fn = v.find("function");
  auto name = fn != v.end() && fn->is_object() ? fn->find("name") : v.end();
  if (type == v.end() || *type != "function" || fn == v.end() || !fn->is_object() || name == fn->end() || !name->is_string())
    return invalid_argument("'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": string}}");
  out.choice = ToolChoice::named;
  out.named = name->template get<std::string>();
  return Status::ok();
}

template <class Json>
Status read(const Json& body, const GenerateOptions& gen, ToolRequest& out) {
  out = ToolRequest{};
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return shape_error("tools", "an array of {\"type\": \"function\", \"function\": {...}}", *tools);
    for (size_t i = 0; i < tools->size(); ++i) BRIGADE_RETURN_IF_ERROR(read_tool((*tools)[i], i, out));
  }
  out.choice = out.tools.empty() ? ToolChoice::none : ToolChoice::automatic;
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_choice(*choice, out));
    if (out.choice != ToolChoice::none && out.tools.empty())
      return invalid_argument("'tool_choice' " + text_of(*choice) + " needs 'tools': give the functions the model may call");
  }
  if (out.choice == ToolChoice::named &&
      std::none_of(out.functions.begin(), out.functions.end(), [&](const ToolFunction& f) { return f.name == out.named; }))
    return invalid_argument("'tool_choice' names the function \"" + out.named + "\", which is not in 'tools'");
  auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return shape_error("parallel_tool_calls", "a boolean", *parallel);
    out.parallel = parallel->template get<bool>();
  }
  const bool forced = out.choice == ToolChoice::required || out.choice == ToolChoice::named;
  if (forced && gen.response_format != ResponseFormat::text)
    return invalid_argument("'tool_choice' required or a named function constrains the output to a call; "
                            "drop 'response_format' / guided_* or use tool_choice \"auto\"");
  return Status::ok();
}

std::string parameters_of(const ToolFunction& f) {
  return f.parameters.empty() ? std::string(R"({"type":"object","properties":{}})") : f.parameters;
}

}  // namespace

Status read_tools(const nlohmann::json& body, const GenerateOptions& gen, ToolRequest& out) { return read(body, gen, out); }
Status read_tools(const nlohmann::ordered_json& body, const GenerateOptions& gen, ToolRequest& out) {
  return read(body, gen, out);
}

const char* forced_arguments_key(ToolFormat format) {
  return format == ToolFormat::llama3_json ? "parameters" : "arguments";
}

ToolParserKind tool_parser_kind(ToolFormat format) {
  switch (format) {
    case ToolFormat::llama3_json: return ToolParserKind::llama3_json;
    case ToolFormat::mistral: return ToolParserKind::mistral;
    case ToolFormat::deepseek_v3:
    case ToolFormat::deepseek_v31: return ToolParserKind::deepseek_v3;
    case ToolFormat::glm45: return ToolParserKind::glm45;
    case ToolFormat::qwen3_coder: return ToolParserKind::qwen3_coder;
    case ToolFormat::seed_oss: return ToolParserKind::seed_oss;
    case ToolFormat::minimax_m2: return ToolParserKind::minimax_m2;
    case ToolFormat::cohere_command3: return ToolParserKind::cohere_command3;
    case ToolFormat::kimi_k2: return ToolParserKind::kimi_k2;
    case ToolFormat::pythonic: return ToolParserKind::pythonic;
    case ToolFormat::granite: return ToolParserKind::granite;
    case ToolFormat::lfm2: return ToolParserKind::lfm2;
    case ToolFormat::jamba:
    case ToolFormat::hunyuan_a13b:
    case ToolFormat::minimax: return ToolParserKind::jamba;
    case ToolFormat::olmo3: return ToolParserKind::olmo3;
    case ToolFormat::phi4_mini_json: return ToolParserKind::phi4_mini_json;
    case ToolFormat::nemotron_nano_v2: return ToolParserKind::nemotron_nano_v2;
    case ToolFormat::apertus: return ToolParserKind::apertus;
    case ToolFormat::ernie45: return ToolParserKind::ernie45;
    case ToolFormat::gemma4: return ToolParserKind::gemma4;
    case ToolFormat::openai: return ToolParserKind::openai;
    case ToolFormat::hermes:
    case ToolFormat::none: break;
  }
  return ToolParserKind::hermes;
}

void force_tool_choice(const ToolRequest& tools, ToolFormat format, GenerateOptions& gen) {
  if (tools.choice == ToolChoice::named) {
    for (const auto& f : tools.functions) {
      if (f.name == tools.named) gen.json_schema = parameters_of(f);
    }
  } else if (tools.choice == ToolChoice::required) {
    const std::string key = forced_arguments_key(format);
    const auto call_schema = [&](const std::string& name_schema, const std::string& arguments_schema) {
      return R"({"type":"object","properties":{"name":)" + name_schema + ",\"" + key + "\":" + arguments_schema +
             "},\"required\":[\"name\",\"" + key + "\"]}";
    };
    // Built as text: each parameters schema goes in verbatim (its key order is the output's).
    std::string alts;
    if (tools.functions.size() <= static_cast<size_t>(SchemaMatcher::kMaxThreads)) {
      for (const auto& f : tools.functions) {
        if (!alts.empty()) alts += ",";
        alts += call_schema(R"({"const":)" + nlohmann::json(f.name).dump() + "}", parameters_of(f));
      }
    } else {
      // The matcher follows kMaxThreads anyOf alternatives at once, and one per tool would all be
      // alive until the names differ: the later tools could never be called. Then: any tool's
      // name, with an object of arguments (its own schema is not enforced).
      nlohmann::json names = nlohmann::json::array();
      for (const auto& f : tools.functions) names.push_back(f.name);
      alts = call_schema(R"({"enum":)" + names.dump() + "}", R"({"type":"object","additionalProperties":true})");
    }
    gen.json_schema = R"({"type":"array","minItems":1,)" + std::string(tools.parallel ? "" : R"("maxItems":1,)") +
                      R"("items":{"anyOf":[)" + alts + "]}}";
  } else {
    return;
  }
  gen.response_format = ResponseFormat::json_schema;
}

}  // namespace brigade::server
