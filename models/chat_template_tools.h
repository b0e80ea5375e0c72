// The tool-aware chat templates (models/chat_template.h describes the formats): what Qwen2.5's
// and Llama 3.1's Hugging Face templates render for a conversation with tools, tool calls or tool
// results. Internal to models/chat_template.cpp, which validates roles and UTF-8 first.
#pragma once

#include <span>
#include <string>

#include "core/status.h"
#include "models/chat_template.h"

namespace brigade {

// chatml (hermes format); invalid_argument for arguments that are not JSON.
Expected<std::string> render_chatml_tools(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                                          bool add_generation_prompt);
// Llama 3.1 JSON tool calling; invalid_argument as its template's raise_exception, or for
// arguments that are not JSON.
Expected<std::string> render_llama3_tools(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                                          bool add_generation_prompt);

}  // namespace brigade
