// /v1/embeddings bodies (server/embeddings_format.h): every input form OpenAI's client sends, the
// errors of bad ones, and the response in float and base64 (OpenAI's little-endian f32 bytes;
// the expected strings are Python's base64.b64encode(struct.pack("<2f", ...))).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/embeddings_format.h"

namespace brigade::server {
namespace {

TEST(EmbeddingsFormat, ParsesEveryInputForm) {
  auto one = parse_embeddings_body(R"({"model": "m", "input": "hello"})");
  ASSERT_TRUE(one.has_value()) << one.status().to_string();
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(one->inputs[0].text, "hello");
  EXPECT_EQ(one->model, "m");
  EXPECT_EQ(one->encoding, EncodingFormat::floats);
  auto texts = parse_embeddings_body(R"({"input": ["a", "b", "c"], "encoding_format": "base64", "user": "u1"})");
  ASSERT_TRUE(texts.has_value());
  EXPECT_EQ(texts->inputs.size(), 3u);
  EXPECT_EQ(texts->encoding, EncodingFormat::base64);
  auto ids = parse_embeddings_body(R"({"input": [1, 2, 3], "dimensions": 8})");
  ASSERT_TRUE(ids.has_value());
  ASSERT_EQ(ids->inputs.size(), 1u);
  EXPECT_EQ(ids->inputs[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids->dimensions, 8);
  EXPECT_EQ(ids->embed_options(0).dimensions, 8);
  auto batch = parse_embeddings_body(R"({"input": [[1, 2], [3]]})");
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->inputs.size(), 2u);
  EXPECT_EQ(batch->embed_options(1).prompt_ids, (std::vector<int32_t>{3}));
  auto vllm = parse_embeddings_body(R"({"input": "a", "truncate_prompt_tokens": 8, "priority": 2})");
  ASSERT_TRUE(vllm.has_value()) << vllm.status().to_string();
  EXPECT_EQ(vllm->embed_options(0).truncate_prompt_tokens, 8);
  EXPECT_EQ(vllm->embed_options(0).priority, -2) << "vLLM's lower-first priority, negated";
}

// vLLM's chat form: `messages` read as a chat completion's, add_generation_prompt and
// add_special_tokens false unless asked; `input` beside it, and image parts, refused.
TEST(EmbeddingsFormat, ParsesTheChatForm) {
  auto chat = parse_embeddings_body(R"({"messages": [{"role": "user", "content": "hi"}], "dimensions": 4})");
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  ASSERT_TRUE(chat->chat.has_value());
  EXPECT_EQ(chat->chat->messages.size(), 1u);
  EXPECT_EQ(chat->chat->chat_ending, Engine::ChatEnding::none) << "vLLM's default: no generation prompt";
  EXPECT_FALSE(chat->add_special_tokens);
  EXPECT_EQ(chat->dimensions, 4);
  auto prompt = parse_embeddings_body(
      R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true, "add_special_tokens": true})");
  ASSERT_TRUE(prompt.has_value()) << prompt.status().to_string();
  EXPECT_EQ(prompt->chat->chat_ending, Engine::ChatEnding::generation_prompt);
  EXPECT_TRUE(prompt->add_special_tokens);
  EXPECT_TRUE(parse_embeddings_body(R"({"input": "a"})")->add_special_tokens) << "the input form adds them";
  EXPECT_FALSE(parse_embeddings_body(R"({"input": "a", "add_special_tokens": false})")->embed_options(0).add_bos);
  auto both = parse_embeddings_body(R"({"input": "a", "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_FALSE(both.has_value());
  EXPECT_NE(both.status().message().find("not both"), std::string::npos);
  auto image = parse_embeddings_body(
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})");
  ASSERT_FALSE(image.has_value());
  EXPECT_EQ(image.status().code(), StatusCode::unsupported);
  EXPECT_FALSE(parse_embeddings_body(R"({"messages": "hi"})").has_value());
}

TEST(EmbeddingsFormat, BadBodiesNameTheField) {
  const auto message = [](std::string_view body, int max_inputs = kMaxEmbeddingInputs) {
    auto r = parse_embeddings_body(body, max_inputs);
    EXPECT_FALSE(r.has_value()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << body;
    return r ? std::string() : r.status().message();
  };
  EXPECT_NE(message("not json").find("JSON object"), std::string::npos);
  EXPECT_NE(message(R"({"model": "m"})").find("'input' is required"), std::string::npos);
  EXPECT_NE(message(R"({"input": ""})").find("empty"), std::string::npos);
  EXPECT_NE(message(R"({"input": []})").find("empty array"), std::string::npos);
  EXPECT_NE(message(R"({"input": ["a", ""]})").find("input[1]"), std::string::npos);
  EXPECT_NE(message(R"({"input": [[1], []]})").find("input[1]"), std::string::npos);
  EXPECT_NE(message(R"({"input": ["a", [1]]})").find("mixes"), std::string::npos);
  EXPECT_NE(message(R"({"input": [1, -2]})").find("token id"), std::string::npos);
  EXPECT_NE(message(R"({"input": "a", "encoding_format": "int8"})").find("encoding_format"), std::string::npos);
  EXPECT_NE(message(R"({"input": "a", "dimensions": 0})").find("dimensions"), std::string::npos);
  EXPECT_NE(message(R"({"input": "a", "dimensions": 1.5})").find("dimensions"), std::string::npos);
  EXPECT_NE(message(R"({"input": ["a", "b", "c"]})", 2).find("at most 2"), std::string::npos);
  EXPECT_NE(message(R"({"input": "a", "truncate_prompt_tokens": 0})").find("truncate_prompt_tokens"), std::string::npos);
  EXPECT_NE(message(R"({"input": "a", "truncate_prompt_tokens": -2})").find("truncate_prompt_tokens"), std::string::npos);
}

TEST(EmbeddingsFormat, Base64IsLittleEndianF32) {
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f, -2.5f}), "AACAPwAAIMA=");
  EXPECT_EQ(base64_f32(std::vector<float>{0.1f, 2.0f, -0.0f}), "zczMPQAAAEAAAACA");
  EXPECT_EQ(base64_f32(std::vector<float>{}), "");
}

TEST(EmbeddingsFormat, ResponseHasOpenAIsShape) {
  const std::vector<Embedding> e = {{{0.1f, -0.25f}, 3}, {{1.0f, 2.0f}, 4}};
  const auto floats = nlohmann::json::parse(embeddings_body(e, EncodingFormat::floats, "tiny"));
  EXPECT_EQ(floats.at("object"), "list");
  EXPECT_EQ(floats.at("model"), "tiny");
  ASSERT_EQ(floats.at("data").size(), 2u);
  EXPECT_EQ(floats.at("data")[1].at("object"), "embedding");
  EXPECT_EQ(floats.at("data")[1].at("index"), 1);
  EXPECT_EQ(floats.at("data")[0].at("embedding")[0].get<float>(), 0.1f) << "9 digits give the float back";
  EXPECT_EQ(floats.at("usage").at("prompt_tokens"), 7);
  EXPECT_EQ(floats.at("usage").at("total_tokens"), 7);
  const auto b64 = nlohmann::json::parse(embeddings_body(e, EncodingFormat::base64, "tiny"));
  EXPECT_EQ(b64.at("data")[1].at("embedding"), "AACAPwAAAEA=");
}

}  // namespace
}  // namespace brigade::server
