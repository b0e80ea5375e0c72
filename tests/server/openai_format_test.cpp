// Response rendering: error bodies, SSE framing and the accumulation of choices.
#include "server/openai_format.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/http_client.h"

namespace brigade::server {
namespace {

using nlohmann::json;

Event token_event(int32_t id, std::string text, FinishReason finish = FinishReason::none) {
  Event ev;
  ev.token_ids = {id};
  ev.text = std::move(text);
  ev.finish = finish;
  ev.prompt_tokens = 3;
  return ev;
}

TEST(OpenaiFormat, ErrorBodyAndStatus) {
  EXPECT_EQ(http_status_for(StatusCode::invalid_argument), 400);
  EXPECT_EQ(http_status_for(StatusCode::out_of_resources), 429);
  EXPECT_EQ(http_status_for(StatusCode::internal), 500);
  json e = json::parse(error_body(429, "queue full", StatusCode::out_of_resources));
  EXPECT_EQ(e["error"]["message"], "queue full");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], "out_of_resources");
}

TEST(OpenaiFormat, NonStreamTwoChoicesWithUsage) {
  CompletionRequest req;
  req.n = 2;
  CompletionState st(req, "cmpl-1", "m", 7);
  EXPECT_EQ(st.on_event(0, token_event(5, "Hel")), "");
  st.on_event(1, token_event(6, "X", FinishReason::length));
  EXPECT_FALSE(st.done());
  st.on_event(0, token_event(7, "lo", FinishReason::stop));
  ASSERT_TRUE(st.done());
  json body = json::parse(st.final_body());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hello");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][1]["text"], "X");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
}

