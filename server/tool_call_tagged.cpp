// The tagged tool-call syntaxes (hermes, deepseek_v3/v31, kimi_k2, glm45, qwen3_coder, seed_oss, minimax_m2, lfm2,
// jamba, nemotron_nano_v2, apertus, ernie45, gemma4): one state machine over section and call markers
// (TaggedSyntax), and each syntax's reading of a call's body.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "models/py_json.h"
#include "server/tool_call_parser_base.h"

namespace brigade::server::tool_parse {

namespace {

using ojson = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

class TaggedParser final : public Stepper {
 public:
  TaggedParser(int max_calls, TaggedSyntax syntax) : Stepper(max_calls), s_(std::move(syntax)) {
    sectioned_ = !s_.section_open.empty();
    openers_ = sectioned_ ? s_.section_open : std::vector<std::string_view>{s_.call_open};
    openers_.insert(openers_.end(), s_.dropped.begin(), s_.dropped.end());
    inside_ = s_.section_close;
    inside_.push_back(s_.call_open);
  }

 private:
  enum class Mode { text, section, call };

  bool step(ToolParse& out, bool last) override {
    const std::string_view buf = buf_;
    switch (mode_) {
      case Mode::text: {
        const auto [at, len] = find_first(buf, openers_);
        if (at == npos) {
          const size_t keep = last ? 0 : partial_marker(buf, openers_);
          content(buf.substr(0, buf.size() - keep), out);
          buf_.erase(0, buf.size() - keep);
          return false;
        }
        content(buf.substr(0, at), out);
        const bool dropped = std::find(s_.dropped.begin(), s_.dropped.end(), buf.substr(at, len)) != s_.dropped.end();
        buf_.erase(0, at + len);
        if (!dropped) mode_ = sectioned_ ? Mode::section : Mode::call;
        return true;
      }
      case Mode::section: {
        // Whitespace between markers is no one's; after stray text it is part of that text.
        const size_t b = stray_ ? 0 : buf.find_first_not_of(kSpace);
        if (b == npos) {
          if (last) buf_.clear();
          return false;
        }
        const std::string_view rest = buf.substr(b);
        if (rest.starts_with(s_.call_open)) {
          buf_.erase(0, b + s_.call_open.size());
          mode_ = Mode::call;
          stray_ = false;
          return true;
        }
        for (std::string_view close : s_.section_close) {
          if (!rest.starts_with(close)) continue;
          buf_.erase(0, b + close.size());
          mode_ = Mode::text;
          stray_ = false;
          return true;
        }
        // Not a marker (nor the beginning of one): content up to the next marker.
        const size_t next = find_first(rest, inside_).first;
        if (next != npos) {
          content(rest.substr(0, next), out);
          buf_.erase(0, b + next);
          stray_ = true;
          return true;
        }
        const size_t keep = last ? 0 : partial_marker(rest, inside_);
        if (keep == rest.size()) return false;
        content(rest.substr(0, rest.size() - keep), out);
        buf_.erase(0, buf.size() - keep);
        stray_ = true;
        return false;
      }
      case Mode::call: {
        const size_t at = buf.find(s_.call_close);
        if (at == npos) {
          if (!last) return false;
          block(buf, false, out);
          buf_.clear();
          mode_ = Mode::text;
          return false;
        }
        block(buf.substr(0, at), true, out);
        buf_.erase(0, at + s_.call_close.size());
        mode_ = sectioned_ ? Mode::section : Mode::text;
        return true;
      }
    }
    return false;
  }

  void block(std::string_view body, bool closed, ToolParse& out) {
    const bool readable = closed || !s_.closed_only;
    if (readable && s_.calls) {
      if (auto calls = s_.calls(body); calls && !calls->empty()) {
        for (auto& c : *calls) call(std::move(c), out);
        return;
      }
    } else if (readable) {
      if (auto c = s_.body(body)) return call(std::move(*c), out);
    }
    std::string raw = std::string(s_.call_open) + std::string(body) + (closed ? std::string(s_.call_close) : "");
    content(raw, out);
  }

