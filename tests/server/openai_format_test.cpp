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

}  // namespace
}  // namespace brigade::server