TEST(OpenaiFormat, StreamChunksAreSseAndEndWithDone) {
  CompletionRequest req;
  req.stream = true;
  req.include_usage = true;
  req.gen.logprobs = 1;
  CompletionState st(req, "cmpl-2", "m", 7);
  Event ev = token_event(5, "Hi");
  ev.logprobs = {-0.5f};
  ev.top_logprobs = {{{5, -0.5f}, {9, -1.5f}}};
  std::string out = st.on_event(0, ev);
  Event last = token_event(6, "!", FinishReason::length);
  last.logprobs = {-0.25f};
  last.top_logprobs = {{{6, -0.25f}}};
  out += st.on_event(0, last);
  out += st.stream_tail();
  SseSplitter split;
  std::vector<std::string> events;
  split.feed(out.substr(0, 10), events);
  split.feed(out.substr(10), events);
  ASSERT_EQ(events.size(), 4u);
  json first = json::parse(events[0]);
  EXPECT_EQ(first["choices"][0]["text"], "Hi");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(first["choices"][0]["logprobs"]["tokens"][0], "Hi");
  EXPECT_DOUBLE_EQ(first["choices"][0]["logprobs"]["top_logprobs"][0]["token_id:9"].get<double>(), -1.5);
  EXPECT_EQ(json::parse(events[1])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[2])["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[3], "[DONE]");
}

TEST(OpenaiFormat, FirstErrorIsKept) {
  CompletionRequest req;
  CompletionState st(req, "cmpl-3", "m", 7);
  Event ev;
  ev.finish = FinishReason::error;
  ev.error = "the prompt is too long";
  ev.error_code = StatusCode::invalid_argument;
  st.on_event(0, ev);
  EXPECT_TRUE(st.done());
  EXPECT_EQ(st.error().code(), StatusCode::invalid_argument);
}

// The first event of a request that asked for prompt logprobs: prompt "ab" = tokens 1 ("a"),
// 2 ("b"); the first has no logprob.
Event event_with_prompt(FinishReason finish, bool with_token) {
  Event ev = with_token ? token_event(9, "c", finish) : Event{};
  ev.finish = finish;
  ev.prompt_tokens = 2;
  if (with_token) ev.logprobs = {-0.25f};
  PromptLogprob first;
  first.token = 1;
  first.text = "a";
  PromptLogprob second;
  second.token = 2;
  second.text = "b";
  second.logprob = -1.5f;
  second.rank = 3;
  second.top = {{7, -0.5f, "x"}, {8, -1.0f, "y"}, {2, -1.5f, "b"}};
  ev.prompt_logprobs = {first, second};
  return ev;
}

// What lm-evaluation-harness sends: echo, logprobs 1, max_tokens 0.
TEST(OpenaiFormat, EchoWithLogprobsPutsThePromptFirst) {
  CompletionRequest req;
  req.echo = true;
  req.echo_texts = {"ab"};
  req.gen.logprobs = 1;
  req.gen.max_tokens = 0;
  CompletionState st(req, "cmpl-e", "m", 7);
  st.on_event(0, event_with_prompt(FinishReason::length, false));
  json body = json::parse(st.final_body());
  const json& ch = body["choices"][0];
  EXPECT_EQ(ch["text"], "ab");
  EXPECT_EQ(ch["finish_reason"], "length");
  EXPECT_EQ(ch["logprobs"]["tokens"], json({"a", "b"}));
  EXPECT_TRUE(ch["logprobs"]["token_logprobs"][0].is_null());
  EXPECT_EQ(ch["logprobs"]["token_logprobs"][1], -1.5);
  EXPECT_TRUE(ch["logprobs"]["top_logprobs"][0].is_null());
  // The token itself, then the best one: k + 1 entries.
  EXPECT_EQ(ch["logprobs"]["top_logprobs"][1], json({{"b", -1.5}, {"x", -0.5}}));
  EXPECT_EQ(ch["logprobs"]["text_offset"], json({0, 1}));
  EXPECT_FALSE(ch.contains("prompt_logprobs")) << "not asked";
  EXPECT_EQ(body["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(body["usage"]["completion_tokens"], 0);

  // With a generated token: prompt entries, then the generated ones, offsets into the whole text.
  CompletionRequest gen = req;
  gen.gen.max_tokens = 1;
  CompletionState st2(gen, "cmpl-f", "m", 7);
  st2.on_event(0, event_with_prompt(FinishReason::length, true));
  body = json::parse(st2.final_body());
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(body["choices"][0]["logprobs"]["tokens"], json({"a", "b", "c"}));
  EXPECT_EQ(body["choices"][0]["logprobs"]["token_logprobs"][2], -0.25);
  EXPECT_EQ(body["choices"][0]["logprobs"]["text_offset"], json({0, 1, 2}));
}

TEST(OpenaiFormat, EchoStreamsThePromptInTheFirstChunk) {
  CompletionRequest req;
  req.echo = true;
  req.echo_texts = {"ab"};
  req.stream = true;
  CompletionState st(req, "cmpl-s", "m", 7);
  const std::string first = st.on_event(0, event_with_prompt(FinishReason::none, true));
  const std::string second = st.on_event(0, token_event(10, "d", FinishReason::length));
  auto chunk = [](const std::string& sse) { return json::parse(sse.substr(6)); };
  EXPECT_EQ(chunk(first)["choices"][0]["text"], "abc");
  EXPECT_EQ(chunk(second)["choices"][0]["text"], "d");
}

// vLLM's prompt_logprobs: null first, then {"<id>": {logprob, rank, decoded_token}} with the
// prompt token first and the k best after it (the token not repeated).
TEST(OpenaiFormat, PromptLogprobsInVllmsFormat) {
  CompletionRequest req;
  req.prompt_logprobs = 3;
  req.gen.prompt_logprobs = 3;
  CompletionState st(req, "cmpl-p", "m", 7);
  st.on_event(0, event_with_prompt(FinishReason::length, true));
  const std::string text = st.final_body();
  json body = json::parse(text);
  const json& pl = body["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(pl.size(), 2u);
  EXPECT_TRUE(pl[0].is_null());
  EXPECT_EQ(pl[1].size(), 3u);
  EXPECT_EQ(pl[1]["2"], json({{"decoded_token", "b"}, {"logprob", -1.5}, {"rank", 3}}));
  EXPECT_EQ(pl[1]["7"], json({{"decoded_token", "x"}, {"logprob", -0.5}, {"rank", 1}}));
  EXPECT_EQ(pl[1]["8"]["rank"], 2);
  EXPECT_LT(text.find("\"2\":{"), text.find("\"7\":{")) << "the prompt token comes first, as in vLLM";
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null()) << "no logprobs asked";

  CompletionRequest chat = req;
  chat.endpoint = Endpoint::chat;
  CompletionState cs(chat, "chatcmpl-p", "m", 7);
  cs.on_event(0, event_with_prompt(FinishReason::length, true));
  body = json::parse(cs.final_body());
  EXPECT_EQ(body["prompt_logprobs"][1]["2"]["rank"], 3) << "chat: beside the choices, as vLLM";
  EXPECT_FALSE(body["choices"][0].contains("prompt_logprobs"));
}

CompletionRequest tool_request(ToolChoice choice, bool stream) {
  CompletionRequest req;
  req.endpoint = Endpoint::chat;
  req.stream = stream;
  req.tools.tools = {R"({"type":"function","function":{"name":"get_weather"}})"};
  req.tools.functions = {{"get_weather", ""}};
  req.tools.choice = choice;
  req.tools.named = choice == ToolChoice::named ? "get_weather" : "";
  return req;
}

const char* kPieces[] = {"Checking.\n<tool", "_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Zürich\"}}",
                         "\n</tool_call>"};

TEST(OpenaiFormat, ToolCallsInTheMessage) {
  CompletionState st(tool_request(ToolChoice::automatic, false), "chatcmpl-1", "m", 7);
  for (int i = 0; i < 4; ++i) st.on_event(0, token_event(10 + i, kPieces[i], i == 3 ? FinishReason::stop : FinishReason::none));
  json body = json::parse(st.final_body());
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["id"].get<std::string>().size(), 29u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), json({{"city", "Zürich"}}));

  // tool_choice none: the same text is plain content.
  CompletionState none(tool_request(ToolChoice::none, false), "chatcmpl-2", "m", 7);
  std::string all;
  for (int i = 0; i < 4; ++i) {
    none.on_event(0, token_event(10 + i, kPieces[i], i == 3 ? FinishReason::stop : FinishReason::none));
    all += kPieces[i];
  }
  json plain = json::parse(none.final_body())["choices"][0];
  EXPECT_EQ(plain["message"]["content"], all);
  EXPECT_FALSE(plain["message"].contains("tool_calls"));
  EXPECT_EQ(plain["finish_reason"], "stop");
}

// The chunks of an SSE stream, as JSON.
std::vector<json> chunks_of(const std::string& sse) {
  std::vector<json> out;
  for (size_t at = sse.find("data: "); at != std::string::npos; at = sse.find("data: ", at + 1)) {
    const size_t end = sse.find("\n\n", at);
    const std::string data = sse.substr(at + 6, end - at - 6);
    if (data != "[DONE]") out.push_back(json::parse(data));
  }
  return out;
}

TEST(OpenaiFormat, ToolCallsStreamAsDeltas) {
  CompletionState st(tool_request(ToolChoice::automatic, true), "chatcmpl-3", "m", 7);
  std::string sse;
  for (int i = 0; i < 4; ++i) sse += st.on_event(0, token_event(10 + i, kPieces[i], i == 3 ? FinishReason::stop : FinishReason::none));
  const std::vector<json> chunks = chunks_of(sse);
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  std::string content, name, arguments, id;
  for (const json& c : chunks) {
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    const json& call = delta["tool_calls"][0];
    EXPECT_EQ(call["index"], 0);
    if (call.contains("id")) id = call["id"];
    if (call["function"].contains("name")) name += call["function"]["name"].get<std::string>();
    arguments += call["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(content, "Checking.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(json::parse(arguments), json({{"city", "Zürich"}}));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null());
}

TEST(OpenaiFormat, ForcedNamedStreamsArgumentsAsTheyCome) {
  CompletionState st(tool_request(ToolChoice::named, true), "chatcmpl-4", "m", 7);
  std::vector<json> first = chunks_of(st.on_event(0, token_event(1, "{\"city\":")));
  ASSERT_EQ(first.size(), 1u);
  const json& call = first[0]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\":");
  std::vector<json> last = chunks_of(st.on_event(0, token_event(2, "\"Oslo\"}", FinishReason::stop)));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "\"Oslo\"}");
  EXPECT_FALSE(last[0]["choices"][0]["delta"]["tool_calls"][0].contains("id")) << "id and name come once";
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "stop") << "a named call: stop, as OpenAI and vLLM";
}

