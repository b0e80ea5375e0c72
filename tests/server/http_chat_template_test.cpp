// Chat through the HTTP server in-process with a model whose own chat template is of no built-in
// family (Gemma 2's, run by the Jinja interpreter): the prompt is exactly what the template
// renders (its token count matches /tokenize of the expected text), what the template refuses
// answers 400 with its message, tools are refused for a template brigade cannot parse calls of
// and work for one that writes <tool_call> blocks, and --chat-template (EngineOptions::
// chat_template) overrides the model's template.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// google/gemma-2-2b-it's chat template, as in its tokenizer_config.json.
constexpr const char* kGemma2 =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif "
    "%}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif "
    "%}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if "
    "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

using testing::model_with_template;

// The chat server, and the prompt token counts a check compares.
class ChatServer : public testing::ChatTestServer {
 public:
  using ChatTestServer::ChatTestServer;
  // Prompt tokens the server counted for a chat, and for the text the template should give.
  int chat_prompt_tokens(const json& messages) const {
    auto r = chat({{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["usage"]["prompt_tokens"].get<int>() : -1;
  }
  int text_tokens(const std::string& text) const {
    auto r = post("/tokenize", {{"prompt", text}, {"add_special_tokens", false}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["count"].get<int>() : -2;
  }
};

TEST(ServerChatTemplate, TheModelsOwnJinjaTemplateRendersThePrompt) {
  ChatServer s(model_with_template("gemma", kGemma2));
  ASSERT_TRUE(s.ok());
  const json chat = {{{"role", "user"}, {"content", "  Hi there  "}},
                     {{"role", "assistant"}, {"content", "Hello!"}},
                     {{"role", "user"}, {"content", [] {
                        json parts = json::array();
                        parts.push_back({{"type", "text"}, {"text", "How are "}});
                        parts.push_back({{"type", "text"}, {"text", "you?"}});
                        return parts;
                      }()}}};
  // The synthetic tokenizer's bos_token is <s>; text parts reach the template joined by newlines
  // (vLLM's string content).
  const std::string expected =
      "<s><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
      "<start_of_turn>user\nHow are \nyou?<end_of_turn>\n<start_of_turn>model\n";
  EXPECT_EQ(s.chat_prompt_tokens(chat), s.text_tokens(expected));
  EXPECT_NE(s.text_tokens(expected), s.text_tokens("<s>" + expected)) << "the check can tell prompts apart";
  // vLLM's add_special_tokens: the tokenizer's BOS on top of the template's (default false).
  auto doubled = s.chat({{"messages", chat}, {"max_tokens", 1}, {"add_special_tokens", true}});
  ASSERT_EQ(doubled.status, 200) << doubled.body;
  EXPECT_EQ(json::parse(doubled.body)["usage"]["prompt_tokens"].get<int>(), s.text_tokens("<s>" + expected));

  // What the template refuses is a 400 carrying its message.
  auto sys = s.post("/v1/chat/completions", {{"messages", {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}}});
  EXPECT_EQ(sys.status, 400);
  EXPECT_NE(sys.body.find("System role not supported"), std::string::npos) << sys.body;
  // Gemma's template writes no tool calls brigade can parse: tools are refused, not lost.
  json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
  auto t = s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "y"}}}}, {"tools", tools}});
  EXPECT_EQ(t.status, 400);
  EXPECT_NE(t.body.find("no tool-call format brigade parses"), std::string::npos) << t.body;
}

