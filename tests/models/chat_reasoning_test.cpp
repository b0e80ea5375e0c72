// An assistant turn's reasoning sent back in the chat history (`reasoning_content`, or vLLM's
// newer `reasoning`) reaches the chat template: tests/fixtures/chat_templates/reasoning.json
// (scripts/make_chat_reasoning_fixtures.py) holds transformers' apply_chat_template renderings of
// real templates that render past reasoning (Qwen3, GLM-4.6, DeepSeek-V3.2, Kimi-K2-Thinking,
// Kimi-K3, MiniMax-M2, gpt-oss), given the messages as vLLM hands them over; brigade's Jinja
// rendering must match byte for byte (or refuse where transformers raised), and the built-in
// harmony rendering must write a call turn's reasoning as gpt-oss's template writes `thinking`.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "chat_test_util.h"
#include "models/chat_template.h"
#include "models/chat_template_jinja.h"

namespace brigade {
namespace {

using ojson = nlohmann::ordered_json;

const ojson& fixtures() {
  static const ojson data = testing::load_fixture_json("chat_templates/reasoning.json");
  return data;
}

jinja::RenderOptions pinned_clock() {  // the fixtures' strftime_now: 2024-07-26
  jinja::RenderOptions opts;
  opts.now = [] {
    std::tm tm{};
    tm.tm_year = 124, tm.tm_mon = 6, tm.tm_mday = 26;
    return tm;
  };
  return opts;
}

Expected<std::string> render_jinja(const ojson& c) {
  const ojson& t = fixtures()["templates"][c["template"].get<std::string>()];
  BRIGADE_ASSIGN_OR_RETURN(JinjaChatTemplate tmpl,
                           JinjaChatTemplate::create(t["template"].get<std::string>(), t["bos_token"].get<std::string>(),
                                                     t["eos_token"].get<std::string>()));
  const std::string kwargs = c.contains("template_kwargs") ? c["template_kwargs"].dump() : "";
  return tmpl.apply(testing::case_messages(c), testing::case_tools(c), c["add_generation_prompt"].get<bool>(), kwargs,
                    pinned_clock());
}

TEST(ChatReasoning, RealTemplatesRenderItAsTransformers) {
  const ojson& data = fixtures();
  ASSERT_TRUE(data.is_object()) << "tests/fixtures/chat_templates/reasoning.json is missing";
  std::set<std::string> rendered;
  int n_refused = 0;
  for (const ojson& c : data["cases"]) {
    const std::string name = c["template"].get<std::string>();
    SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>());
    auto text = render_jinja(c);
    if (c.contains("error")) {
      ASSERT_FALSE(text.has_value()) << "transformers raised " << c["error"].get<std::string>();
      EXPECT_EQ(text.status().code(), StatusCode::invalid_argument);
      ++n_refused;
      continue;
    }
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    EXPECT_EQ(*text, c["expected"].get<std::string>());
    rendered.insert(name);
  }
  EXPECT_EQ(rendered.size(), 7u);
  EXPECT_EQ(n_refused, 4) << "Kimi-K2-Thinking's call turns (list.append, refused by transformers' sandbox)";
}

// The reasoning is what changes the render: without it the templates that show it render less.
TEST(ChatReasoning, DroppingItChangesTheRender) {
  int n_changed = 0;
  for (const ojson& c : fixtures()["cases"]) {
    if (c["conversation"] != "call_after_last_user" || !c.contains("expected")) continue;
    ojson without = c;
    for (ojson& m : without["messages"]) m.erase("reasoning_content");
    auto text = render_jinja(without);
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    const std::string expected = c["expected"].get<std::string>();
    if (expected.find("I should call get_weather") == std::string::npos) continue;  // this template drops it
    EXPECT_EQ(text->find("I should call get_weather"), std::string::npos) << c["template"];
    EXPECT_NE(*text, expected);
    ++n_changed;
  }
  EXPECT_EQ(n_changed, 6) << "qwen3, glm-4.6, deepseek-v3.2, kimi-k3, minimax-m2, gpt-oss";
}

// The built-in harmony rendering: an earlier answer's reasoning is dropped (the whole prompt is
// gpt-oss's template's), a call turn's reasoning is its analysis message (gpt-oss's template from
// the first user turn up to the call, whose header the built-in writes as OpenAI's harmony guide
// does, as it writes the tools' TypeScript as the harmony renderer does).
TEST(ChatReasoning, HarmonyWritesACallTurnsReasoningAsGptOssTemplate) {
  int n_whole = 0, n_calls = 0;
  for (const ojson& c : fixtures()["cases"]) {
    if (c["template"] != "gpt-oss" || !c["add_generation_prompt"].get<bool>() || !c.contains("expected")) continue;
    SCOPED_TRACE(c["conversation"].get<std::string>());
    const std::vector<ChatMessage> messages = testing::case_messages(c);
    auto text = apply_chat_template(ChatFamily::harmony, messages, testing::case_tools(c), true, {"", "2024-07-26"});
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    const std::string expected = c["expected"].get<std::string>();
    const bool calls = std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return !m.tool_calls.empty(); });
    if (!calls) {
      EXPECT_EQ(*text, expected);
      ++n_whole;
      continue;
    }
    const size_t want = expected.find("<|start|>assistant to=functions.");
    const size_t got = text->find("<|start|>assistant<|channel|>commentary to=functions.");
    ASSERT_NE(want, std::string::npos);
    ASSERT_NE(got, std::string::npos);
    // From the first user turn (the tools' TypeScript is the harmony renderer's, not the template's).
    const size_t want_from = expected.find("<|start|>user"), got_from = text->find("<|start|>user");
    EXPECT_EQ(text->substr(got_from, got - got_from), expected.substr(want_from, want - want_from));
    EXPECT_NE(expected.find("<|channel|>analysis<|message|>" + *messages[messages.size() - 2].reasoning + "<|end|>"),
              std::string::npos);
    ++n_calls;
  }
  EXPECT_EQ(n_whole, 1);
  EXPECT_EQ(n_calls, 3);
}