// A chat request under a reasoning parser (qwen3's rule), the prompt as the template left it.
CompletionRequest reasoning_request(bool stream, bool include_reasoning = true) {
  CompletionRequest req = tool_request(ToolChoice::none, stream);
  req.tools = {};
  req.reasoning = ReasoningKind::qwen3;
  req.include_reasoning = include_reasoning;
  req.gen.prompt = "<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n";
  return req;
}

const char* kThought[] = {"<think>\nWhy", " not.</thi", "nk>\n\nBecause."};

// Every delta's `key` text, concatenated; and whether `reasoning` always repeats `reasoning_content`.
std::string deltas_of(const std::vector<json>& chunks, const std::string& key) {
  std::string out;
  for (const json& c : chunks) {
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) {
      EXPECT_EQ(delta["reasoning"], delta["reasoning_content"]);
    }
    if (delta.contains(key)) out += delta[key].get<std::string>();
  }
  return out;
}

TEST(OpenaiFormat, ReasoningGoesToItsOwnField) {
  for (bool include : {true, false}) {
    CompletionState st(reasoning_request(false, include), "chatcmpl-5", "m", 7);
    for (int i = 0; i < 3; ++i) st.on_event(0, token_event(20 + i, kThought[i], i == 2 ? FinishReason::stop : FinishReason::none));
    const json message = json::parse(st.final_body())["choices"][0]["message"];
    EXPECT_EQ(message["content"], "\n\nBecause.");
    if (include) {
      EXPECT_EQ(message["reasoning_content"], "\nWhy not.");
      EXPECT_EQ(message["reasoning"], "\nWhy not.");
    } else {
      EXPECT_FALSE(message.contains("reasoning_content")) << "include_reasoning false drops it";
      EXPECT_FALSE(message.contains("reasoning"));
    }

    CompletionState stream(reasoning_request(true, include), "chatcmpl-6", "m", 7);
    std::string sse;
    for (int i = 0; i < 3; ++i)
      sse += stream.on_event(0, token_event(20 + i, kThought[i], i == 2 ? FinishReason::stop : FinishReason::none));
    const std::vector<json> chunks = chunks_of(sse);
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
    EXPECT_EQ(deltas_of(chunks, "reasoning_content"), include ? "\nWhy not." : "");
    EXPECT_EQ(deltas_of(chunks, "content"), "\n\nBecause.");
    EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "stop");
  }
}