// vLLM's per-request chat_template: rendered (bos/eos as the model's template) only when the
// server trusts request templates, for chat and /tokenize alike; refused with 400 otherwise.
TEST(ServerChatTemplate, ARequestsOwnTemplateRendersOnlyWhenTrusted) {
  const std::string model = model_with_template("own_template", kGemma2);
  const std::string own =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}[assistant] {% endif %}";
  const json messages = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Yo"}}};
  {
    ChatServer untrusted(model);
    ASSERT_TRUE(untrusted.ok());
    auto r = untrusted.chat({{"messages", messages}, {"chat_template", own}, {"max_tokens", 1}});
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("--trust-request-chat-template"), std::string::npos) << r.body;
    EXPECT_EQ(untrusted.post("/tokenize", {{"messages", messages}, {"chat_template", own}}).status, 400);
  }
  ServerOptions trusting;
  trusting.trust_request_chat_template = true;
  ChatServer s(model, trusting);
  ASSERT_TRUE(s.ok());
  const auto prompt_tokens = [&](const json& extra) {
    json body = {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}};
    body.update(extra);
    auto r = s.chat(body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  EXPECT_EQ(prompt_tokens({{"chat_template", own}}), s.text_tokens("<s>[user] Hi\n[assistant] Yo\n[assistant] "));
  EXPECT_EQ(prompt_tokens({{"chat_template", own}, {"add_generation_prompt", false}, {"continue_final_message", true}}),
            s.text_tokens("<s>[user] Hi\n[assistant] Yo"))
      << "continued after the final message's text, as with the model's template";
  EXPECT_EQ(prompt_tokens(json::object()),
            s.text_tokens("<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n"
                          "<start_of_turn>model\n"))
      << "without one, the model's";
  auto tok = s.post("/tokenize", {{"messages", messages}, {"chat_template", own}});
  ASSERT_EQ(tok.status, 200) << tok.body;
  EXPECT_EQ(json::parse(tok.body)["count"].get<int>(), s.text_tokens("<s>[user] Hi\n[assistant] Yo\n[assistant] "));
  auto broken = s.chat({{"messages", messages}, {"chat_template", "{% for m in messages %}"}});
  EXPECT_EQ(broken.status, 400);
  EXPECT_NE(broken.body.find("line 1"), std::string::npos) << broken.body;
  auto raised = s.chat({{"messages", messages}, {"chat_template", "{{ raise_exception('no chats here') }}"}});
  EXPECT_EQ(raised.status, 400);
  EXPECT_NE(raised.body.find("no chats here"), std::string::npos) << raised.body;
  EXPECT_EQ(s.chat({{"messages", messages}, {"chat_template", 3}}).status, 400);
  EXPECT_EQ(s.chat({{"messages", messages}, {"chat_template", ""}}).status, 400);
}