  TaggedSyntax s_;
  bool sectioned_ = false;
  bool stray_ = false;  // in a section, the last thing read was text that is no call
  std::vector<std::string_view> openers_;  // what leaves the text: a section's or a call's opening
  std::vector<std::string_view> inside_;   // the markers inside a section
  Mode mode_ = Mode::text;
};

// DeepSeek V3 (and R1): function<｜tool▁sep｜>NAME\n```json\n{..}\n```; V3.1: NAME<｜tool▁sep｜>{..}.
std::optional<ToolCallDelta> deepseek_call(std::string_view body) {
  static constexpr std::string_view kSep = "<｜tool▁sep｜>", kFence = "```json", kFenceEnd = "```";
  const size_t sep = body.find(kSep);
  if (sep == npos) return std::nullopt;
  const std::string_view head = trim(body.substr(0, sep)), tail = trim(body.substr(sep + kSep.size()));
  std::string_view name = head, args = tail;
  if (!tail.starts_with('{')) {  // V3: the type before the separator, the name and a fenced object after
    const size_t fence = tail.find(kFence);
    if (fence == npos) return std::nullopt;
    name = trim(tail.substr(0, fence));
    args = trim(tail.substr(fence + kFence.size()));
    if (!args.ends_with(kFenceEnd)) return std::nullopt;
    args = trim(args.substr(0, args.size() - kFenceEnd.size()));
  }
  if (!valid_function_name(name)) return std::nullopt;
  auto a = object_arguments(args);
  if (!a) return std::nullopt;
  return ToolCallDelta{0, std::string(name), std::move(*a), ""};
}

// Kimi K2: functions.NAME:IDX<|tool_call_argument_begin|>{..}; the whole id is the call's id.
std::optional<ToolCallDelta> kimi_call(std::string_view body) {
  static constexpr std::string_view kArgs = "<|tool_call_argument_begin|>";
  const size_t sep = body.find(kArgs);
  if (sep == npos) return std::nullopt;
  const std::string_view id = trim(body.substr(0, sep));
  std::string_view name = id.substr(0, id.find(':'));
  if (const size_t dot = name.rfind('.'); dot != npos) name = name.substr(dot + 1);
  if (!valid_function_name(name)) return std::nullopt;
  auto a = object_arguments(trim(body.substr(sep + kArgs.size())));
  if (!a) return std::nullopt;
  return ToolCallDelta{0, std::string(name), std::move(*a), std::string(id)};
}

// The tool's parameters schema's "properties" object as the request lists it (parsed once per
// call), or null when the tool or its properties are not listed.
ojson tool_properties(const std::vector<ToolFunction>& functions, std::string_view tool) {
  for (const ToolFunction& f : functions) {
    if (f.name != tool) continue;
    ojson schema = ojson::parse(f.parameters, nullptr, /*allow_exceptions=*/false);
    if (!schema.is_object() || !schema.contains("properties") || !schema["properties"].is_object()) return nullptr;
    return std::move(schema["properties"]);
  }
  return nullptr;
}

// The schema of parameter `key` in tool_properties' object, or null when it is not listed.
ojson parameter_schema(const ojson& properties, const std::string& key) {
  if (!properties.is_object()) return nullptr;
  auto p = properties.find(key);
  return p != properties.end() ? *p : ojson(nullptr);
}

// GLM-4.5: NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>... (whitespace between).
std::optional<ToolCallDelta> glm_call(std::string_view body, const std::vector<ToolFunction>& functions) {
  static constexpr std::string_view kKey = "<arg_key>", kKeyEnd = "</arg_key>", kValue = "<arg_value>",
                                    kValueEnd = "</arg_value>";
  const size_t cut = std::min(body.find('\n'), body.find(kKey));
  const std::string_view name = trim(body.substr(0, cut));
  if (!valid_function_name(name)) return std::nullopt;
  std::string_view rest = cut == npos ? std::string_view() : body.substr(cut);
  const ojson properties = tool_properties(functions, name);
  ojson args = ojson::object();
  while (!(rest = trim(rest)).empty()) {
    if (!rest.starts_with(kKey)) return std::nullopt;
    const size_t key_end = rest.find(kKeyEnd);
    if (key_end == npos) return std::nullopt;
    const std::string key(trim(rest.substr(kKey.size(), key_end - kKey.size())));
    rest = trim(rest.substr(key_end + kKeyEnd.size()));
    if (!rest.starts_with(kValue)) return std::nullopt;
    const size_t value_end = rest.find(kValueEnd);
    if (value_end == npos) return std::nullopt;
    const std::string_view value = rest.substr(kValue.size(), value_end - kValue.size());
    rest = rest.substr(value_end + kValueEnd.size());
    if (const ojson p = parameter_schema(properties, key); p.is_object() && p.value("type", ojson()) == "string") {
      args[key] = std::string(value);
    } else {
      const std::string_view v = trim(value);
      ojson parsed = ojson::parse(v.begin(), v.end(), nullptr, /*allow_exceptions=*/false);
      args[key] = parsed.is_discarded() ? ojson(std::string(v)) : std::move(parsed);
    }
  }
  return ToolCallDelta{0, std::string(name), py_json_dumps(args), ""};
}

// A qwen3_coder parameter's value typed by its schema, as vLLM's Qwen3CoderToolParser converts it.
ojson qwen3_coder_value(const std::string& value, const ojson& schema) {
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "null") return nullptr;
  if (schema.is_null()) return value;  // a key the schema does not list: the text
  std::string type = "string";
  if (schema.is_object() && schema.contains("type")) {
    const ojson& t = schema["type"];
    type = t.is_string() ? t.get<std::string>() : t.dump();
    type = std::string(trim(type));
    std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  }
  for (const char* s : {"string", "str", "text", "varchar", "char", "enum"})
    if (type == s) return value;
  const std::string_view v = trim(value);  // Python's int() and float() skip surrounding whitespace
  const auto starts = [&](std::initializer_list<const char*> prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](const char* p) { return type.starts_with(p); });
  };
  if (starts({"int", "uint", "long", "short", "unsigned"})) {
    std::string_view digits = v;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.remove_prefix(1);
    const bool whole = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!whole || digits.size() > 18) return value;  // not an integer (or past int64): the text
    return std::stoll(std::string(v));
  }
  if (starts({"num", "float"})) {
    // Python's float(): the whole text (locale-free); inf and nan fail int() in vLLM's check and
    // stay text.
    const std::string_view num = v.starts_with('+') ? v.substr(1) : v;
    if (num.empty() || (num.size() < v.size() && (num[0] == '+' || num[0] == '-'))) return value;
    double d = 0.0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), d);
    if (ec != std::errc() || end != num.data() + num.size() || !std::isfinite(d)) return value;
    if (d == std::trunc(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
    return d;
  }
  if (type == "boolean" || type == "bool" || type == "binary") return lower == "true";
  if (type == "object" || type == "array" || type == "arr" || type.starts_with("dict") || type.starts_with("list")) {
    ojson parsed = ojson::parse(value, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) return parsed;
  }
  if (auto literal = python_literal(value)) return *literal;
  return value;
}

