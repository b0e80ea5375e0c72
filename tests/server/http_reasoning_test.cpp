// Reasoning through the HTTP server in-process (`brigade serve --reasoning-parser`): where the
// chat template leaves the prompt decides whether the output starts as reasoning; the request's
// include_reasoning / separate_reasoning switches and a constrained output's whole content; a
// parser name that does not exist stops the server from starting. The synthetic model's greedy
// text is the same whichever way it is returned, so each answer is compared with the raw one.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;
using testing::ChatAnswer;
using testing::model_with_template;

// Templates of no built-in family (run as Jinja): one opens a thinking block for the answer, as
// DeepSeek-R1's and QwQ's do; one closes it at once, as Qwen3's with enable_thinking false.
constexpr const char* kOpens =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n";
constexpr const char* kCloses =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n\n</think>\n\n";

json request(json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}}, {"max_tokens", 12},
               {"temperature", 0}};
  body.update(extra);
  return body;
}

// An engine on `model` for a server the test starts with its own options.
std::unique_ptr<Engine> engine_on(const std::string& model) {
  EngineOptions o = brigade::testing::test_engine_options(model, 1);
  o.topology.instances.front().kv.memory_mb = 64;
  return brigade::testing::create_engine(o);
}

json message_of(const ClientResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body)["choices"][0]["message"] : json();
}

TEST(ServerReasoning, AnOpenBlockMakesTheOutputReasoning) {
  testing::ChatTestServer s(model_with_template("reason_open", kOpens), "", "qwen3");
  ASSERT_TRUE(s.ok());
  const json raw = message_of(s.chat(request({{"separate_reasoning", false}})));
  ASSERT_TRUE(raw["content"].is_string());
  const std::string text = raw["content"];
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.find("</think>"), std::string::npos) << "the test needs an output that never closes the block";
  EXPECT_FALSE(raw.contains("reasoning_content")) << "separate_reasoning false: the output stays whole";

  const json split = message_of(s.chat(request()));
  EXPECT_EQ(split["reasoning_content"], text);
  EXPECT_EQ(split["reasoning"], text);
  EXPECT_TRUE(split["content"].is_null()) << "cut by max_tokens while thinking: no answer";

  const json dropped = message_of(s.chat(request({{"include_reasoning", false}})));
  EXPECT_FALSE(dropped.contains("reasoning_content"));
  EXPECT_TRUE(dropped["content"].is_null());

  std::string streamed, content;
  for (const json& chunk : s.chat_stream(request())) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) streamed += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(content, "");

  // The synthetic vocabulary has no `</think>` token, so a constrained output cannot wait for the
  // block to close: it obeys its constraint from the first token, and all of it is content.
  const json constrained = message_of(s.chat(request({{"response_format", {{"type", "json_object"}}}})));
  EXPECT_TRUE(constrained["content"].is_string());
  EXPECT_FALSE(constrained.contains("reasoning_content"));
}

// With `</think>` one token of the vocabulary, a constrained answer comes after the reasoning, as
// vLLM's and SGLang's structured output with a reasoning parser.
TEST(ServerReasoning, AConstrainedAnswerComesAfterTheReasoning) {
  const std::string model = model_with_template("reason_constrained", kOpens);
  const auto [open, close] = testing::add_think_tokens(model);
  testing::ChatTestServer s(model, "", "auto");
  ASSERT_TRUE(s.ok());
  const std::vector<std::string> colors = {"red", "green", "blue"};
  const json choice = {{"guided_choice", colors}};
  auto is_color = [&](const json& v) {
    return v.is_string() && std::find(colors.begin(), colors.end(), v.get<std::string>()) != colors.end();
  };

  // Free inside the block: cut by max_tokens while thinking, no answer yet.
  json m = message_of(s.chat(request(choice)));
  ASSERT_TRUE(m["reasoning_content"].is_string()) << m;
  EXPECT_TRUE(m["content"].is_null()) << m;
  const std::string reasoning = m["reasoning_content"];
  EXPECT_FALSE(is_color(m["reasoning_content"])) << "12 tokens of free text: " << reasoning;
  EXPECT_GE(reasoning.size(), 12u) << reasoning;

  // `</think>` pushed up closes the block at once; the answer is then one of the choices.
  json closing = choice;
  closing["logit_bias"] = {{std::to_string(close), 100}};
  m = message_of(s.chat(request(closing)));
  EXPECT_TRUE(is_color(m["content"])) << m;
  EXPECT_TRUE(m["reasoning_content"].is_null()) << m;
  std::string streamed;
  for (const json& chunk : s.chat_stream(request(closing))) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) streamed += delta["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, m["content"]);
  closing["separate_reasoning"] = false;  // not split, yet still answered after the block
  m = message_of(s.chat(request(closing)));
  ASSERT_TRUE(m["content"].is_string()) << m;
  const std::string whole = m["content"];
  ASSERT_TRUE(whole.starts_with("</think>")) << whole;
  EXPECT_TRUE(is_color(whole.substr(8))) << whole;

  // A prompt that leaves no block open (the qwen3 rule): the first token may open one...
  testing::ChatTestServer plain(model, "{%- for m in messages %}{{ m.content }}{% endfor %}", "qwen3");
  ASSERT_TRUE(plain.ok());
  json opening = choice;
  opening["logit_bias"] = {{std::to_string(open), 100}};
  m = message_of(plain.chat(request(opening)));
  EXPECT_TRUE(m["content"].is_null()) << m;
  EXPECT_TRUE(m["reasoning_content"].is_string()) << m;
  // ...and otherwise the answer starts at once.
  opening["logit_bias"] = {{std::to_string(open), -100}};
  m = message_of(plain.chat(request(opening)));
  EXPECT_TRUE(is_color(m["content"])) << m;
  EXPECT_TRUE(m["reasoning_content"].is_null()) << m;
}

