// Chat templates: each family renders what its Hugging Face Jinja template renders for the
// same conversation (expected strings written from those templates), detection from a
// chat_template, and bad input.
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

TEST(ChatTemplate, DetectedFromTokenizerConfig) {
  EXPECT_EQ(*detect_chat_family("{% for m in messages %}{{'<|im_start|>' + m['role']}}{% endfor %}"), ChatFamily::chatml);
  EXPECT_EQ(*detect_chat_family("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"), ChatFamily::llama3);
  EXPECT_EQ(*detect_chat_family("{{ bos_token + '[INST] ' + content + ' [/INST]' }}"), ChatFamily::llama2);
  EXPECT_EQ(*detect_chat_family("{{ 'User: ' + m['content'] }}{{ 'Assistant:' }}"), ChatFamily::deepseek);
  auto unknown = detect_chat_family("{{ '<start_of_turn>' + role }}");
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