TEST(OpenaiFormat, OutputCutWhileThinkingHasNoContent) {
  CompletionState st(reasoning_request(false), "chatcmpl-7", "m", 7);
  st.on_event(0, token_event(20, "<think>Hmm, let"));
  st.on_event(0, token_event(21, " me see", FinishReason::length));
  const json choice = json::parse(st.final_body())["choices"][0];
  EXPECT_EQ(choice["message"]["reasoning_content"], "Hmm, let me see");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["finish_reason"], "length");
}

// Tool calls are read from the content only: one written while thinking is reasoning text.
TEST(OpenaiFormat, ToolCallsAfterTheReasoning) {
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  for (bool stream : {false, true}) {
    CompletionRequest req = tool_request(ToolChoice::automatic, stream);
    req.reasoning = ReasoningKind::qwen3;
    req.gen.prompt = "<|im_start|>assistant\n";
    CompletionState st(req, "chatcmpl-8", "m", 7);
    const std::string thought = "<think>Maybe " + call + "?</think>\n";
    std::string sse = st.on_event(0, token_event(30, thought));
    sse += st.on_event(0, token_event(31, call, FinishReason::stop));
    if (!stream) {
      const json choice = json::parse(st.final_body())["choices"][0];
      EXPECT_EQ(choice["message"]["reasoning_content"], "Maybe " + call + "?");
      EXPECT_TRUE(choice["message"]["content"].is_null());
      ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
      EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
      EXPECT_EQ(choice["finish_reason"], "tool_calls");
      continue;
    }
    const std::vector<json> chunks = chunks_of(sse);
    EXPECT_EQ(deltas_of(chunks, "reasoning_content"), "Maybe " + call + "?");
    int n_calls = 0;
    for (const json& c : chunks) n_calls += c["choices"][0]["delta"].contains("tool_calls");
    EXPECT_EQ(n_calls, 1);
    EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  }
}

