// The Responses API (POST /v1/responses): the body's translation into a chat request
// (responses_to_chat), and the in-process server's Response objects and streamed events, checked
// against the chat answer to the same conversation (the Responses API is a view of chat).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "server/openai_parse.h"
#include "server/responses_request.h"
#include "tests/models/chat_test_util.h"
#include "tests/server/chat_server_util.h"

namespace brigade::server {
namespace {

using nlohmann::json;

// The chat body for a Responses body, read back as json (key order aside: OrderedTools checks it).
Expected<json> chat_of(const std::string& body) {
  auto chat = responses_to_chat(nlohmann::ordered_json::parse(body));
  if (!chat) return chat.status();
  return json::parse(chat->dump());
}

TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
  auto chat = chat_of(R"({"model": "m", "instructions": "Be brief.", "max_output_tokens": 7, "temperature": 0.5,
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                       {"type": "input_text", "text": "in Oslo?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
      {"role": "assistant", "content": [{"type": "output_text", "text": "Rain."}]}]})");
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  const json want = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
    {"role": "assistant", "content": "Rain."}])");
  EXPECT_EQ((*chat)["messages"], want) << (*chat)["messages"].dump(1);
  EXPECT_EQ((*chat)["max_tokens"], 7);
  EXPECT_EQ((*chat)["temperature"], 0.5);
  EXPECT_EQ((*chat)["model"], "m");
  EXPECT_EQ(chat_of(R"({"input": "Hi"})")->at("messages"), json::parse(R"([{"role": "user", "content": "Hi"}])"));
}

// A reasoning item is the reasoning of the assistant turn after it (its calls, or its message);
// with no assistant item after it, an assistant turn of its own.
TEST(ResponsesRequest, ReasoningItemsBecomeTheNextAssistantTurnsReasoning) {
  auto chat = chat_of(R"({"input": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call it."}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
      {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "Say it."}]},
      {"role": "assistant", "content": [{"type": "output_text", "text": "Rain."}]},
      {"type": "reasoning", "id": "rs_3", "summary": [{"type": "summary_text", "text": "Alone."}]},
      {"role": "user", "content": "Thanks"}]})");
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  const json want = json::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "reasoning": "Call it.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
    {"role": "assistant", "content": "Rain.", "reasoning": "Say it."},
    {"role": "assistant", "content": "", "reasoning": "Alone."},
    {"role": "user", "content": "Thanks"}])");
  EXPECT_EQ((*chat)["messages"], want) << (*chat)["messages"].dump(1);
  // The chat request it becomes carries the reasoning on those turns.
  auto parsed = parse_completion_body(chat->dump(), Endpoint::chat);
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  EXPECT_EQ(parsed->messages[1].reasoning, "Call it.");
  EXPECT_EQ(parsed->messages[3].reasoning, "Say it.");
  EXPECT_FALSE(parsed->messages[2].reasoning.has_value());
  auto encrypted = chat_of(R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]})");
  ASSERT_FALSE(encrypted.has_value());
  EXPECT_EQ(encrypted.status().code(), StatusCode::unsupported);
  auto bad = chat_of(R"({"input": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": 3}]}]})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("input[0].summary[0].text"), std::string::npos) << bad.status().message();
}