TEST(ChatReasoning, HarmonyRefusesTextAndReasoningBesideCallsAsGptOssTemplate) {
  ChatMessage turn{"assistant", "Checking.", {{"c1", "get_weather", "{}"}}};
  turn.reasoning = "I should check.";
  const std::vector<ChatMessage> m = {{"user", "Weather?"}, turn, {"tool", "sunny", {}, "c1"}};
  auto text = apply_chat_template(ChatFamily::harmony, m, {}, true);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(text.status().message().find("not both"), std::string::npos) << text.status().message();
  // gpt-oss's own template refuses the same turn.
  const ojson& t = fixtures()["templates"]["gpt-oss"];
  auto tmpl = JinjaChatTemplate::create(t["template"].get<std::string>(), "<|startoftext|>", "<|return|>");
  ASSERT_TRUE(tmpl.has_value());
  auto jinja_text = tmpl->apply(m, {}, true, "", pinned_clock());
  ASSERT_FALSE(jinja_text.has_value());
  EXPECT_NE(jinja_text.status().message().find("Cannot pass both content and thinking"), std::string::npos)
      << jinja_text.status().message();
}

TEST(ChatReasoning, OnlyAssistantTurnsCarryIt) {
  ChatMessage user{"user", "Hi"};
  user.reasoning = "no";
  const std::vector<ChatMessage> m = {user};
  auto text = apply_chat_template(ChatFamily::chatml, m, true);
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.status().code(), StatusCode::invalid_argument);
  ChatMessage bad{"assistant", "ok"};
  bad.reasoning = std::string("\xff");
  const std::vector<ChatMessage> m2 = {{"user", "Hi"}, bad};
  EXPECT_EQ(apply_chat_template(ChatFamily::harmony, m2, true).status().code(), StatusCode::invalid_argument);
  auto tmpl = JinjaChatTemplate::create("{{ messages[1].reasoning_content }}", "", "");
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_EQ(tmpl->apply(m2, {}, true).status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace brigade
