// Tool calling in the chat templates: conversations with tools, assistant tool calls and tool
// results render byte for byte what transformers' apply_chat_template renders with the real
// Qwen2.5-Instruct, Qwen3 and Llama-3.1-Instruct Jinja templates (tests/fixtures/chat_tools/cases.json,
// written by scripts/make_chat_tool_fixtures.py), and what those templates refuse is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <vector>

#include "models/chat_template.h"
#include "tests/models/chat_test_util.h"

namespace brigade {
namespace {

using ojson = nlohmann::ordered_json;

TEST(ChatTemplateTools, RendersLikeTheHuggingFaceTemplates) {
  const ojson data = testing::load_fixture_json("chat_tools/cases.json");
  ASSERT_FALSE(data.is_discarded()) << "tests/fixtures/chat_tools/cases.json: run scripts/make_chat_tool_fixtures.py";
  ASSERT_GE(data["cases"].size(), 10u);
  for (const auto& c : data["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back(testing::openai_message(m));
    std::vector<std::string> tools;
    for (const auto& t : c["tools"]) tools.push_back(t.dump());  // key order kept
    auto family = parse_chat_family(c["family"].get<std::string>());
    ASSERT_TRUE(family.has_value());
    auto text = apply_chat_template(*family, messages, tools, c["add_generation_prompt"].get<bool>());
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    EXPECT_EQ(*text, c["expected"].get<std::string>());
  }
}

TEST(ChatTemplateTools, WithoutToolsNothingChanges) {
  const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", "U"}};
  for (ChatFamily f : {ChatFamily::llama2, ChatFamily::llama3, ChatFamily::chatml, ChatFamily::deepseek})
    EXPECT_EQ(*apply_chat_template(f, chat, {}, true), *apply_chat_template(f, chat, true));
}

TEST(ChatTemplateTools, FamiliesWithoutAToolFormatRefuse) {
  const std::vector<std::string> tools = {R"({"type":"function","function":{"name":"f"}})"};
  const std::vector<ChatMessage> chat = {{"user", "hi"}};
  const std::vector<ChatMessage> result = {{"user", "hi"}, {"tool", "42"}};
  for (ChatFamily f : {ChatFamily::llama2, ChatFamily::deepseek}) {
    EXPECT_FALSE(chat_family_has_tools(f));
    auto with_tools = apply_chat_template(f, chat, tools, true);
    EXPECT_EQ(with_tools.status().code(), StatusCode::unsupported);
    EXPECT_NE(with_tools.status().message().find("chatml"), std::string::npos) << "says which families have tools";
    EXPECT_EQ(apply_chat_template(f, result, true).status().code(), StatusCode::unsupported);
  }
  EXPECT_TRUE(chat_family_has_tools(ChatFamily::chatml));
  EXPECT_TRUE(chat_family_has_tools(ChatFamily::llama3));
}

TEST(ChatTemplateTools, WhatTheTemplatesRefuse) {
  const std::vector<std::string> tools = {R"({"type":"function","function":{"name":"f"}})"};
  ChatMessage two_calls{"assistant", ""};
  two_calls.tool_calls = {{"a", "f", "{}"}, {"b", "f", "{}"}};
  // Llama 3.1 raises "This model only supports single tool-calls at once!".
  auto llama = apply_chat_template(ChatFamily::llama3, std::vector<ChatMessage>{{"user", "x"}, two_calls}, tools, true);
  EXPECT_EQ(llama.status().code(), StatusCode::invalid_argument);
  EXPECT_TRUE(apply_chat_template(ChatFamily::chatml, std::vector<ChatMessage>{{"user", "x"}, two_calls}, tools, true));
  // ... and "Cannot put tools in the first user message when there's no first user message!".
  EXPECT_EQ(apply_chat_template(ChatFamily::llama3, std::vector<ChatMessage>{{"system", "s"}}, tools, true).status().code(),
            StatusCode::invalid_argument);
  ChatMessage bad_args{"assistant", ""};
  bad_args.tool_calls = {{"a", "f", "{not json"}};
  auto bad = apply_chat_template(ChatFamily::chatml, std::vector<ChatMessage>{{"user", "x"}, bad_args}, tools, true);
  EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("arguments"), std::string::npos);
  ChatMessage user_call{"user", "x"};
  user_call.tool_calls = {{"a", "f", "{}"}};
  EXPECT_EQ(apply_chat_template(ChatFamily::chatml, std::vector<ChatMessage>{user_call}, tools, true).status().code(),
            StatusCode::invalid_argument);
}

}  // namespace
}  // namespace brigade
