#include "models/chat_template_harmony.h"

#include <nlohmann/json.hpp>

#include <ctime>

namespace brigade {
namespace {

using json = nlohmann::ordered_json;

bool is_enum(const json& s) { return s.contains("enum") && s["enum"].is_array() && !s["enum"].empty(); }

// `default: ..` as the harmony renderer writes it: a string in quotes, unless the schema is an enum.
std::string default_comment(const json& s) {
  const json& d = s["default"];
  if (d.is_string()) return is_enum(s) ? "default: " + d.get<std::string>() : "default: \"" + d.get<std::string>() + "\"";
  return "default: " + d.dump();
}

// Trailing comments join with a space.
void append_comment(std::string& comments, const std::string& more) {
  if (!comments.empty()) comments += ' ';
  comments += more;
}

std::string str(const json& s, const char* key) {
  return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : "";
}

std::string with_null(std::string type, const json& s) {
  if (s.value("nullable", false) && type.find("null") == std::string::npos) type += " | null";
  return type;
}

// A oneOf's variants, one a line: "\n{indent} | TYPE // description default: ..".
std::string variants(const json& one_of, const std::string& indent) {
  std::string out;
  for (const json& v : one_of) {
    out += "\n" + indent + " | " + with_null(harmony_typescript(v, indent + "   "), v);
    std::string comments = str(v, "description");
    if (v.contains("default")) append_comment(comments, default_comment(v));
    if (!comments.empty()) out += " // " + comments;
  }
  return out;
}

// A property whose schema is a oneOf: comments above, the name, then one variant a line.
std::string one_of_property(const std::string& key, bool required, const json& val, const std::string& indent) {
  std::string out;
  const std::string desc = str(val, "description");
  const json& alts = val["oneOf"];
  const bool above = !desc.empty() && !(alts.size() > 0 && str(alts[0], "description") == desc);
  if (above) out += indent + "// " + desc + "\n";
  if (val.contains("default")) out += indent + "// " + default_comment(val) + "\n";
  out += indent + key + (required ? "" : "?") + ":\n";
  for (size_t i = 0; i < alts.size(); ++i) {
    const json& v = alts[i];
    out += indent + " | " + with_null(harmony_typescript(v, indent + "   "), v);
    std::string comments;
    const std::string vdesc = str(v, "description");
    if (!(i == 0 && above) && !vdesc.empty() && vdesc != desc) comments = vdesc;
    if (v.contains("default")) append_comment(comments, default_comment(v));
    if (!comments.empty()) out += " // " + comments;
    out += "\n";
  }
  return out + indent + ",\n";
}

std::string object_type(const json& s, const std::string& indent) {
  std::string out;
  if (const std::string desc = str(s, "description"); !desc.empty()) out += indent + "// " + desc + "\n";
  out += "{\n";
  const json props = s.contains("properties") && s["properties"].is_object() ? s["properties"] : json::object();
  auto required = [&](const std::string& key) {
    if (!s.contains("required") || !s["required"].is_array()) return false;
    for (const json& r : s["required"])
      if (r == key) return true;
    return false;
  };
  for (const auto& [key, val] : props.items()) {
    if (const std::string title = str(val, "title"); !title.empty()) out += indent + "// " + title + "\n" + indent + "//\n";
    const bool one_of = val.contains("oneOf") && val["oneOf"].is_array();
    if (const std::string desc = str(val, "description"); !one_of && !desc.empty()) out += indent + "// " + desc + "\n";
    if (val.contains("examples") && val["examples"].is_array() && !val["examples"].empty()) {
      out += indent + "// Examples:\n";
      for (const json& ex : val["examples"])
        if (ex.is_string()) out += indent + "// - \"" + ex.get<std::string>() + "\"\n";
    }
    if (one_of) {
      out += one_of_property(key, required(key), val, indent);
      continue;
    }
    out += indent + key + (required(key) ? "" : "?") + ": " + with_null(harmony_typescript(val, indent + "    "), val) + ",";
    if (val.contains("default")) out += " // " + default_comment(val);
    out += "\n";
  }
  return out + indent + "}";
}

// A tool's `type NAME = ..;` line(s), its description above as comments.
Expected<std::string> tool_type(const std::string& text) {
  const json t = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!t.is_object()) return invalid_argument("a tool definition is not a JSON object");
  const json& f = t.contains("function") && t["function"].is_object() ? t["function"] : t;
  const std::string name = str(f, "name");
  if (name.empty()) return invalid_argument("a tool definition has no function name");
  std::string out;
  const std::string desc = str(f, "description");
  for (size_t b = 0; b < desc.size();) {
    size_t e = desc.find('\n', b);
    if (e == std::string::npos) e = desc.size();
    std::string line = desc.substr(b, e - b);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out += "// " + line + "\n";
    b = e + 1;
  }
  const json params = f.contains("parameters") ? f["parameters"] : json();
  const bool no_args = !params.is_object() || (params.value("type", "object") == "object" &&
                                               (!params.contains("properties") || params["properties"].empty()));
  if (no_args) return out + "type " + name + " = () => any;\n";
  return out + "type " + name + " = (_: " + harmony_typescript(params, "") + ") => any;\n";
}

Expected<std::string> developer_message(std::string_view instructions, std::span<const std::string> tools) {
  std::vector<std::string> sections;
  if (!instructions.empty()) {
    sections.push_back("# Instructions");
    sections.push_back(std::string(instructions));
  }
  if (!tools.empty()) {
    std::string ns = "## functions\n\nnamespace functions {\n\n";
    for (const std::string& t : tools) {
      BRIGADE_ASSIGN_OR_RETURN(std::string type, tool_type(t));
      ns += type + "\n";
    }
    sections.push_back("# Tools");
    sections.push_back(ns + "} // namespace functions");
  }
  if (sections.empty()) return std::string();
  std::string body;
  for (const std::string& s : sections) body += (body.empty() ? "" : "\n\n") + s;
  return "<|start|>developer<|message|>" + body + "<|end|>";
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

Expected<std::string> system_message(const ChatRenderOptions& options, bool has_tools) {
  const std::string effort = options.reasoning_effort.empty() ? "medium" : options.reasoning_effort;
  if (effort != "low" && effort != "medium" && effort != "high")
    return invalid_argument("reasoning_effort '" + effort + "' is not one of low, medium, high");
  std::string out = "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n";
  out += "Knowledge cutoff: 2024-06\nCurrent date: " + (options.date.empty() ? today_utc() : options.date) + "\n\n";
  out += "Reasoning: " + effort + "\n\n";
  out += "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (has_tools) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return out + "<|end|>";
}

Expected<std::string> call_message(const ChatToolCall& call) {
  const json args = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!args.is_object())
    return invalid_argument("tool call '" + call.name + "': 'arguments' is not a JSON object (give it as JSON text)");
  return "<|start|>assistant<|channel|>commentary to=functions." + call.name + " <|constrain|>json<|message|>" +
         call.arguments + "<|call|>";
}

// The function a tool result answers: the call with its tool_call_id, else the call at its place
// among the results after the last assistant's calls.
Expected<std::string> result_name(std::span<const ChatMessage> m, size_t i) {
  size_t last = i, n_results = 0;
  while (last > 0 && m[last - 1].role == "tool") {
    --last;
    ++n_results;
  }
  for (size_t j = i; j-- > 0;) {
    for (const ChatToolCall& c : m[j].tool_calls)
      if (!m[i].tool_call_id.empty() && c.id == m[i].tool_call_id) return c.name;
  }
  if (last > 0 && n_results < m[last - 1].tool_calls.size()) return m[last - 1].tool_calls[n_results].name;
  return invalid_argument("chat message " + std::to_string(i) + ": a tool result answers no earlier tool call");
}

}  // namespace