TEST(ServerReasoning, AClosedBlockMakesTheOutputContent) {
  testing::ChatTestServer s(model_with_template("reason_closed", kCloses), "", "deepseek_r1");
  ASSERT_TRUE(s.ok());
  const json raw = message_of(s.chat(request({{"separate_reasoning", false}})));
  const json split = message_of(s.chat(request()));
  EXPECT_EQ(split["content"], raw["content"]);
  EXPECT_TRUE(split["reasoning_content"].is_null());
}

TEST(ServerReasoning, WithoutAParserTheOutputStaysWhole) {
  testing::ChatTestServer s(model_with_template("reason_none", kOpens));
  ASSERT_TRUE(s.ok());
  const json m = message_of(s.chat(request()));
  EXPECT_TRUE(m["content"].is_string());
  EXPECT_FALSE(m.contains("reasoning_content"));
  auto bad = s.chat(request({{"include_reasoning", "yes"}}));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("include_reasoning"), std::string::npos) << bad.body;
}

// Qwen3's switch: enable_thinking false (chat_template_kwargs, or the server's default) makes
// the template close an empty block, and the whole answer is content.
constexpr const char* kSwitch =
    "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: "
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}";

TEST(ServerReasoning, ChatTemplateKwargsReachTheTemplate) {
  const std::string model = model_with_template("reason_switch", kSwitch);
  testing::ChatTestServer s(model, "", "qwen3");
  ASSERT_TRUE(s.ok());
  const json thinking = message_of(s.chat(request()));
  EXPECT_TRUE(thinking["reasoning_content"].is_string());
  EXPECT_TRUE(thinking["content"].is_null());
  const json off_kwargs = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  const json off = message_of(s.chat(request(off_kwargs)));
  EXPECT_TRUE(off["reasoning_content"].is_null());
  json whole = off_kwargs;
  whole["separate_reasoning"] = false;
  EXPECT_EQ(off["content"], message_of(s.chat(request(whole)))["content"]) << "the whole answer is content";
  for (const json& bad : {json{{"chat_template_kwargs", "enable_thinking"}},
                          json{{"chat_template_kwargs", {{"messages", json::array()}}}}}) {
    auto r = s.chat(request(bad));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("chat_template_kwargs"), std::string::npos) << r.body;
  }
}

TEST(ServerReasoning, TheServersDefaultTemplateKwargsGiveWayToTheRequests) {
  auto engine = engine_on(model_with_template("reason_default", kSwitch));
  ASSERT_TRUE(engine);
  ServerOptions options;
  options.port = 0;
  options.reasoning_parser = "qwen3";
  options.default_chat_template_kwargs = "[1]";
  auto bad = HttpServer::start(*engine, options);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("--default-chat-template-kwargs"), std::string::npos);
  options.default_chat_template_kwargs = R"({"enable_thinking": false})";
  auto srv = HttpServer::start(*engine, options);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  const auto chat = [&](const json& body) {
    auto r = http_request("127.0.0.1", (*srv)->port(), {"POST", "/v1/chat/completions", body.dump(), ""});
    EXPECT_TRUE(r.has_value());
    return message_of(*r);
  };
  EXPECT_TRUE(chat(request())["reasoning_content"].is_null()) << "the default turns thinking off";
  EXPECT_TRUE(chat(request({{"chat_template_kwargs", {{"enable_thinking", true}}}}))["reasoning_content"].is_string())
      << "the request's value wins";
}