TEST(ResponsesRequest, ToolsAndTextFormatBecomeTheirChatForms) {
  auto chat = chat_of(R"({"input": "x", "parallel_tool_calls": false,
    "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "f"},
    "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "integer"}, "strict": true}}})");
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_EQ((*chat)["tools"], json::parse(R"([{"type": "function", "function": {"name": "f", "description": "d",
    "parameters": {"type": "object"}, "strict": true}}])"));
  EXPECT_EQ((*chat)["tool_choice"], json::parse(R"({"type": "function", "function": {"name": "f"}})"));
  EXPECT_EQ((*chat)["parallel_tool_calls"], false);
  EXPECT_EQ((*chat)["response_format"], json::parse(R"({"type": "json_schema", "json_schema":
    {"name": "s", "schema": {"type": "integer"}, "strict": true}})"));
  EXPECT_EQ(chat_of(R"({"input": "x", "text": {"format": {"type": "json_object"}}})")->at("response_format"),
            json::parse(R"({"type": "json_object"})"));
  EXPECT_FALSE(chat_of(R"({"input": "x", "text": {"format": {"type": "text"}}, "tool_choice": "required"})")
                   ->contains("response_format"));
  EXPECT_EQ(chat_of(R"({"input": "x", "reasoning": {"effort": "high"}})")->at("reasoning_effort"), "high");
  EXPECT_FALSE(chat_of(R"({"input": "x", "reasoning": {"effort": null}})")->contains("reasoning_effort"));
}

// input_image parts become chat's image_url parts beside the text (the chat path loads them).
TEST(ResponsesRequest, InputImagesBecomeChatImageParts) {
  auto chat = chat_of(R"({"input": [{"role": "user", "content": [{"type": "input_text", "text": "What is it?"},
    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}]}]})");
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_EQ((*chat)["messages"][0]["content"], json::parse(R"([{"type": "text", "text": "What is it?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])"));
  auto no_url = chat_of(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})");
  ASSERT_FALSE(no_url.has_value());
  EXPECT_NE(no_url.status().message().find("image_url"), std::string::npos) << no_url.status().message();
  // Text alone stays a string.
  EXPECT_EQ(chat_of(R"({"input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]})")
                ->at("messages")[0]["content"], "x");
}

TEST(ResponsesRequest, WhatItCannotDoIsRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "conversation": "conv_1"})", "conversation"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]})", "file_id"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image", "image_url": "u"}]}]})", "input_image"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "item_reference"},
      {R"({"input": [{"type": "web_search_call"}]})", "web_search_call"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "web_search"},
  };
  for (const auto& [body, says] : cases) {
    auto chat = chat_of(body);
    ASSERT_FALSE(chat.has_value()) << body;
    EXPECT_EQ(chat.status().code(), StatusCode::unsupported) << body;
    EXPECT_NE(chat.status().message().find(says), std::string::npos) << body << " -> " << chat.status().message();
  }
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {R"({"model": "m"})", "'input' is missing"},
      {R"({"input": []})", "'input'"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0].call_id"},
      {R"({"input": "x", "instructions": 3})", "'instructions'"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata.k"},
      {R"([1, 2])", "JSON object"},
  };
  for (const auto& [body, says] : malformed) {
    auto chat = chat_of(body);
    ASSERT_FALSE(chat.has_value()) << body;
    EXPECT_EQ(chat.status().code(), StatusCode::invalid_argument) << body;
    EXPECT_NE(chat.status().message().find(says), std::string::npos) << chat.status().message();
  }
}

// Random Responses bodies: each field present or not, with a value of the right shape or of a
// random type, nested items likewise.
json random_value(std::mt19937_64& rng) {
  switch (rng() % 7) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int>(rng() % 200) - 50;
    case 3: return "s" + std::to_string(rng() % 3);
    case 4: return json::array({static_cast<int>(rng() % 5)});
    case 5: return json::object({{"type", "function"}});
    default: return 0.5;
  }
}

