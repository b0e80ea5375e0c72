// Cohere Command R7B / Command A's tool calls and plans through the HTTP server in-process: a tiny
// synthetic model served with the real command-r7b template (tests/fixtures/chat_templates/
// models.json), no flags, accepts tools (the template's <|START_ACTION|> names the syntax) and has
// its output forced (guided_choice of one text; the markers are plain text to this vocabulary, so
// that guided decoding can spell them) to a plan, action blocks or an answer: the calls come back
// as tool_calls, the plan as content or, with --reasoning-parser cohere_command3, as
// reasoning_content, and the answer markers never reach the content, whole or streamed. Where
// the markers are special tokens (as in Cohere's tokenizer) the server keeps their text for the
// parsers, and the constraint of a guided answer waits for <|END_THINKING|>.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatAnswer;
using testing::ChatTestServer;
using testing::model_with_template;

const std::string kPlan = "<|START_THINKING|>I will look up the weather and the time.<|END_THINKING|>";
const std::string kActions =
    "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", "
    "\"days\": 2}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {}}\n]<|END_ACTION|>";
const std::vector<std::pair<std::string, std::string>> kCalls = {{"get_weather", R"({"city": "Oslo", "days": 2})"},
                                                                  {"get_time", "{}"}};

// The real template's preamble (its tool-use instructions, the tools) is about 4,200 byte tokens
// of the synthetic vocabulary: the model gets a longer context than model_with_template's default.
constexpr int kContext = 8192;

std::string command_r7b() {
  const std::string source = brigade::testing::real_chat_template("command-r7b");
  EXPECT_FALSE(source.empty()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  return source;
}

// The model writes exactly `output` (greedy, one guided choice); with the tools when `tools`.
json forced(const std::string& output, bool tools) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
               {"guided_choice", {output}},
               {"max_tokens", 400},
               {"temperature", 0}};
  if (tools) body["tools"] = testing::weather_and_time_tools();
  return body;
}

std::string text(const json& j) { return j.is_string() ? j.get<std::string>() : ""; }

// The answer whole, and checked to be the same streamed.
ChatAnswer answer(const ChatTestServer& s, const json& body) {
  const ChatAnswer a = testing::whole_answer(s, body);
  const ChatAnswer streamed = testing::streamed_answer(s, body);
  EXPECT_EQ(text(streamed.reasoning), text(a.reasoning)) << "streamed";
  EXPECT_EQ(text(streamed.content), text(a.content)) << "streamed";
  EXPECT_EQ(streamed.calls, a.calls) << "streamed";
  EXPECT_EQ(streamed.finish, a.finish) << "streamed";
  return a;
}

TEST(ServerCohere, TheTemplatesActionsComeBackAsToolCalls) {
  ChatTestServer s(model_with_template("cohere_calls", command_r7b(), kContext));
  ASSERT_TRUE(s.ok());
  ChatAnswer a = answer(s, forced(kActions, true));
  EXPECT_EQ(a.finish, "tool_calls");
  EXPECT_TRUE(a.content.is_null());
  EXPECT_EQ(a.calls, kCalls);
  ASSERT_EQ(a.ids.size(), 2u);
  for (const auto& id : a.ids) EXPECT_TRUE(id.starts_with("call_") && id.size() == 29) << id << ": the server's ids";
  // Without a reasoning parser the plan is content, its markers dropped.
  a = answer(s, forced(kPlan + kActions, true));
  EXPECT_EQ(a.content, "I will look up the weather and the time.");
  EXPECT_EQ(a.calls, kCalls);
  EXPECT_TRUE(a.reasoning.is_null());
  // An answer: its markers dropped, no calls.
  a = answer(s, forced("<|START_RESPONSE|>It is sunny in Oslo.<|END_RESPONSE|>", true));
  EXPECT_EQ(a.finish, "stop");
  EXPECT_EQ(a.content, "It is sunny in Oslo.");
  EXPECT_TRUE(a.calls.empty());
  // A malformed block stays content, markers and all.
  const std::string bad = "<|START_ACTION|>[{\"tool_name\": \"get_time\"}]<|END_ACTION|>";
  a = answer(s, forced(bad, true));
  EXPECT_EQ(a.content, bad);
  EXPECT_TRUE(a.calls.empty());
  // parallel_tool_calls false: the first call only.
  json one = forced(kActions, true);
  one["parallel_tool_calls"] = false;
  a = answer(s, one);
  EXPECT_EQ(a.calls, (std::vector<std::pair<std::string, std::string>>{kCalls[0]}));
}

// A constrained output (the guided choice here) is split only where the close marker is one token,
// the constraint then waiting for it; this vocabulary has <|END_THINKING|> as one plain token and
// not <|START_THINKING|>, so the choice applies from the first token and spells both.
std::string reasoning_model(const std::string& tag, const std::string& chat_template) {
  const std::string model = model_with_template(tag, chat_template, kContext);
  testing::add_tokens(model, {"<|END_THINKING|>"}, /*special=*/false);
  return model;
}