// Qwen3-Coder / Qwen3.5: <function=NAME>\n<parameter=K>\nV\n</parameter>..</function>, whitespace
// around the parts; the function's or a parameter's end may be missing where the next part (or
// the block's end) follows, as vLLM's regexes read them.
std::optional<ToolCallDelta> qwen3_coder_call(std::string_view body, const std::vector<ToolFunction>& functions) {
  static constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>", kParam = "<parameter=",
                                    kParamEnd = "</parameter>";
  std::string_view rest = trim(body);
  if (!rest.starts_with(kFunction)) return std::nullopt;
  rest.remove_prefix(kFunction.size());
  const size_t name_end = rest.find('>');
  if (name_end == npos) return std::nullopt;
  const std::string_view name = trim(rest.substr(0, name_end));
  if (!valid_function_name(name)) return std::nullopt;
  rest.remove_prefix(name_end + 1);
  const size_t function_end = rest.find(kFunctionEnd);
  if (function_end != npos) {
    if (!trim(rest.substr(function_end + kFunctionEnd.size())).empty()) return std::nullopt;  // one function per block
    rest = rest.substr(0, function_end);
  }
  const ojson properties = tool_properties(functions, name);
  ojson args = ojson::object();
  while (!(rest = trim(rest)).empty()) {
    if (!rest.starts_with(kParam)) return std::nullopt;
    rest.remove_prefix(kParam.size());
    const size_t key_end = rest.find('>');
    if (key_end == npos) return std::nullopt;
    const std::string key(rest.substr(0, key_end));
    rest.remove_prefix(key_end + 1);
    const size_t end = std::min(rest.find(kParamEnd), rest.find(kParam));
    std::string_view value = rest.substr(0, end);
    rest = end == npos ? std::string_view() : rest.substr(end);
    if (rest.starts_with(kParamEnd)) rest.remove_prefix(kParamEnd.size());
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    args[key] = qwen3_coder_value(std::string(value), parameter_schema(properties, key));
  }
  return ToolCallDelta{0, std::string(name), py_json_dumps(args), ""};
}

