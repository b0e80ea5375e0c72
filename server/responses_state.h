// The Responses API's output (POST /v1/responses): a chat request's output rendered as a
// Response object and, streamed, as its typed events.
//
// The request runs as a chat request (server/responses_request.h); ResponsesState feeds its
// events through a CompletionState in stream mode and reads the chat deltas it releases, so
// reasoning, content and tool calls are split exactly as in chat. Each run of deltas of one kind
// becomes an output item: `reasoning` (content [{type: reasoning_text}], vLLM's form, summary []),
// `message` (content [{type: output_text, annotations: []}]) or `function_call` (call_id, name,
// arguments). Streamed: response.created and response.in_progress, then per item
// output_item.added, its deltas (reasoning_text.delta, content_part.added + output_text.delta,
// function_call_arguments.delta) and their .done events, output_item.done; last
// response.completed (response.incomplete after max_output_tokens, with incomplete_details;
// response.failed after an error). Every event carries its type as the SSE event name and a
// sequence_number; there is no [DONE] (OpenAI sends none here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_format.h"

namespace brigade::server {

class ResponsesState final : public ResponseWriter {
 public:
  // request: the chat request of a Responses body (responses_echo: the fields the Response
  // object repeats); id "resp_...".
  ResponsesState(const CompletionRequest& request, std::string id, std::string model, int64_t created);

  std::string on_event(int choice, const Event& ev) override;
  bool done() const override { return chat_.done(); }
  const Status& error() const override { return chat_.error(); }
  std::string final_body() const override;
  std::string stream_tail() override;
  std::string stream_error(const Event& ev) override;

 private:
  enum class Kind { reasoning, message, function_call };
  struct Item {
    Kind kind = Kind::message;
    std::string id;
    std::string text;  // reasoning or output text; a call's arguments
    std::string call_id, name;
    bool done = false;
  };

  // One chat chunk's deltas (one delta per chunk: CompletionState's form).
  void apply(const nlohmann::ordered_json& chunk, std::string& out);
  // Appends a piece of `kind` to the open item, opening a new item when the kind changes.
  Item& item_for(Kind kind, std::string& out);
  void close_item(std::string& out);
  std::string event(nlohmann::ordered_json e);
  nlohmann::ordered_json item_json(const Item& item) const;
  nlohmann::ordered_json response_json(const std::string& status) const;
  std::string status() const;

  CompletionState chat_;  // the chat request's state, in stream mode
  bool stream_;
  std::string id_, model_;
  int64_t created_;
  nlohmann::ordered_json echo_;  // the request fields the Response repeats
  std::vector<Item> items_;
  int n_seq_ = 0;  // sequence_number of the next event
  bool started_ = false;
  FinishReason finish_ = FinishReason::none;
  nlohmann::ordered_json usage_;
  Status failed_;  // an error event's status (response.failed)
};

}  // namespace brigade::server
