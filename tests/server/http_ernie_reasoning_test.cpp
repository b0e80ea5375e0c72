// ERNIE 4.5 thinking models' output through the HTTP server in-process with --reasoning-parser
// ernie45, on a vocabulary where `<think>`, `</think>`, `<response>` and `</response>` are special
// tokens: the server keeps their text for the splitter (as for Cohere's and Mistral's markers), so
// the reasoning ends at `</think>` and the answer's markers and the newlines vLLM's ernie45 parser
// drops are gone ("abc\n</think>\n\n<response>\ndef\n</response>\n": reasoning "abc\n", content
// "\ndef\n", vLLM's example; tests/server/reasoning_parser_test.cpp has the plain-text rules).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatAnswer;
using testing::ChatTestServer;

// ERNIE-4.5-Thinking's generation prompt leaves the block to the model (deepseek_r1's rule: the
// output is reasoning until `</think>`).
constexpr const char* kTemplate = "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}Assistant: ";

std::string text(const json& j) { return j.is_string() ? j.get<std::string>() : ""; }

TEST(ServerErnieReasoning, SpecialMarkerTokensReachTheSplitter) {
  const std::string model = testing::model_with_template("ernie_markers", kTemplate);
  const std::vector<int32_t> ids = testing::add_tokens(model, {"<think>", "</think>", "<response>", "</response>"}, /*special=*/true);
  const int32_t end_think = ids[1];
  ChatTestServer s(model, "", "ernie45");
  ASSERT_TRUE(s.ok());
  // The model closes the block with its first token (the special `</think>`), then the guided
  // answer follows (the constraint waits for that token; guided decoding spells the choice from
  // plain tokens).
  const std::string answer = "\n\n<response>\nIt is sunny.\n</response>\n";
  const json body = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                     {"guided_choice", {answer}},
                     {"logit_bias", {{std::to_string(end_think), 100}}},
                     {"logprobs", true},
                     {"max_tokens", 60},
                     {"temperature", 0}};
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["logprobs"]["content"][0]["token"], "</think>") << choice;
  EXPECT_EQ(text(choice["message"]["reasoning_content"]), "") << choice;
  EXPECT_EQ(choice["message"]["content"], "\nIt is sunny.\n") << choice;
  EXPECT_EQ(choice["finish_reason"], "stop");
  const ChatAnswer streamed = testing::streamed_answer(s, body);
  EXPECT_EQ(text(streamed.reasoning), "");
  EXPECT_EQ(streamed.content, "\nIt is sunny.\n");
  // The special `</think>` twice: the first closes the (empty) block, the second is content text,
  // as a stray `</think>` is to deepseek_r1's rule; without their text kept, both would vanish
  // and the output would read as an unfinished block.
  const json twice = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                      {"logit_bias", {{std::to_string(end_think), 100}}},
                      {"max_tokens", 2},
                      {"temperature", 0}};
  const ChatAnswer a = testing::whole_answer(s, twice);
  EXPECT_EQ(text(a.reasoning), "");
  EXPECT_EQ(a.content, "</think>");
  // separate_reasoning false: the output as without a parser, special tokens' text skipped.
  json whole = twice;
  whole["separate_reasoning"] = false;
  const ChatAnswer raw = testing::whole_answer(s, whole);
  EXPECT_EQ(text(raw.content), "");
}

}  // namespace
}  // namespace brigade::server