// The JSON schema types `schema` allows, as vLLM's minimax_m2 reads them: "type" (a name or a
// list of names), the types of "enum"'s values, and those of anyOf / oneOf / allOf's schemas;
// {"string"} when none is named.
std::vector<std::string> schema_types(const ojson& schema) {
  std::vector<std::string> types;
  auto add = [&](std::string t) {
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(std::move(t));
  };
  std::function<void(const ojson&)> walk = [&](const ojson& s) {
    if (!s.is_object()) return;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) add(t->get<std::string>());
      if (t->is_array())
        for (const ojson& v : *t)
          if (v.is_string()) add(v.get<std::string>());
    }
    if (auto e = s.find("enum"); e != s.end() && e->is_array())
      for (const ojson& v : *e)
        add(v.is_null() ? "null" : v.is_boolean() ? "boolean" : v.is_number_integer() ? "integer"
            : v.is_number() ? "number" : v.is_string() ? "string" : v.is_array() ? "array" : "object");
    for (const char* choice : {"anyOf", "oneOf", "allOf"})
      if (auto c = s.find(choice); c != s.end() && c->is_array())
        for (const ojson& sub : *c) walk(sub);
  };
  walk(schema);
  if (types.empty()) types.push_back("string");
  for (std::string& t : types)
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return types;
}

// A minimax_m2 parameter's value (trimmed) typed by the types its schema allows (schema_types), as
// vLLM's MinimaxM2ToolParser converts it: the first of integer, number, boolean, object / array,
// string that the text is; else JSON, else the text. A number that is not finite is not one.
ojson minimax_value(std::string_view v, const ojson& schema) {
  std::string lower(v);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "null" || lower == "none" || lower == "nil") return nullptr;
  const std::vector<std::string> types = schema_types(schema);
  auto allows = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(),
                       [&](const char* n) { return std::find(types.begin(), types.end(), n) != types.end(); });
  };
  auto json_of = [](std::string_view text) { return ojson::parse(text.begin(), text.end(), nullptr, false); };
  if (allows({"integer", "int"})) {  // Python's int(): an optional sign and digits
    std::string_view digits = v;
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.remove_prefix(1);
    if (!digits.empty() && digits.size() <= 18 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::stoll(std::string(v));
  }
  if (allows({"number", "float"})) {  // Python's float(), a whole value as an int
    const std::string_view num = v.starts_with('+') ? v.substr(1) : v;
    double d = 0.0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), d);
    if (!num.empty() && ec == std::errc() && end == num.data() + num.size() && std::isfinite(d)) {
      if (d == std::trunc(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
      return d;
    }
  }
  if (allows({"boolean", "bool"})) {
    if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
    if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  }
  if (allows({"object", "array"})) {
    if (ojson parsed = json_of(v); !parsed.is_discarded()) return parsed;
  }
  if (allows({"string", "str", "text"})) return std::string(v);
  if (ojson parsed = json_of(v); !parsed.is_discarded()) return parsed;
  return std::string(v);
}