TEST(ServerReasoning, AnUnknownParserStopsTheServer) {
  auto engine = engine_on(model_with_template("reason_bad", kOpens));
  ASSERT_TRUE(engine);
  ServerOptions options;
  options.port = 0;
  options.reasoning_parser = "r1";
  auto srv = HttpServer::start(*engine, options);
  ASSERT_FALSE(srv.has_value());
  EXPECT_EQ(srv.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(srv.status().message().find("deepseek_r1"), std::string::npos) << srv.status().message();
  options.reasoning_parser = "auto";  // the synthetic vocabulary has no </think> token: no parser
  srv = HttpServer::start(*engine, options);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  auto r = http_request("127.0.0.1", (*srv)->port(), {"POST", "/v1/chat/completions", request().dump(), ""});
  ASSERT_TRUE(r.has_value());
  const json m = message_of(*r);
  EXPECT_TRUE(m["content"].is_string());
  EXPECT_FALSE(m.contains("reasoning_content"));
}

// vLLM's granite, hunyuan_a13b and ernie45 parsers, and its glm47 and mimo names (qwen3's rule),
// start the server; an output that writes none of their tags is content, except for ernie45, which
// (as deepseek_r1) reads it as reasoning the model may begin without `<think>`.
TEST(ServerReasoning, TheirOwnParsersSplitByTheirRules) {
  constexpr const char* kPlain = "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: ";
  const std::string model = model_with_template("reason_more", kPlain);
  for (const char* name : {"granite", "hunyuan_a13b", "ernie45", "glm47", "mimo"}) {
    SCOPED_TRACE(name);
    testing::ChatTestServer s(model, "", name);
    ASSERT_TRUE(s.ok());
    const json raw = message_of(s.chat(request({{"separate_reasoning", false}})));
    ASSERT_TRUE(raw["content"].is_string());
    const std::string text = raw["content"];
    ASSERT_FALSE(text.empty());
    const json split = message_of(s.chat(request()));
    if (std::string(name) == "ernie45") {
      EXPECT_EQ(split["reasoning_content"], text);
      EXPECT_TRUE(split["content"].is_null()) << split;
    } else {
      EXPECT_EQ(split["content"], text);
      EXPECT_TRUE(split["reasoning_content"].is_null()) << split;
    }
  }
}

// Magistral's and Ministral 3 Reasoning's [THINK] and [/THINK] are special tokens of Mistral's
// tokenizers: `auto` picks the mistral parser where the vocabulary has [/THINK] (and no
// `</think>`), and the server keeps their text for the splitter, which keeps it out of both fields.
TEST(ServerReasoning, MistralsThinkTokensReachTheSplitter) {
  constexpr const char* kMistral = "{%- for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}";
  const std::string model = model_with_template("reason_mistral", kMistral);
  const std::vector<int32_t> ids = testing::add_tokens(model, {"[THINK]", "[/THINK]"}, /*special=*/true);
  const int32_t think = ids[0], end_think = ids[1];
  testing::ChatTestServer s(model, "", "auto");
  ASSERT_TRUE(s.ok());
  // The model opens the block with its first token: its text is kept (logprobs), and is neither field.
  json body = request({{"max_tokens", 1}, {"logprobs", true}, {"logit_bias", {{std::to_string(think), 100}}}});
  auto r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["logprobs"]["content"][0]["token"], "[THINK]") << choice;
  EXPECT_TRUE(choice["message"]["content"].is_null()) << choice;
  EXPECT_TRUE(choice["message"]["reasoning_content"].is_null()) << choice << ": an empty block";
  // A template that opens the block: the output is reasoning until [/THINK], then content.
  const std::string opens = std::string(kMistral) + "[THINK]";
  testing::ChatTestServer opened(model, opens, "mistral");
  ASSERT_TRUE(opened.ok());
  const json raw = message_of(opened.chat(request({{"separate_reasoning", false}})));
  ASSERT_TRUE(raw["content"].is_string());
  const std::string text = raw["content"];
  ASSERT_EQ(text.find("[/THINK]"), std::string::npos) << "special tokens skipped without a parser";
  const json split = message_of(opened.chat(request()));
  EXPECT_TRUE(split["content"].is_null()) << split;
  EXPECT_EQ(split["reasoning_content"], text) << "greedy text, all reasoning";
  // [/THINK] twice: the first closes the (empty) block, the second is content, as a stray
  // `</think>` is to qwen3's rule; without its text kept, both would vanish.
  body = request({{"max_tokens", 2}, {"logit_bias", {{std::to_string(end_think), 100}}}});
  for (const ChatAnswer& closed : {testing::whole_answer(opened, body), testing::streamed_answer(opened, body)}) {
    EXPECT_TRUE(closed.reasoning.is_null()) << closed.reasoning << ": an empty block";
    EXPECT_EQ(closed.content, "[/THINK]");
    EXPECT_EQ(closed.finish, "length");
  }
}

}  // namespace
}  // namespace brigade::server
