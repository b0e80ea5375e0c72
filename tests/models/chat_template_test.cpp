// The built-in chat templates (rendered when configured by name): each family renders what its
// Hugging Face Jinja template renders for the same conversation (expected strings written from
// those templates), the names, and bad input.
#include <gtest/gtest.h>

#include <vector>

#include "models/chat_template.h"

namespace brigade {
namespace {

const std::vector<ChatMessage> kChat = {
    {"system", "Be brief."}, {"user", "Hi there "}, {"assistant", "Hello!"}, {"user", "2+2?"}};

std::string render(ChatFamily f, const std::vector<ChatMessage>& m = kChat) {
  auto s = apply_chat_template(f, m, true);
  EXPECT_TRUE(s.has_value()) << s.status().to_string();
  return s ? *s : "";
}

TEST(ChatTemplate, FamiliesRenderLikeTheirJinjaTemplates) {
  EXPECT_EQ(render(ChatFamily::llama2),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi there [/INST] Hello! </s><s>[INST] 2+2? [/INST]");
  EXPECT_EQ(render(ChatFamily::llama3),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(ChatFamily::chatml),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there <|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatFamily::deepseek),
            "<｜begin▁of▁sentence｜>Be brief.\n\nUser: Hi there \n\nAssistant: Hello!<｜end▁of▁sentence｜>"
            "User: 2+2?\n\nAssistant:");
}

TEST(ChatTemplate, NamedByTheConfiguration) {
  EXPECT_EQ(*parse_chat_family("llama-2"), ChatFamily::llama2);
  EXPECT_EQ(*parse_chat_family("llama-3"), ChatFamily::llama3);
  EXPECT_EQ(*parse_chat_family("qwen"), ChatFamily::chatml);
  EXPECT_EQ(*parse_chat_family("deepseek"), ChatFamily::deepseek);
  auto unknown = parse_chat_family("gemma");
  EXPECT_EQ(unknown.status().code(), StatusCode::unsupported);
  EXPECT_NE(unknown.status().message().find("llama-3"), std::string::npos) << "lists the families";
}

TEST(ChatTemplate, BadMessagesAreRejected) {
  EXPECT_EQ(apply_chat_template(ChatFamily::chatml, std::vector<ChatMessage>{{"robot", "x"}}, true).status().code(),
            StatusCode::invalid_argument);
  EXPECT_EQ(apply_chat_template(ChatFamily::llama3, std::vector<ChatMessage>{{"user", "a"}, {"system", "b"}}, true).status().code(),
            StatusCode::invalid_argument);
  EXPECT_EQ(apply_chat_template(ChatFamily::llama2, std::vector<ChatMessage>{{"user", "bad \xc3"}}, true).status().code(),
            StatusCode::invalid_argument);
}

}  // namespace
}  // namespace brigade