// A name as MiniMax writes it: trimmed, its quotes (double or single) dropped.
std::string_view unquote(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return s;
}

// MiniMax-M2: BODY is what follows `<invoke name=`: NAME>, then <parameter name=K>V</parameter>
// anywhere in the rest (other text between them is ignored, as vLLM's regexes skip it).
std::optional<ToolCallDelta> minimax_call(std::string_view body, const std::vector<ToolFunction>& functions) {
  static constexpr std::string_view kParam = "<parameter name=", kParamEnd = "</parameter>";
  const size_t name_end = body.find('>');
  if (name_end == npos || name_end == 0) return std::nullopt;
  const std::string_view name = unquote(body.substr(0, name_end));
  if (!valid_function_name(name)) return std::nullopt;
  const ojson properties = tool_properties(functions, name);
  ojson args = ojson::object();
  for (std::string_view rest = body.substr(name_end + 1);;) {
    const size_t open = rest.find(kParam);
    if (open == npos) break;
    rest.remove_prefix(open + kParam.size());
    const size_t close = rest.find(kParamEnd);
    if (close == npos) break;  // an unfinished parameter is not one
    const std::string_view param = rest.substr(0, close);
    rest.remove_prefix(close + kParamEnd.size());
    const size_t key_end = param.find('>');
    if (key_end == npos || key_end == 0) continue;
    const std::string key(unquote(param.substr(0, key_end)));
    args[key] = minimax_value(trim(param.substr(key_end + 1)), parameter_schema(properties, key));
  }
  return ToolCallDelta{0, std::string(name), py_json_dumps(args), ""};
}

// Nemotron-Nano-v2: a JSON array of {"name", "arguments"} objects, or objects without the brackets
// (vLLM's nemotron_nano_v2 puts them around what lacks them); arguments an object, or a string
// holding one (vLLM passes a string through).
std::optional<std::vector<ToolCallDelta>> nemotron_calls(std::string_view body) {
  body = trim(body);
  std::string list(body);
  if (body.starts_with('{')) list.insert(list.begin(), '['), list.push_back(']');
  const ojson j = ojson::parse(list, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<ToolCallDelta> calls;
  for (const ojson& item : j) {
    if (!item.is_object() || !item.contains("name") || !item.contains("arguments")) return std::nullopt;
    const ojson& name = item["name"];
    if (!name.is_string() || !valid_function_name(name.get_ref<const std::string&>())) return std::nullopt;
    const ojson& args = item["arguments"];
    std::optional<std::string> a = args.is_object() ? py_json_dumps(args) : std::optional<std::string>();
    if (args.is_string()) a = object_arguments(args.get_ref<const std::string&>());
    if (!a) return std::nullopt;
    calls.push_back(ToolCallDelta{0, name.get<std::string>(), std::move(*a), ""});
  }
  return calls;
}

// ERNIE 4.5: {"name", "arguments"}; arguments absent are {} (vLLM's ernie45).
std::optional<ToolCallDelta> ernie_call(std::string_view body) {
  body = trim(body);
  const ojson j = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string& name = j["name"].get_ref<const std::string&>();
  if (!valid_function_name(name)) return std::nullopt;
  if (!j.contains("arguments")) return ToolCallDelta{0, name, "{}", ""};
  if (!j["arguments"].is_object()) return std::nullopt;
  return ToolCallDelta{0, name, py_json_dumps(j["arguments"]), ""};
}

// Jamba's and Hunyuan-A13B's JSON array of {"name", "arguments"} objects, or MiniMax-M1's objects
// one a line (every non-blank line one call, as vLLM's minimax reads the lines).
std::optional<std::vector<ToolCallDelta>> tool_calls_block(std::string_view body) {
  body = trim(body);
  if (!body.starts_with('{')) return json_array_calls(body);
  std::vector<ToolCallDelta> calls;
  while (!body.empty()) {
    const size_t eol = body.find('\n');
    auto c = call_of(trim(body.substr(0, eol)), {"arguments"});
    if (!c || !valid_function_name(c->name)) return std::nullopt;
    calls.push_back(std::move(*c));
    body = eol == npos ? std::string_view() : trim(body.substr(eol));
  }
  return calls;
}

// Apertus: a JSON array of {NAME: {..arguments}} objects, one key each.
std::optional<std::vector<ToolCallDelta>> apertus_calls(std::string_view body) {
  const ojson j = ojson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<ToolCallDelta> calls;
  for (const ojson& item : j) {
    if (!item.is_object() || item.size() != 1) return std::nullopt;
    // (item.begin()'s key and value live in j; items().begin() would be a temporary proxy whose
    // key() dangles past this statement.)
    const auto first = item.begin();
    const std::string& name = first.key();
    const ojson& args = first.value();
    if (!valid_function_name(name) || !args.is_object()) return std::nullopt;
    calls.push_back(ToolCallDelta{0, name, py_json_dumps(args), ""});
  }
  return calls;
}

}  // namespace

