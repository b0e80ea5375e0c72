// A Kimi-K2-shaped model directory through the HTTP server in-process: a tiny synthetic decoder
// whose tokenizer is Kimi's tiktoken vocabulary (tiktoken.model and tokenizer_config.json, no
// tokenizer.json: the fixture tests/fixtures/tokenizers/tiktoken/kimi, checked against OpenAI's
// tiktoken in tokenizer_tiktoken_test.cpp) and whose chat template is Kimi-K2-Instruct's real one.
// The template's role markers are special tokens of the vocabulary (one id each in the prompt),
// the server takes the kimi_k2 tool-call syntax from the template without flags, the call markers
// (special tokens too) reach the tool-call parser, and streamed text of multi-byte characters
// equals the whole answer's.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "models/tokenizer.h"
#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatAnswer;
using testing::ChatTestServer;
namespace fs = std::filesystem;

const fs::path kKimi = fs::path(BRIGADE_FIXTURES) / "tokenizers" / "tiktoken" / "kimi";

// The model directory: tiny_llama's weights over the vocabulary's ids (its ranks and Kimi's 258
// special ids), Kimi's ranks file, and its tokenizer_config.json with the real template.
std::string kimi_model() {
  const fs::path d = fs::temp_directory_path() / ("brigade_kimi_" + std::to_string(::getpid()));
  json config = json::parse(std::ifstream(kKimi / "tokenizer_config.json"));
  int n_ranks = 0;
  std::ifstream ranks(kKimi / "tiktoken.model");
  for (std::string line; std::getline(ranks, line);) n_ranks += line.empty() ? 0 : 1;
  EXPECT_TRUE(write_synthetic_model(brigade::testing::tiny_llama(n_ranks + 258, 4096, 23), d.string()).is_ok());
  fs::remove(d / "tokenizer.json");
  fs::copy_file(kKimi / "tiktoken.model", d / "tiktoken.model", fs::copy_options::overwrite_existing);
  const std::string tmpl = brigade::testing::real_chat_template("kimi-k2");
  EXPECT_FALSE(tmpl.empty()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  config["chat_template"] = tmpl;
  std::ofstream(d / "tokenizer_config.json") << config.dump();
  return d.string();
}

int32_t id_of(const Tokenizer& tok, const std::string& special) {
  auto ids = tok.encode(special, /*add_bos=*/false);
  EXPECT_TRUE(ids.has_value() && ids->size() == 1) << special << " is one token";
  return ids && ids->size() == 1 ? ids->front() : -1;
}

TEST(ServerKimi, TiktokenVocabularyTemplateAndToolMarkers) {
  const std::string model = kimi_model();
  auto tok = Tokenizer::load(model);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const int32_t section = id_of(**tok, "<|tool_calls_section_begin|>");
  ASSERT_GE(section, 0);
  ChatTestServer s(model);
  ASSERT_TRUE(s.ok());

  // The prompt: Kimi's template over the conversation, its markers one id each.
  const json body = {{"messages", {{{"role", "user"}, {"content", "Grüße aus 東京 — 2+2?"}}}},
                     {"max_tokens", 12},
                     {"temperature", 0}};
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json whole = json::parse(r.body);
  const std::vector<ChatTurn> turns = {{.role = "user", .content = "Grüße aus 東京 — 2+2?"}};
  auto rendered = s.engine().format_chat(turns, /*add_generation_prompt=*/true);
  ASSERT_TRUE(rendered.has_value()) << rendered.status().to_string();
  EXPECT_NE(rendered->find("<|im_user|>"), std::string::npos) << *rendered;
  auto prompt_ids = (*tok)->encode(*rendered, /*add_bos=*/false);
  ASSERT_TRUE(prompt_ids.has_value());
  EXPECT_EQ(whole["usage"]["prompt_tokens"], prompt_ids->size());
  EXPECT_EQ(std::count(prompt_ids->begin(), prompt_ids->end(), id_of(**tok, "<|im_user|>")), 1);
  // Streamed, the same text (the detokenizer holds a character's bytes until it is whole).
  const ChatAnswer streamed = testing::streamed_answer(s, body);
  EXPECT_EQ(streamed.content, whole["choices"][0]["message"]["content"]);

  // With tools, the template's kimi_k2 syntax reads the output, and the section marker, a special
  // token, reaches the parser: twice, the first opens a section (dropped, as vLLM's kimi_k2 drops
  // it) and the second, no call there, is stray text of it, content. Skipped, both would vanish.
  json tools = body;
  tools["tools"] = testing::weather_and_time_tools();
  tools["max_tokens"] = 2;
  tools["logit_bias"] = {{std::to_string(section), 100}};
  for (const ChatAnswer& cut : {testing::whole_answer(s, tools), testing::streamed_answer(s, tools)}) {
    EXPECT_EQ(cut.content, "<|tool_calls_section_begin|>");
    EXPECT_TRUE(cut.calls.empty());
  }
  // Without tools the special tokens' text is skipped, as any special token's.
  tools.erase("tools");
  EXPECT_EQ(testing::whole_answer(s, tools).content, "");
}

}  // namespace
}  // namespace brigade::server
