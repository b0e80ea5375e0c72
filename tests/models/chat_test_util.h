// Shared by the chat template tests: the committed fixtures written by the chat fixture scripts,
// and OpenAI messages (as a client sends them) as brigade's ChatMessage.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "models/chat_template.h"

namespace brigade::testing {

// tests/fixtures/<relative>, parsed; discarded when missing or not JSON.
inline nlohmann::ordered_json load_fixture_json(const std::string& relative) {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str(), nullptr, false);
}

// {"role", "content" (string or null), "tool_calls"?, "tool_call_id"?} → ChatMessage.
inline ChatMessage openai_message(const nlohmann::ordered_json& m) {
  ChatMessage msg{m["role"].get<std::string>(), m["content"].is_string() ? m["content"].get<std::string>() : ""};
  if (m.contains("tool_calls")) {
    for (const auto& c : m["tool_calls"])
      msg.tool_calls.push_back({c["id"].get<std::string>(), c["function"]["name"].get<std::string>(),
                                c["function"]["arguments"].get<std::string>()});
  }
  if (m.contains("tool_call_id")) msg.tool_call_id = m["tool_call_id"].get<std::string>();
  return msg;
}

}  // namespace brigade::testing