json random_responses_body(std::mt19937_64& rng) {
  auto pick = [&](json good) { return rng() % 4 == 0 ? random_value(rng) : std::move(good); };
  json body = json::object();
  const json part = {{"type", rng() % 5 == 0 ? "input_image" : "input_text"}, {"text", "hi"}};
  const std::vector<json> items = {
      {{"role", "user"}, {"content", pick("hello")}},
      {{"type", "message"}, {"role", pick("assistant")}, {"content", pick(json::array({part}))}},
      {{"type", "function_call"}, {"call_id", pick("c1")}, {"name", pick("f")}, {"arguments", pick("{}")}},
      {{"type", "function_call_output"}, {"call_id", pick("c1")}, {"output", pick("ok")}},
      {{"type", pick("reasoning")}, {"summary", json::array()}},
  };
  if (rng() % 8 != 0) {
    if (rng() % 3 == 0) {
      body["input"] = pick("a prompt");
    } else {
      json list = json::array();
      for (int i = static_cast<int>(rng() % 5); i > 0; --i) list.push_back(pick(items[rng() % items.size()]));
      body["input"] = list;
    }
  }
  const std::vector<std::pair<const char*, json>> fields = {
      {"instructions", "sys"}, {"max_output_tokens", 8}, {"temperature", 0.7}, {"top_p", 0.9}, {"stream", true},
      {"tools", json::array({{{"type", "function"}, {"name", "f"}, {"parameters", {{"type", "object"}}}}})},
      {"tool_choice", json{{"type", "function"}, {"name", "f"}}}, {"parallel_tool_calls", false},
      {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", {{"type", "integer"}}}}}}},
      {"metadata", {{"k", "v"}}}, {"reasoning", {{"effort", "low"}}}, {"store", true}, {"truncation", "disabled"},
      {"previous_response_id", "resp_1"}, {"background", false}, {"user", "u"}, {"seed", 3}};
  for (const auto& [key, good] : fields) {
    if (rng() % 3 == 0) body[key] = pick(good);
  }
  return body;
}

// The client's key order survives: a tool's parameters and a json_schema's properties come out in
// the order sent (the template prints tools as given; a schema's order is its output's), not sorted.
TEST(ResponsesRequest, OrderedTools) {
  const auto chat = responses_to_chat(nlohmann::ordered_json::parse(R"({"input": "x",
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object",
                 "properties": {"zeta": {"type": "string"}, "alpha": {"type": "number"}}}}],
      "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object",
               "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}}}})"));
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  const auto& props = chat->at("tools")[0]["function"]["parameters"]["properties"];
  EXPECT_EQ(props.begin().key(), "zeta");
  EXPECT_EQ(chat->at("response_format")["json_schema"]["schema"]["properties"].begin().key(), "b");
  EXPECT_LT(chat->dump().find("\"zeta\""), chat->dump().find("\"alpha\""));
}

// Any body gets an answer, never an exception: the chat request it means (which the chat parser
// then checks, never throwing either) or an error naming what is wrong.
TEST(ResponsesRequest, FuzzRandomBodies) {
  std::mt19937_64 rng(2026);
  int n_ok = 0, n_err = 0;
  for (int i = 0; i < 3000; ++i) {
    const json body = random_responses_body(rng);
    const auto ordered = nlohmann::ordered_json::parse(body.dump());
    Expected<nlohmann::ordered_json> chat = invalid_argument("not run");
    ASSERT_NO_THROW(chat = responses_to_chat(ordered)) << body.dump();
    ASSERT_NO_THROW(responses_echo(ordered)) << body.dump();
    if (!chat) {
      ++n_err;
      EXPECT_FALSE(chat.status().message().empty());
      continue;
    }
    Expected<CompletionRequest> parsed = invalid_argument("not run");
    ASSERT_NO_THROW(parsed = parse_completion_body(chat->dump(), Endpoint::chat)) << chat->dump();
    if (parsed) {
      ++n_ok;
      EXPECT_FALSE(parsed->messages.empty());
    }
  }
  EXPECT_GT(n_ok, 100);
  EXPECT_GT(n_err, 100);
}

// The streamed events of a raw SSE body: each `event:` name with its data.
std::vector<json> events_of(const std::string& raw) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = raw.find("event: ", pos)) != std::string::npos) {
    const size_t eol = raw.find('\n', pos);
    const std::string name = raw.substr(pos + 7, eol - pos - 7);
    const size_t data = raw.find("data: ", eol);
    const size_t end = raw.find("\n\n", data);
    json e = json::parse(raw.substr(data + 6, end - data - 6));
    EXPECT_EQ(e["type"], name) << "the SSE event name is the event's type";
    out.push_back(std::move(e));
    pos = end;
  }
  EXPECT_EQ(raw.find("[DONE]"), std::string::npos);
  return out;
}

