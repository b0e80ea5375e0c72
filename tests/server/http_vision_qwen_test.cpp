// Chat with images of any size through the HTTP server in-process, on a Qwen2.5-VL checkpoint
// (tests/fixtures/qwen2_5_vl with a synthetic tokenizer whose added tokens are Qwen's vision and
// chat tokens, and Qwen2-VL's real chat template (chat_template.jinja there), which writes
// <|vision_start|><|image_pad|><|vision_end|> per image part). The server decodes the data: URL,
// resizes the image as Qwen2VLImageProcessor does (smart_resize within the processor's pixel
// bounds) and the tokenizer expands <|image_pad|> into the image's tokens: the usage counts
// them, and a larger image makes more of them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "models/synthetic_tokenizer.h"
#include "tests/server/chat_server_util.h"
#include "tests/server/vision_test_util.h"

namespace brigade::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::base64;
using testing::image_part;
using testing::png_url;
using testing::read_file;

const std::string kFixture = std::string(BRIGADE_FIXTURES) + "/qwen2_5_vl";

// The fixture's checkpoint and processor, a synthetic byte-level BPE of 300 ids whose added
// tokens 300..305 are Qwen's vision and chat markers, and the fixture's chat template.
std::string vision_model_dir() {
  const fs::path d = fs::temp_directory_path() / ("brigade_http_vision_qwen_" + std::to_string(::getpid()));
  fs::create_directories(d);
  for (const char* f : {"config.json", "model.safetensors", "preprocessor_config.json"})
    fs::copy_file(fs::path(kFixture) / f, d / f, fs::copy_options::overwrite_existing);
  json tok = json::parse(synthetic_tokenizer_json(300).value());
  int32_t id = 300;
  for (const char* t : {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|im_start|>", "<|im_end|>"})
    tok["added_tokens"].push_back({{"id", id++}, {"content", t}, {"single_word", false}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  std::ofstream(d / "tokenizer.json") << tok.dump();
  json config = json::parse(synthetic_tokenizer_config_json(4096, "qwen2"));
  config["chat_template"] = read_file(fs::path(kFixture) / "chat_template.jinja");  // Qwen2-VL's, as the Hub ships it
  std::ofstream(d / "tokenizer_config.json") << config.dump();
  return d.string();
}

json ask(const json& image) {
  return {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "What is it?"}}, image}}}}},
          {"max_tokens", 2},
          {"temperature", 0}};
}

// The prompt's tokens: the template's text with <|image_pad|> expanded to `image_tokens`.
int prompt_tokens(testing::ChatTestServer& s, int image_tokens) {
  std::string pads;
  for (int i = 0; i < image_tokens; ++i) pads += "<|image_pad|>";
  const std::string text = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is it?"
                           "<|vision_start|>" + pads + "<|vision_end|><|im_end|>\n<|im_start|>assistant\n";
  auto count = s.post("/tokenize", {{"prompt", text}, {"add_special_tokens", false}});
  EXPECT_EQ(count.status, 200) << count.body;
  return json::parse(count.body)["count"].get<int>();
}

TEST(ServerVisionQwen, ImagesOfAnySizeBecomeTheirGridsTokens) {
  testing::ChatTestServer s(vision_model_dir());
  ASSERT_TRUE(s.ok());
  // image0.png is 48 x 32 pixels: within the processor's 256..16384 pixels smart_resize keeps it,
  // 12 x 8 patches of 4 pixels, 6 x 4 = 24 tokens.
  auto r = s.chat(ask(image_part(png_url(fs::path(BRIGADE_FIXTURES) / "qwen2_5_vl/image0.png"))));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], prompt_tokens(s, 24));
  // 160 x 120 is 19200 pixels, over max_pixels: smart_resize scales it to 144 x 104 (18 x 13 merged
  // blocks of 8 pixels) = 234 tokens.
  auto big = s.chat(ask(image_part(png_url(fs::path(BRIGADE_FIXTURES) / "images/large_160x120.png"))));
  ASSERT_EQ(big.status, 200) << big.body;
  EXPECT_EQ(json::parse(big.body)["usage"]["prompt_tokens"], prompt_tokens(s, 234));
}

// The Responses API's input_image parts take the chat path: the same prompt tokens.
TEST(ServerVisionQwen, ResponsesInputImagesCountAsChatImages) {
  testing::ChatTestServer s(vision_model_dir());
  ASSERT_TRUE(s.ok());
  const json body = {{"input", {{{"role", "user"},
                                 {"content", {{{"type", "input_text"}, {"text", "What is it?"}},
                                              {{"type", "input_image"},
                                               {"image_url", png_url(fs::path(BRIGADE_FIXTURES) / "qwen2_5_vl/image0.png")}}}}}}},
                     {"max_output_tokens", 2},
                     {"temperature", 0}};
  auto r = s.post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["input_tokens"], prompt_tokens(s, 24));
  json http = body;
  http["input"][0]["content"][1]["image_url"] = "https://example.com/cat.png";
  auto refused = s.post("/v1/responses", http);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("fetches no URLs"), std::string::npos) << refused.body;
}

TEST(ServerVisionQwen, BadImagesAreAnswered400NamingTheProblem) {
  testing::ChatTestServer s(vision_model_dir());
  ASSERT_TRUE(s.ok());
  auto refused = [&](const json& body, const std::string& why) {
    auto r = s.chat(body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(why), std::string::npos) << r.body;
  };
  refused(ask(image_part("data:image/png;base64," + base64("\x89PNG\r\n\x1a\n truncated"))), "image 1 of the messages");
  refused(ask(image_part("http://example.com/a.png")), "fetches no URLs");
  auto ok = s.chat(ask(image_part(png_url(fs::path(BRIGADE_FIXTURES) / "qwen2_5_vl/image0.png"))));
  EXPECT_EQ(ok.status, 200) << ok.body;
}

}  // namespace
}  // namespace brigade::server