// vLLM's return_token_ids: the prompt's ids (from the first event) and each choice's output ids,
// whole and as stream deltas (chat: the prompt's beside the choices, once).
TEST(OpenaiFormat, ReturnTokenIdsGivesThePromptAndOutputIds) {
  const auto first_event = [](int32_t id, const std::string& text) {
    Event ev = token_event(id, text);
    ev.prompt_token_ids = {1, 4, 4};
    return ev;
  };
  for (Endpoint endpoint : {Endpoint::completions, Endpoint::chat}) {
    const bool chat = endpoint == Endpoint::chat;
    CompletionRequest req;
    req.endpoint = endpoint;
    req.return_token_ids = true;
    CompletionState st(req, "x", "m", 7);
    st.on_event(0, first_event(5, "Hel"));
    st.on_event(0, token_event(7, "lo", FinishReason::stop));
    const json body = json::parse(st.final_body());
    const json& ch = body["choices"][0];
    EXPECT_EQ(ch["token_ids"], json({5, 7})) << chat;
    EXPECT_EQ((chat ? body : ch)["prompt_token_ids"], json({1, 4, 4})) << chat;
    EXPECT_FALSE((chat ? ch : body).contains("prompt_token_ids")) << chat;

    req.stream = true;
    CompletionState live(req, "x", "m", 7);
    const std::string a = live.on_event(0, first_event(5, "Hel"));
    const std::string b = live.on_event(0, token_event(7, "lo", FinishReason::stop));
    auto chunk = [](const std::string& sse) { return json::parse(sse.substr(6, sse.find("\n\n") - 6)); };
    const json ca = chunk(a), cb = chunk(b);
    EXPECT_EQ(ca["choices"][0]["token_ids"], json({5})) << chat;
    EXPECT_EQ(cb["choices"][0]["token_ids"], json({7})) << chat;
    EXPECT_EQ((chat ? ca : ca["choices"][0])["prompt_token_ids"], json({1, 4, 4})) << chat;
    EXPECT_FALSE((chat ? cb : cb["choices"][0]).contains("prompt_token_ids")) << "the first chunk only";
  }
  CompletionRequest plain;  // not asked: no such fields
  CompletionState st(plain, "x", "m", 7);
  st.on_event(0, first_event(5, "Hi"));
  st.on_event(0, token_event(7, "!", FinishReason::stop));
  const json body = json::parse(st.final_body());
  EXPECT_FALSE(body["choices"][0].contains("token_ids"));
  EXPECT_FALSE(body["choices"][0].contains("prompt_token_ids"));
}

// vLLM's return_tokens_as_token_ids: every token in logprobs is "token_id:N" (sampled, the
// alternatives, and echoed prompt tokens); the text offsets stay those of the text.
TEST(OpenaiFormat, TokensAsTokenIdsNameEveryLogprobToken) {
  CompletionRequest req;
  req.echo = true;
  req.echo_texts = {"ab"};
  req.gen.logprobs = 1;
  req.return_tokens_as_token_ids = true;
  CompletionState st(req, "x", "m", 7);
  Event ev = event_with_prompt(FinishReason::length, true);
  ev.top_logprobs = {{{9, -0.25f}, {3, -2.0f}}};
  st.on_event(0, ev);
  const json lp = json::parse(st.final_body())["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"token_id:1", "token_id:2", "token_id:9"}));
  EXPECT_EQ(lp["top_logprobs"][1], json({{"token_id:2", -1.5}, {"token_id:7", -0.5}}));
  EXPECT_EQ(lp["top_logprobs"][2], json({{"token_id:9", -0.25}, {"token_id:3", -2.0}}));
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));

  CompletionRequest chat;
  chat.endpoint = Endpoint::chat;
  chat.chat_logprobs = true;
  chat.gen.logprobs = 1;
  chat.return_tokens_as_token_ids = true;
  CompletionState cs(chat, "x", "m", 7);
  Event t = token_event(9, "c", FinishReason::stop);
  t.logprobs = {-0.25f};
  t.top_logprobs = {{{9, -0.25f}}};
  cs.on_event(0, t);
  const json content = json::parse(cs.final_body())["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(content["token"], "token_id:9");
  EXPECT_EQ(content["bytes"], json::array({116, 111, 107, 101, 110, 95, 105, 100, 58, 57}));  // the name's bytes, as vLLM
  EXPECT_EQ(content["top_logprobs"][0]["token"], "token_id:9");
  chat.return_tokens_as_token_ids = false;  // the text otherwise
  CompletionState text(chat, "x", "m", 7);
  text.on_event(0, t);
  EXPECT_EQ(json::parse(text.final_body())["choices"][0]["logprobs"]["content"][0]["token"], "c");
}

}  // namespace
}  // namespace brigade::server