// A text answer: the Response's message is the chat answer to the same conversation, cut by
// max_output_tokens (incomplete); streamed, the events come in OpenAI's order and their deltas
// make the same text.
TEST(ServerResponses, TextAnswersAreTheChatAnswer) {
  testing::ChatTestServer s(testing::model_with_template("responses_text", brigade::testing::real_chat_template("qwen2.5")));
  ASSERT_TRUE(s.ok());
  const json body = {{"model", "tiny"}, {"input", "Why is the sky blue?"}, {"instructions", "Be brief."},
                     {"max_output_tokens", 6}, {"temperature", 0}, {"metadata", {{"k", "v"}}}};
  auto r = s.post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = json::parse(r.body);
  auto chat = s.chat({{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Why is the sky blue?"}}}},
                      {"max_tokens", 6}, {"temperature", 0}});
  const json c = json::parse(chat.body);
  EXPECT_EQ(resp["object"], "response");
  EXPECT_TRUE(resp["id"].get<std::string>().starts_with("resp_"));
  EXPECT_EQ(resp["status"], "incomplete");
  EXPECT_EQ(resp["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(resp["instructions"], "Be brief.");
  EXPECT_EQ(resp["metadata"], body["metadata"]);
  EXPECT_EQ(resp["store"], false);
  ASSERT_EQ(resp["output"].size(), 1u) << resp.dump(1);
  const json& msg = resp["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "incomplete");
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["text"], c["choices"][0]["message"]["content"]);
  EXPECT_EQ(resp["usage"]["input_tokens"], c["usage"]["prompt_tokens"]);
  EXPECT_EQ(resp["usage"]["output_tokens"], 6);
  EXPECT_EQ(resp["usage"]["total_tokens"], c["usage"]["total_tokens"]);

  json streamed_body = body;
  streamed_body["stream"] = true;
  const std::vector<json> events = events_of(s.stream_raw("/v1/responses", streamed_body));
  ASSERT_GE(events.size(), 8u);
  std::vector<std::string> types;
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["sequence_number"], i);
    const std::string type = events[i]["type"];
    if (type == "response.output_text.delta") {
      text += events[i]["delta"].get<std::string>();
      if (types.back() == type) continue;
    }
    types.push_back(type);
  }
  const std::vector<std::string> want = {"response.created", "response.in_progress", "response.output_item.added",
                                         "response.content_part.added", "response.output_text.delta",
                                         "response.output_text.done", "response.content_part.done",
                                         "response.output_item.done", "response.incomplete"};
  EXPECT_EQ(types, want);
  EXPECT_EQ(text, msg["content"][0]["text"]);
  ASSERT_EQ(events.back()["response"]["output"].size(), 1u);
  EXPECT_EQ(events.back()["response"]["output"][0]["content"], msg["content"]);
  EXPECT_EQ(events.back()["response"]["output"][0]["status"], "incomplete");
  EXPECT_EQ(events.front()["response"]["status"], "in_progress");
}

// A forced function call comes back as a function_call item (call_id, name, arguments), streamed
// as argument deltas; a conversation with the call and its result renders the prompt chat renders.
TEST(ServerResponses, FunctionCallsAreItems) {
  testing::ChatTestServer s(testing::model_with_template("responses_tools", brigade::testing::real_chat_template("qwen2.5")));
  ASSERT_TRUE(s.ok());
  json bias = {{"2", 100}};  // EOS as soon as the call is whole; whitespace banned
  for (char ch : std::string(" \t\r\n")) bias[std::to_string(3 + ch)] = -100;
  const json params = json::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 5}},
    "required": ["city"]})");
  const json body = {{"input", "Weather in Oslo?"}, {"temperature", 0}, {"max_output_tokens", 48}, {"logit_bias", bias},
                     {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", params}}}},
                     {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}};
  auto r = s.post("/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = json::parse(r.body);
  EXPECT_EQ(resp["status"], "completed") << resp.dump(1);
  ASSERT_EQ(resp["output"].size(), 1u) << resp.dump(1);
  const json& call = resp["output"][0];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_TRUE(call["call_id"].get<std::string>().starts_with("call_"));
  const json args = json::parse(call["arguments"].get<std::string>());
  EXPECT_TRUE(args["city"].is_string()) << args;
  EXPECT_EQ(resp["tools"], body["tools"]) << "the request's tools, as sent";

  json streamed = body;
  streamed["stream"] = true;
  std::string arguments;
  for (const json& e : events_of(s.stream_raw("/v1/responses", streamed))) {
    if (e["type"] == "response.function_call_arguments.delta") arguments += e["delta"].get<std::string>();
    if (e["type"] == "response.function_call_arguments.done") {
      EXPECT_EQ(e["arguments"], call["arguments"]);
    }
  }
  EXPECT_EQ(arguments, call["arguments"]);

  // The next turn: the call and its output as items give the prompt chat gives.
  const json turn = {{"input", {{{"role", "user"}, {"content", "Weather in Oslo?"}}, call,
                                {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "rain"}}}},
                     {"max_output_tokens", 1}, {"tools", body["tools"]}};
  auto next = s.post("/v1/responses", turn);
  ASSERT_EQ(next.status, 200) << next.body;
  const json chat_turn = {
      {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}},
                    {{"role", "assistant"}, {"content", nullptr},
                     {"tool_calls", {{{"id", call["call_id"]}, {"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", call["arguments"]}}}}}}},
                    {{"role", "tool"}, {"tool_call_id", call["call_id"]}, {"content", "rain"}}}},
      {"max_tokens", 1},
      {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", params}}}}}}};
  auto chat = s.chat(chat_turn);
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(json::parse(next.body)["usage"]["input_tokens"], json::parse(chat.body)["usage"]["prompt_tokens"]);
}

