// Shared by the chat template tests: the committed fixtures written by the chat fixture scripts,
// and OpenAI messages (as a client sends them) as brigade's ChatMessage.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/chat_template.h"

namespace brigade::testing {

// tests/fixtures/<relative>, parsed; discarded when missing or not JSON.
inline nlohmann::ordered_json load_fixture_json(const std::string& relative) {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str(), nullptr, false);
}

// {"role", "content" (string or null), "tool_calls"?, "tool_call_id"?, "reasoning_content"?,
// "reasoning"?} → ChatMessage.
inline ChatMessage openai_message(const nlohmann::ordered_json& m) {
  ChatMessage msg{m["role"].get<std::string>(), m["content"].is_string() ? m["content"].get<std::string>() : ""};
  if (m.contains("tool_calls")) {
    for (const auto& c : m["tool_calls"])
      msg.tool_calls.push_back({c["id"].get<std::string>(), c["function"]["name"].get<std::string>(),
                                c["function"]["arguments"].get<std::string>()});
  }
  if (m.contains("tool_call_id")) msg.tool_call_id = m["tool_call_id"].get<std::string>();
  // An assistant turn's reasoning: `reasoning` wins over `reasoning_content`, as the server reads them.
  for (const char* key : {"reasoning_content", "reasoning"})
    if (m.contains(key) && m[key].is_string()) msg.reasoning = m[key].get<std::string>();
  return msg;
}

// tests/fixtures/chat_templates/models.json (scripts/make_chat_template_fixtures.py): real
// templates ("templates": name → {template, bos_token, eos_token}) and what transformers renders
// with them ("cases").
inline const nlohmann::ordered_json& chat_template_fixtures() {
  static const nlohmann::ordered_json data = load_fixture_json("chat_templates/models.json");
  return data;
}

// tests/fixtures/chat_templates/templates/<name>.jinja, a real template copied as is (those
// models.json does not render too); empty when absent.
inline std::string chat_template_file(const std::string& name) {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/chat_templates/templates/" + name + ".jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A real template's source by name ("qwen2.5", "llama-3.1", ...); empty when absent.
inline std::string real_chat_template(const std::string& name) {
  const auto& t = chat_template_fixtures()["templates"];
  return t.contains(name) ? t[name]["template"].get<std::string>() : "";
}

// The models.json case of `name` rendering `conversation` (without template variables); null when
// there is none.
inline nlohmann::ordered_json chat_template_case(const std::string& name, const std::string& conversation,
                                                 bool add_generation_prompt) {
  for (const auto& c : chat_template_fixtures()["cases"])
    if (c["template"] == name && c["conversation"] == conversation && c["add_generation_prompt"] == add_generation_prompt &&
        !c.contains("template_kwargs"))
      return c;
  return nullptr;
}

// A case's messages and tools (each tool's JSON text) as the template renderers take them.
inline std::vector<ChatMessage> case_messages(const nlohmann::ordered_json& c) {
  std::vector<ChatMessage> out;
  for (const auto& m : c["messages"]) out.push_back(openai_message(m));
  return out;
}
inline std::vector<std::string> case_tools(const nlohmann::ordered_json& c) {
  std::vector<std::string> out;
  if (c["tools"].is_array())
    for (const auto& t : c["tools"]) out.push_back(t.dump());
  return out;
}

}  // namespace brigade::testing