// vLLM's /tokenize chat form: the messages rendered as a chat completion renders them, with the
// same fields, then tokenized (special tokens not added again); errors as chat's.
TEST(ServerChatTemplate, TokenizeRendersMessagesLikeAChat) {
  ChatServer s(model_with_template("gemma_tokenize", kGemma2));
  ASSERT_TRUE(s.ok());
  const json messages = {{{"role", "user"}, {"content", "Hi there"}}, {{"role", "assistant"}, {"content", "Hello!"}}};
  const std::string turns = "<s><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello!";
  const auto tokenize = [&](const json& body) {
    auto r = s.post("/tokenize", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body) : json();
  };
  const json text = tokenize({{"prompt", turns + "<end_of_turn>\n<start_of_turn>model\n"}, {"add_special_tokens", false}});
  const json chat = tokenize({{"messages", messages}});
  EXPECT_EQ(chat["tokens"], text["tokens"]);
  EXPECT_EQ(chat["count"], text["count"]);
  EXPECT_EQ(chat["count"].get<int>(), s.chat_prompt_tokens(messages)) << "what a chat completion counts";
  EXPECT_GT(chat["max_model_len"].get<int>(), 0);
  const json cont = tokenize({{"messages", messages}, {"add_generation_prompt", false}, {"continue_final_message", true}});
  EXPECT_EQ(cont["tokens"], tokenize({{"prompt", turns}, {"add_special_tokens", false}})["tokens"]);
  auto refused = s.post("/tokenize", {{"messages", {{{"role", "system"}, {"content", "x"}}, {{"role", "user"}, {"content", "y"}}}}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("System role not supported"), std::string::npos) << refused.body;
}

// vLLM's return_token_strs: each id's string as the model's tokenizer.json spells it (its vocab
// key, or an added token's content), read here from the file itself.
TEST(ServerChatTemplate, TokenizeReturnsTheVocabularysStrings) {
  const std::string model = model_with_template("token_strs", kGemma2);
  ChatServer s(model);
  ASSERT_TRUE(s.ok());
  std::ifstream in(fs::path(model) / "tokenizer.json");
  const json tok = json::parse(in);
  std::map<int32_t, std::string> spelled;
  for (const auto& [text, id] : tok["model"]["vocab"].items()) spelled[id.get<int32_t>()] = text;
  for (const auto& a : tok["added_tokens"]) spelled[a["id"].get<int32_t>()] = a["content"].get<std::string>();
  for (const json& body : {json{{"prompt", "Hello wörld,\n  it's <s> 42!"}, {"return_token_strs", true}},
                           json{{"messages", {{{"role", "user"}, {"content", "Hi there"}}}}, {"return_token_strs", true}}}) {
    auto r = s.post("/tokenize", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json got = json::parse(r.body);
    ASSERT_EQ(got["token_strs"].size(), got["tokens"].size()) << r.body;
    for (size_t i = 0; i < got["tokens"].size(); ++i)
      EXPECT_EQ(got["token_strs"][i].get<std::string>(), spelled.at(got["tokens"][i].get<int32_t>())) << i;
  }
  auto plain = s.post("/tokenize", {{"prompt", "Hi"}});
  ASSERT_EQ(plain.status, 200);
  EXPECT_FALSE(json::parse(plain.body).contains("token_strs")) << "only when asked";
  EXPECT_EQ(s.post("/tokenize", {{"prompt", "Hi"}, {"return_token_strs", "yes"}}).status, 400);
}

// vLLM's add_generation_prompt, continue_final_message and chat echo: a reply the client began
// is continued (the prompt cut after its text, as transformers cuts it), and echo puts it first
// in the content, whole and streamed.
TEST(ServerChatTemplate, AReplyTheClientBeganIsContinuedAndEchoed) {
  ChatServer s(model_with_template("gemma_continue", kGemma2));
  ASSERT_TRUE(s.ok());
  const json messages = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "The answer is "}}};
  auto prompt_tokens = [&](json body) {
    body["messages"] = messages;
    body["max_tokens"] = 1;
    auto r = s.chat(body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  const std::string turns = "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nThe answer is";
  const json continued = {{"add_generation_prompt", false}, {"continue_final_message", true}};
  EXPECT_EQ(prompt_tokens(continued), s.text_tokens(turns)) << "cut after the trimmed reply";
  EXPECT_EQ(prompt_tokens({{"add_generation_prompt", false}}), s.text_tokens(turns + "<end_of_turn>\n"));
  EXPECT_EQ(prompt_tokens(json::object()), s.text_tokens(turns + "<end_of_turn>\n<start_of_turn>model\n"));
  EXPECT_NE(s.text_tokens(turns), s.text_tokens(turns + "<end_of_turn>\n")) << "the check can tell them apart";

  auto r = s.chat({{"messages", messages}, {"continue_final_message", true}});
  EXPECT_EQ(r.status, 400) << "add_generation_prompt is true unless sent false, as vLLM's";
  EXPECT_NE(r.body.find("add_generation_prompt"), std::string::npos) << r.body;

  json body = continued;
  body["messages"] = messages;
  body["max_tokens"] = 6;
  body["temperature"] = 0;
  r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string plain = json::parse(r.body)["choices"][0]["message"]["content"];
  body["echo"] = true;
  r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "The answer is " + plain)
      << "the message as sent, then the continuation";
  std::string streamed;
  for (const json& chunk : s.chat_stream(body)) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) streamed += delta["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, "The answer is " + plain);
  body["messages"] = {{{"role", "user"}, {"content", "Hi"}}};  // the last message is not the assistant's: no echo
  body.erase("continue_final_message");
  body["add_generation_prompt"] = true;
  r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json echoed = json::parse(r.body)["choices"][0]["message"]["content"];
  body.erase("echo");
  r = s.chat(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(echoed, json::parse(r.body)["choices"][0]["message"]["content"]);
}

TEST(ServerChatTemplate, ConfiguredTemplateOverridesTheModels) {
  const std::string model = model_with_template("override", kGemma2);
  const fs::path file = fs::path(model) / "override.jinja";
  std::ofstream(file) << "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>\n";
  ChatServer s(model, file.string());
  ASSERT_TRUE(s.ok());
  const json chat = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(s.chat_prompt_tokens(chat), s.text_tokens("<|system|>Be brief.<|user|>hi<|assistant|>"));
  // A configured template that cannot be used stops the engine from starting.
  EngineOptions o = brigade::testing::test_engine_options(model, 1);
  o.chat_template = (fs::path(model) / "missing.jinja").string();
  auto e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("--chat-template"), std::string::npos) << e.status().message();
}

