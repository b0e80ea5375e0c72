// Chat with images through the HTTP server in-process: OpenAI's image_url parts (data: URLs) on a
// Gemma 3 checkpoint (tests/fixtures/gemma3_vision with a synthetic tokenizer whose added tokens
// are Gemma's image tokens, and a template that writes <start_of_image> per image part as Gemma
// 3's does). The image reaches the model: the prompt counts its 16 tokens, another image changes
// the answer, and bad images are answered 400 naming the problem.
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

const std::string kFixture = std::string(BRIGADE_FIXTURES) + "/gemma3_vision";

// Gemma 3's template's handling of content (a string, or parts: an image part writes
// <start_of_image>), over turns of <start_of_turn>role ... <end_of_turn>.
constexpr const char* kTemplate =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' }}{% if "
    "message['content'] is string %}{{ message['content'] | trim }}{% else %}{% for item in message['content'] %}{% if "
    "item['type'] == 'image' %}{{ '<start_of_image>' }}{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% "
    "endif %}{% endfor %}{% endif %}{{ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<start_of_turn>model\\n' }}{% endif %}";

// The fixture's checkpoint and processor, a synthetic byte-level BPE of 300 ids whose added
// tokens 300..302 are <start_of_image>, <end_of_image> and <image_soft_token>, and kTemplate.
std::string vision_model_dir() {
  const fs::path d = fs::temp_directory_path() / ("brigade_http_vision_" + std::to_string(::getpid()));
  fs::create_directories(d);
  for (const char* f : {"config.json", "model.safetensors", "preprocessor_config.json"})
    fs::copy_file(fs::path(kFixture) / f, d / f, fs::copy_options::overwrite_existing);
  json tok = json::parse(synthetic_tokenizer_json(300).value());
  int32_t id = 300;
  for (const char* t : {"<start_of_image>", "<end_of_image>", "<image_soft_token>"})
    tok["added_tokens"].push_back({{"id", id++}, {"content", t}, {"single_word", false}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  std::ofstream(d / "tokenizer.json") << tok.dump();
  json config = json::parse(synthetic_tokenizer_config_json(256, "llama"));
  config["chat_template"] = kTemplate;
  std::ofstream(d / "tokenizer_config.json") << config.dump();
  return d.string();
}

json ask(const json& image, int top_logprobs = 0) {
  json body = {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "What is it?"}}, image}}}}},
               {"max_tokens", 2},
               {"temperature", 0}};
  if (top_logprobs > 0) body.update({{"logprobs", true}, {"top_logprobs", top_logprobs}});
  return body;
}

TEST(ServerVision, ImageUrlPartsReachTheModel) {
  testing::ChatTestServer s(vision_model_dir());
  ASSERT_TRUE(s.ok());
  const std::string png = "data:image/png;base64," + base64(read_file(fs::path(kFixture) / "image0.png"));
  auto r = s.chat(ask(image_part(png), 3));
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer = json::parse(r.body);
  // The template's text with the image marker expanded as Gemma3Processor does.
  std::string image = "\n\n<start_of_image>";
  for (int i = 0; i < 16; ++i) image += "<image_soft_token>";
  image += "<end_of_image>\n\n";
  const std::string text = "<s><start_of_turn>user\nWhat is it?" + image + "<end_of_turn>\n<start_of_turn>model\n";
  auto count = s.post("/tokenize", {{"prompt", text}, {"add_special_tokens", false}});
  ASSERT_EQ(count.status, 200) << count.body;
  EXPECT_EQ(answer["usage"]["prompt_tokens"], json::parse(count.body)["count"]);

  // Another image (160x120, resized to the tower's 56x56): the first token's alternatives move.
  const std::string other = "data:image/png;base64," + base64(read_file(fs::path(BRIGADE_FIXTURES) / "images/large_160x120.png"));
  auto r2 = s.chat(ask(image_part(other), 3));
  ASSERT_EQ(r2.status, 200) << r2.body;
  const json a = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"];
  const json b = json::parse(r2.body)["choices"][0]["logprobs"]["content"][0]["top_logprobs"];
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  double moved = 0.0;
  for (size_t i = 0; i < 3; ++i) moved = std::max(moved, std::fabs(a[i]["logprob"].get<double>() - b[i]["logprob"].get<double>()));
  EXPECT_GT(moved, 1e-2) << a.dump() << " vs " << b.dump();
}

TEST(ServerVision, BadImagesAreAnswered400NamingTheProblem) {
  testing::ChatTestServer s(vision_model_dir());
  ASSERT_TRUE(s.ok());
  auto refused = [&](const json& body, const std::string& why) {
    auto r = s.chat(body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(why), std::string::npos) << r.body;
  };
  refused(ask(image_part("https://example.com/cat.png")), "fetches no URLs");
  refused(ask(image_part("data:image/png;base64,@@@@")), "image 1 of the messages");
  refused(ask(image_part("data:image/png;base64," + base64("\x89PNG\r\n\x1a\n truncated"))), "image 1 of the messages");
  refused(ask({{"type", "image_url"}, {"image_url", 7}}), "image_url");
  json many = ask(image_part("data:,"));
  for (int i = 0; i < 16; ++i) many["messages"][0]["content"].push_back(image_part("data:,"));
  refused(many, "at most 16");
  auto ok = s.chat(ask(image_part("data:image/png;base64," + base64(read_file(fs::path(kFixture) / "image0.png")))));
  EXPECT_EQ(ok.status, 200) << ok.body;

  // A text model refuses images; its text chat is unchanged.
  testing::ChatTestServer text(testing::model_with_template("vision_text", kTemplate));
  ASSERT_TRUE(text.ok());
  auto t = text.chat(ask(image_part("data:image/png;base64," + base64(read_file(fs::path(kFixture) / "image0.png")))));
  EXPECT_EQ(t.status, 400) << t.body;
  EXPECT_NE(t.body.find("text only"), std::string::npos) << t.body;
}

}  // namespace
}  // namespace brigade::server