TEST(ServerCohere, TheReasoningParserTakesThePlan) {
  ChatTestServer s(reasoning_model("cohere_reasoning", command_r7b()), "", "cohere_command3");
  ASSERT_TRUE(s.ok());
  ChatAnswer a = answer(s, forced(kPlan + kActions, true));
  EXPECT_EQ(a.reasoning, "I will look up the weather and the time.");
  EXPECT_TRUE(a.content.is_null());
  EXPECT_EQ(a.calls, kCalls);
  EXPECT_EQ(a.finish, "tool_calls");
  // Without tools no tool-call parser runs: the splitter drops the answer's markers itself
  // (Command R7B's <|START_RESPONSE|> and Command A Reasoning's <|START_TEXT|>).
  for (const char* open : {"<|START_RESPONSE|>", "<|START_TEXT|>"}) {
    SCOPED_TRACE(open);
    const std::string close = std::string(open).replace(2, 5, "END");
    a = answer(s, forced("<|START_THINKING|>2 + 2 is 4.<|END_THINKING|>" + std::string(open) + "4" + close, false));
    EXPECT_EQ(a.reasoning, "2 + 2 is 4.");
    EXPECT_EQ(a.content, "4");
    a = answer(s, forced(std::string(open) + "Hello!" + close, false));
    EXPECT_TRUE(a.reasoning.is_null());
    EXPECT_EQ(a.content, "Hello!");
  }
  // cohere_command4 is the same parser; --tool-call-parser cohere_command4 too.
  ChatTestServer four(reasoning_model("cohere_four", brigade::testing::real_chat_template("qwen2.5")), "",
                      "cohere_command4", "cohere_command4");
  ASSERT_TRUE(four.ok());
  a = answer(four, forced(kPlan + kActions, true));
  EXPECT_EQ(a.reasoning, "I will look up the weather and the time.");
  EXPECT_EQ(a.calls, kCalls);
}

// Cohere's tokenizer has the markers as special tokens, which the output skips by default: with
// the cohere tool-call syntax (tool_choice auto) or reasoning parser the server keeps their text
// for the parsers, which keep it out of the content.
TEST(ServerCohere, SpecialMarkersReachTheParsers) {
  const std::string model = model_with_template("cohere_special", command_r7b(), kContext);
  const std::vector<int32_t> ids = testing::add_tokens(
      model, {"<|START_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>"}, /*special=*/true);
  const int32_t action = ids[0], start_thinking = ids[1], end_thinking = ids[2], response = ids[3];
  ChatTestServer s(model);
  ASSERT_TRUE(s.ok());
  json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
               {"tools", testing::weather_and_time_tools()},
               {"max_tokens", 1},
               {"temperature", 0},
               {"logit_bias", {{std::to_string(action), 100}}}};
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  // A block cut off before its array is no call: content, which shows the marker reached the parser.
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "<|START_ACTION|>") << r.body;
  body.erase("tools");
  r = s.chat(body);
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "") << "without tools it is skipped";

  ChatTestServer reasoning(model, "", "cohere_command3");
  ASSERT_TRUE(reasoning.ok());
  body["logit_bias"] = {{std::to_string(response), 100}};
  body["logprobs"] = true;
  r = reasoning.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["logprobs"]["content"][0]["token"], "<|START_RESPONSE|>") << "the token's text is kept";
  EXPECT_TRUE(choice["message"]["content"].is_null()) << choice << ": the marker is no content";

  // A guided answer waits for the plan: the model may open it with its first token (the
  // constraint would otherwise forbid the special token, which it cannot spell)...
  const std::vector<std::string> colors = {"red", "green", "blue"};
  json guided = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                 {"guided_choice", colors},
                 {"max_tokens", 1},
                 {"temperature", 0},
                 {"logprobs", true},
                 {"logit_bias", {{std::to_string(start_thinking), 100}}}};
  r = reasoning.chat(guided);
  ASSERT_EQ(r.status, 200) << r.body;
  choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["logprobs"]["content"][0]["token"], "<|START_THINKING|>") << choice;
  EXPECT_TRUE(choice["message"]["content"].is_null()) << choice;
  // ...and after <|END_THINKING|> (here the template opens the plan and the model closes it at
  // once) the answer is one of the choices.
  ChatTestServer opened(model, "{%- for m in messages %}{{ m.content }}{% endfor %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>",
                        "cohere_command3");
  ASSERT_TRUE(opened.ok());
  guided["max_tokens"] = 12;
  guided["logit_bias"] = {{std::to_string(end_thinking), 100}};
  const ChatAnswer a = answer(opened, guided);
  ASSERT_TRUE(a.content.is_string()) << a.content;
  EXPECT_NE(std::find(colors.begin(), colors.end(), a.content.get<std::string>()), colors.end()) << a.content;
  EXPECT_TRUE(a.reasoning.is_null()) << a.reasoning;
}

}  // namespace
}  // namespace brigade::server