std::string harmony_typescript(const json& s, const std::string& indent) {
  if (s.contains("oneOf") && s["oneOf"].is_array()) return variants(s["oneOf"], indent);
  if (s.contains("type") && s["type"].is_array()) {
    std::string out;
    for (const json& t : s["type"]) {
      if (!t.is_string()) continue;
      out += (out.empty() ? "" : " | ") + (t == "integer" ? std::string("number") : t.get<std::string>());
    }
    if (!out.empty()) return out;
  }
  const std::string type = str(s, "type");
  if (type == "object") return object_type(s, indent);
  if (type == "string") {
    std::string out;
    if (is_enum(s))
      for (const json& v : s["enum"])
        if (v.is_string()) out += (out.empty() ? "\"" : " | \"") + v.get<std::string>() + "\"";
    return out.empty() ? "string" : out;
  }
  if (type == "number" || type == "integer") return "number";
  if (type == "boolean") return "boolean";
  if (type == "array") return s.contains("items") ? harmony_typescript(s["items"], indent) + "[]" : "Array<any>";
  return "any";
}

Expected<std::string> render_harmony(std::span<const ChatMessage> m, std::span<const std::string> tools,
                                     bool add_generation_prompt, const ChatRenderOptions& options) {
  BRIGADE_ASSIGN_OR_RETURN(std::string out, system_message(options, !tools.empty()));
  size_t i = 0;
  std::string_view instructions;
  if (!m.empty() && (m[0].role == "system" || m[0].role == "developer")) instructions = m[i++].content;
  BRIGADE_ASSIGN_OR_RETURN(std::string developer, developer_message(instructions, tools));
  out += developer;
  // The guide drops earlier chains of thought once an answer followed them: the text beside a
  // turn's calls is kept only while no final answer comes after it (as gpt-oss's template does).
  size_t last_answer = m.size();
  for (size_t j = i; j < m.size(); ++j)
    if (m[j].role == "assistant" && m[j].tool_calls.empty()) last_answer = j;
  for (; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "user") {
      out += "<|start|>user<|message|>" + msg.content + "<|end|>";
    } else if (msg.role == "tool") {
      BRIGADE_ASSIGN_OR_RETURN(std::string name, result_name(m, i));
      out += "<|start|>functions." + name + " to=assistant<|channel|>commentary<|message|>" + msg.content + "<|end|>";
    } else if (msg.tool_calls.empty()) {
      out += "<|start|>assistant<|channel|>final<|message|>" + msg.content + "<|end|>";
    } else {
      const bool answered = last_answer != m.size() && last_answer > i;
      // The turn's chain of thought: its text or its reasoning (gpt-oss's template refuses both).
      const std::string& thought = msg.content.empty() && msg.reasoning ? *msg.reasoning : msg.content;
      if (!msg.content.empty() && msg.reasoning && !msg.reasoning->empty())
        return invalid_argument("chat message " + std::to_string(i) +
                                ": an assistant turn with tool calls may carry its chain of thought as content or as "
                                "reasoning, not both (gpt-oss's template refuses both)");
      if (!thought.empty() && !answered)
        out += "<|start|>assistant<|channel|>analysis<|message|>" + thought + "<|end|>";
      for (const ChatToolCall& c : msg.tool_calls) {
        BRIGADE_ASSIGN_OR_RETURN(std::string call, call_message(c));
        out += call;
      }
    }
  }
  if (add_generation_prompt) out += "<|start|>assistant";
  return out;
}

}  // namespace brigade
