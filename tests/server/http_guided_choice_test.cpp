// guided_choice through the HTTP server in-process: a choice that begins with a space, a newline
// or a multi-byte character comes back byte for byte (chat and completions, whole and streamed),
// as vLLM's (each choice a literal of an EBNF alternation; no JSON whitespace before it); a
// choice the model's vocabulary cannot spell is refused with a 400 naming it, instead of an
// output cut short. Models: the synthetic byte-level BPE vocabulary ("Ġ" pieces) and XLM-R's real
// SentencePiece Unigram vocabulary ("▁" pieces, no byte fallback; tests/fixtures/tokenizers/unigram/xlmr).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatTestServer;

json chat_body(const json& choices) {
  return {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Pick one."}}}}, {"guided_choice", choices},
          {"max_tokens", 40}, {"temperature", 0}};
}
json completion_body(const json& choices) {
  return {{"model", "tiny"}, {"prompt", "Pick one:"}, {"guided_choice", choices}, {"max_tokens", 40}, {"temperature", 0}};
}

// The text of a completion streamed, its chunks joined; finish: the last finish_reason.
std::string streamed_completion(const ChatTestServer& s, json body, std::string& finish) {
  body["stream"] = true;
  const std::string raw = s.stream_raw("/v1/completions", body);
  std::string text;
  size_t at = 0;
  while ((at = raw.find("data: ", at)) != std::string::npos) {
    const size_t end = raw.find("\n\n", at);
    const std::string event = raw.substr(at + 6, end - at - 6);
    at = end;
    if (event == "[DONE]") break;
    const json ch = json::parse(event)["choices"][0];
    text += ch["text"].get<std::string>();
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"].get<std::string>();
  }
  return text;
}

// Each choice, alone, comes back exactly from both endpoints, whole and streamed.
void expect_exact(const ChatTestServer& s, const std::string& choice) {
  SCOPED_TRACE("choice '" + choice + "'");
  const testing::ChatAnswer whole = testing::whole_answer(s, chat_body({choice}));
  EXPECT_EQ(whole.content, json(choice));
  EXPECT_EQ(whole.finish, "stop");
  const testing::ChatAnswer streamed = testing::streamed_answer(s, chat_body({choice}));
  EXPECT_EQ(streamed.content, json(choice));
  EXPECT_EQ(streamed.finish, "stop");
  const json done = json::parse(s.post("/v1/completions", completion_body({choice})).body);
  EXPECT_EQ(done["choices"][0]["text"], choice) << done.dump();
  EXPECT_EQ(done["choices"][0]["finish_reason"], "stop");
  std::string finish;
  EXPECT_EQ(streamed_completion(s, completion_body({choice}), finish), choice);
  EXPECT_EQ(finish, "stop");
}

TEST(ServerGuidedChoice, ChoicesBeginningWithBlanksOrMultibyteComeBackExactly) {
  ChatTestServer s(testing::model_with_template("guided_choice", brigade::testing::real_chat_template("mistral-v0.3")));
  ASSERT_TRUE(s.ok());
  for (const std::string choice : {" functools[{\"name\": \"f\"}]", "\n\nx = 1", "\tTab", "\xc3\xbc" "ber", " \xe6\x97\xa5\xe6\x9c\xac", " "})
    expect_exact(s, choice);
  // Several choices: one of them, whole.
  const json choices = {" yes", " no", "\nmaybe"};
  const testing::ChatAnswer a = testing::whole_answer(s, chat_body(choices));
  ASSERT_TRUE(a.content.is_string());
  EXPECT_NE(std::find(choices.begin(), choices.end(), a.content), choices.end()) << a.content;
}

// XLM-R's vocabulary (514 pieces of the real one, no byte fallback) over tiny synthetic weights.
std::string xlmr_model() {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("brigade_guided_choice_xlmr_" + std::to_string(::getpid()));
  EXPECT_TRUE(write_synthetic_model(brigade::testing::tiny_llama(520, 512, 5), d.string()).is_ok());
  fs::copy_file(std::string(BRIGADE_FIXTURES) + "/tokenizers/unigram/xlmr/tokenizer.json", d / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  return d.string();
}

TEST(ServerGuidedChoice, AChoiceTheVocabularyCannotSpellIsRefused) {
  ChatTestServer s(xlmr_model());
  ASSERT_TRUE(s.ok());
  expect_exact(s, " token");  // "▁token": the space is the piece's own
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    const json body = std::string(path) == "/v1/completions" ? completion_body({" token", "\nyes"}) : chat_body({" token", "\nyes"});
    const ClientResponse r = s.post(path, body);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    const std::string message = json::parse(r.body)["error"]["message"].get<std::string>();
    EXPECT_NE(message.find("guided_choice[1]"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot be produced"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace brigade::server