// With a reasoning parser, the thinking is a reasoning item before the message.
TEST(ServerResponses, ReasoningIsAnItem) {
  const std::string opens =
      "{%- for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}assistant: <think>\n";
  testing::ChatTestServer s(testing::model_with_template("responses_reasoning", opens), "", "deepseek_r1");
  ASSERT_TRUE(s.ok());
  auto r = s.post("/v1/responses", {{"input", "Why?"}, {"max_output_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = json::parse(r.body);
  ASSERT_EQ(resp["output"].size(), 1u) << resp.dump(1);
  const json& item = resp["output"][0];
  EXPECT_EQ(item["type"], "reasoning");
  EXPECT_EQ(item["summary"], json::array());
  EXPECT_FALSE(item["content"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(item["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(resp["status"], "incomplete");
}

TEST(ServerResponses, BadRequestsAre400) {
  testing::ChatTestServer s(testing::model_with_template("responses_bad", brigade::testing::real_chat_template("qwen2.5")));
  ASSERT_TRUE(s.ok());
  for (const json& body : {json{{"input", "x"}, {"previous_response_id", "resp_1"}}, json{{"model", "tiny"}},
                           json{{"input", "x"}, {"max_output_tokens", -1}}, json{{"input", "x"}, {"temperature", "hot"}}}) {
    auto r = s.post("/v1/responses", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    EXPECT_TRUE(json::parse(r.body)["error"]["message"].is_string());
  }
  auto bad_json = s.post_raw("/v1/responses", "{\"input\": ");
  EXPECT_EQ(bad_json.status, 400) << bad_json.body;
  EXPECT_NE(bad_json.body.find("not valid JSON"), std::string::npos) << bad_json.body;
}

}  // namespace
}  // namespace brigade::server