std::unique_ptr<ToolCallParser> make_tagged_parser(int max_calls, TaggedSyntax syntax) {
  return std::make_unique<TaggedParser>(max_calls, std::move(syntax));
}

TaggedSyntax tagged_syntax(ToolParserKind kind, std::vector<ToolFunction> functions) {
  switch (kind) {
    case ToolParserKind::deepseek_v3:
      return {{"<｜tool▁calls▁begin｜>"}, {"<｜tool▁calls▁end｜>"}, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", deepseek_call};
    case ToolParserKind::kimi_k2:
      return {{"<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"},
              {"<|tool_calls_section_end|>", "<|tool_call_section_end|>"},
              "<|tool_call_begin|>",
              "<|tool_call_end|>",
              kimi_call};
    case ToolParserKind::glm45:
      return {{}, {}, "<tool_call>", "</tool_call>",
              [functions = std::move(functions)](std::string_view body) { return glm_call(body, functions); }};
    case ToolParserKind::qwen3_coder:
    case ToolParserKind::seed_oss:
      return {{}, {}, kind == ToolParserKind::seed_oss ? "<seed:tool_call>" : "<tool_call>",
              kind == ToolParserKind::seed_oss ? "</seed:tool_call>" : "</tool_call>",
              [functions = std::move(functions)](std::string_view body) { return qwen3_coder_call(body, functions); }};
    case ToolParserKind::minimax_m2:
      return {{"<minimax:tool_call>"}, {"</minimax:tool_call>"}, "<invoke name=", "</invoke>",
              [functions = std::move(functions)](std::string_view body) { return minimax_call(body, functions); }};
    case ToolParserKind::lfm2:
      return {{}, {}, "<|tool_call_start|>", "<|tool_call_end|>", nullptr,
              [](std::string_view body) { return python_call_list(body, /*json_names=*/true); }};
    case ToolParserKind::jamba:
      return {{}, {}, "<tool_calls>", "</tool_calls>", nullptr, tool_calls_block};
    case ToolParserKind::nemotron_nano_v2:
      return {{}, {}, "<TOOLCALL>", "</TOOLCALL>", nullptr, nemotron_calls};
    case ToolParserKind::apertus:
      return {{}, {}, "<|tools_prefix|>", "<|tools_suffix|>", nullptr, apertus_calls};
    case ToolParserKind::ernie45:
      return {{}, {}, "<tool_call>", "</tool_call>",
              ernie_call, nullptr, {"<response>", "</response>"}};
    case ToolParserKind::gemma4:
      // <|tool_response> is the model's stop after its calls (vLLM's gemma4 reasoning parser
      // calls it that); should its text reach the output, it is no content.
      return {{}, {}, "<|tool_call>", "<tool_call|>", gemma4_call, nullptr, {"<|tool_response>"}, /*closed_only=*/true};
    default:
      return {{}, {}, "<tool_call>", "</tool_call>",
              [](std::string_view body) { return call_of(body, {"arguments", "parameters"}); }};
  }
}

}  // namespace brigade::server::tool_parse