TEST(ServerChatTemplate, JinjaTemplateWithToolCallBlocksServesTools) {
  const std::string hermes =
      "{%- if tools %}{{ 'Tools: ' }}{% for t in tools %}{{ t.function.name }} {% endfor %}"
      "{{- 'Answer with <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>\\n' }}{% endif %}"
      "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: ";
  ChatServer s(model_with_template("hermes", hermes));
  ASSERT_TRUE(s.ok());
  json tools = json::array({{{"type", "function"},
                             {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"},
                                                                               {"properties", {{"tz", {{"enum", {"UTC", "CET"}}}}}},
                                                                               {"required", {"tz"}}}}}}}});
  // Greedy, EOS favoured and whitespace banned, so the forced call ends as soon as it may (as
  // http_tools_test.cpp does).
  json bias = {{"2", 100}};
  for (char c : std::string(" \t\r\n")) bias[std::to_string(3 + c)] = -100;
  json body = {{"messages", {{{"role", "user"}, {"content", "Time?"}}}}, {"tools", tools},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
               {"max_tokens", 48}, {"temperature", 0}, {"logit_bias", bias}};
  auto r = s.post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json msg = json::parse(r.body)["choices"][0]["message"];
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << msg.dump();
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_time");
  const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["tz"] == "UTC" || args["tz"] == "CET") << args.dump();
  // The tools reached the template.
  const json no_tools = {{{"role", "user"}, {"content", "Time?"}}};
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"].get<int>(),
            s.text_tokens("Tools: get_time Answer with <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>\n"
                          "user: Time?\nassistant: "));
  EXPECT_LT(s.chat_prompt_tokens(no_tools), json::parse(r.body)["usage"]["prompt_tokens"].get<int>());
}

// vLLM's documents reach the template as its `documents` variable (RAG templates; the fixture
// cases render Command R7B's against transformers), and chat_template_kwargs may override them.
TEST(ServerChatTemplate, DocumentsReachTheTemplate) {
  const std::string rag =
      "{%- if documents %}{{ 'Docs:' }}{% for d in documents %}{{ ' [' + d.title + '] ' + d.text }}{% endfor %}"
      "{{ '\\n' }}{% endif %}{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: ";
  ChatServer s(model_with_template("rag", rag));
  ASSERT_TRUE(s.ok());
  const json messages = {{{"role", "user"}, {"content", "Tallest?"}}};
  const json docs = {{{"title", "Penguins"}, {"text", "Emperors are tallest."}}, {{"title", "Seals"}, {"text", "No."}}};
  const auto prompt_tokens = [&](const json& extra) {
    json body = {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}};
    body.update(extra);
    auto r = s.post("/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  EXPECT_EQ(prompt_tokens({{"documents", docs}}),
            s.text_tokens("Docs: [Penguins] Emperors are tallest. [Seals] No.\nuser: Tallest?\nassistant: "));
  EXPECT_EQ(prompt_tokens(json::object()), s.text_tokens("user: Tallest?\nassistant: "));
  const json other = {{{"title", "X"}, {"text", "y"}}};
  EXPECT_EQ(prompt_tokens({{"documents", docs}, {"chat_template_kwargs", {{"documents", other}}}}),
            s.text_tokens("Docs: [X] y\nuser: Tallest?\nassistant: "))
      << "chat_template_kwargs over documents, as vLLM merges them";
  for (const json& bad : {json("doc"), json::array({"doc"}), json::array({{{"title", 3}}})}) {
    auto r = s.post("/v1/chat/completions", {{"messages", messages}, {"documents", bad}});
    EXPECT_EQ(r.status, 400) << bad.dump();
    EXPECT_NE(r.body.find("documents"), std::string::npos) << r.body;
  }
}

TEST(ServerChatTemplate, ATemplateThatDoesNotParseAnswers400AndCompletionsStillWork) {
  ChatServer s(model_with_template("broken", "{% for m in messages %}{{ m.content }}"));
  ASSERT_TRUE(s.ok());
  auto r = s.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "y"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("does not parse"), std::string::npos) << r.body;
  EXPECT_EQ(s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}}).status, 200);
}

}  // namespace
}  // namespace brigade::server
