#include "models/chat_template_tools.h"

#include <nlohmann/json.hpp>

#include "models/py_json.h"

namespace brigade {
namespace {

using json = nlohmann::ordered_json;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// A tool call's arguments as the template's `tojson` prints them (vLLM parses the OpenAI
// arguments string into an object before rendering).
Expected<std::string> arguments_json(const ChatToolCall& call) {
  json args = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded())
    return invalid_argument("tool call '" + call.name + "': 'arguments' is not valid JSON (give the arguments object as JSON text)");
  return py_json_dumps(args);
}

Expected<std::string> tool_json(const std::string& tool, int indent) {
  json t = json::parse(tool, nullptr, /*allow_exceptions=*/false);
  if (t.is_discarded()) return invalid_argument("a tool definition is not valid JSON");
  return py_json_dumps(t, indent);
}

}  // namespace

Expected<std::string> render_chatml_tools(std::span<const ChatMessage> m, std::span<const std::string> tools,
                                          bool gen) {
  std::string out;
  const bool has_system = !m.empty() && m[0].role == "system";
  if (!tools.empty()) {
    out = "<|im_start|>system\n";
    if (has_system) out.append(m[0].content).append("\n\n");
    out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const std::string& t : tools) {
      BRIGADE_ASSIGN_OR_RETURN(std::string text, tool_json(t, -1));
      out.append("\n").append(text);
    }
    out += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (has_system) {
    out.append("<|im_start|>system\n").append(m[0].content).append("<|im_end|>\n");
  }
  for (size_t i = has_system ? 1 : 0; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "tool") {
      if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
      out.append("\n<tool_response>\n").append(msg.content).append("\n</tool_response>");
      if (i + 1 == m.size() || m[i + 1].role != "tool") out += "<|im_end|>\n";
    } else if (msg.role == "assistant" && !msg.tool_calls.empty()) {
      out += "<|im_start|>assistant";
      if (!msg.content.empty()) out.append("\n").append(msg.content);
      for (const ChatToolCall& call : msg.tool_calls) {
        BRIGADE_ASSIGN_OR_RETURN(std::string args, arguments_json(call));
        out.append("\n<tool_call>\n{\"name\": \"").append(call.name).append("\", \"arguments\": ").append(args);
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else {
      out.append("<|im_start|>").append(msg.role).append("\n").append(msg.content).append("<|im_end|>\n");
    }
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

Expected<std::string> render_llama3_tools(std::span<const ChatMessage> m, std::span<const std::string> tools,
                                          bool gen) {
  std::string out = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n";
  std::string system;
  if (!m.empty() && m[0].role == "system") {
    system = trim(m[0].content);
    m = m.subspan(1);
  }
  if (!tools.empty()) out += "Environment: ipython\n";
  out.append("Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n").append(system).append("<|eot_id|>");
  if (!tools.empty()) {
    // Llama 3.1's default tools_in_user_message: the tools go into the first message after the system.
    if (m.empty())
      return invalid_argument("the llama-3 template puts the tools in the first user message, and there is none: add one");
    out += "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for "
           "a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
           "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n";
    for (const std::string& t : tools) {
      BRIGADE_ASSIGN_OR_RETURN(std::string text, tool_json(t, 4));
      out.append(text).append("\n\n");
    }
    out.append(trim(m[0].content)).append("<|eot_id|>");
    m = m.subspan(1);
  }
  for (const ChatMessage& msg : m) {
    if (!msg.tool_calls.empty()) {
      if (msg.tool_calls.size() != 1)
        return invalid_argument("the llama-3 template takes one tool call per assistant message (got " +
                                std::to_string(msg.tool_calls.size()) + "); split them into separate turns");
      const ChatToolCall& call = msg.tool_calls[0];
      BRIGADE_ASSIGN_OR_RETURN(std::string args, arguments_json(call));
      out.append("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"").append(call.name);
      out.append("\", \"parameters\": ").append(args).append("}<|eot_id|>");
    } else if (msg.role == "tool") {
      // A string is `iterable` in Jinja, so the template prints the result through tojson.
      out.append("<|start_header_id|>ipython<|end_header_id|>\n\n").append(py_json_dumps(msg.content)).append("<|eot_id|>");
    } else {
      out.append("<|start_header_id|>").append(msg.role).append("<|end_header_id|>\n\n").append(trim(msg.content));
      out += "<|eot_id|>";
    }
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace brigade
