// OpenAI response bodies: errors, completion/chat JSON, SSE framing, and the accumulation of one
// HTTP request's engine events (its n choices) into them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "core/status.h"
#include "server/openai_parse.h"
#include "server/harmony_parser.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace brigade::server {

// HTTP status for an engine or parse error: invalid_argument 400, unsupported 400, not_found 404,
// out_of_resources 429 (the queue is full; retry later), cancelled 503 (shutting down),
// everything else 500.
int http_status_for(StatusCode code);
// {"error": {"message", "type", "param", "code"}}; type is invalid_request_error (4xx) or
// server_error (5xx); code is the brigade status code name.
std::string error_body(int http_status, const std::string& message, StatusCode code);
// One server-sent event: "data: <json>\n\n"; and the terminating "data: [DONE]\n\n".
std::string sse_data(const std::string& json_text);
std::string sse_done();

// What a connection feeds one request's engine events to, and sends: CompletionState for
// completions and chat, ResponsesState (server/responses_state.h) for the Responses API. Not
// thread-safe: the server calls it from the connection's strand.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Applies one event of choice `choice`. In stream mode returns the text to send now (may be
  // empty); in non-stream mode returns "".
  virtual std::string on_event(int choice, const Event& ev) = 0;
  virtual bool done() const = 0;
  // The first error event seen (ok when none).
  virtual const Status& error() const = 0;
  // Non-stream: the whole response body.
  virtual std::string final_body() const = 0;
  // Stream: what is sent after the last event.
  virtual std::string stream_tail() = 0;
  // Stream: an error event of a choice after the stream began.
  virtual std::string stream_error(const Event& ev);
};

// Collects the events of one HTTP completion request and renders OpenAI JSON. Not thread-safe:
// the server feeds it from the connection's strand. A chat request with tools (tool_choice other
// than none) runs each choice's text through a ToolCallParser: calls become `tool_calls` (with
// the id the model wrote (Kimi K2's functions.NAME:IDX), else "call_" + 24 random alphanumerics,
// or 9 for mistral, whose templates take no other; streamed as delta.tool_calls), the rest stays content
// (null when empty and calls were made), and finish_reason "stop" becomes "tool_calls" (but for
// a tool_choice naming the function, where OpenAI and vLLM keep "stop"). A chat request with a
// reasoning parser first splits each choice's text with a ReasoningSplitter: the reasoning goes
// out as `reasoning_content` (and vLLM's newer name `reasoning`; dropped with include_reasoning
// false), the rest is the content the tool parser reads. With openai_gptoss (gpt-oss's harmony)
// one HarmonyParser splits each choice's text into reasoning, content and (with the openai tool
// syntax and tool_choice auto) calls.
class CompletionState final : public ResponseWriter {
 public:
  CompletionState(const CompletionRequest& request, std::string id, std::string model, int64_t created);

  std::string on_event(int choice, const Event& ev) override;
  bool done() const override { return n_done_ == static_cast<int>(choices_.size()); }
  const Status& error() const override { return error_; }
  std::string final_body() const override;
  // The usage chunk (when asked) and [DONE].
  std::string stream_tail() override;

 private:
  struct Choice {
    std::string text;
    std::vector<int32_t> token_ids;
    std::vector<float> logprobs;
    std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
    std::vector<std::string> token_texts;
    std::vector<PromptLogprob> prompt_logprobs;  // from the first event, when asked
    std::vector<int32_t> prompt_ids;              // return_token_ids: from the first event
    bool sent_prompt_ids = false;                 // stream: the choice's prompt_token_ids went out
    bool echoed = false;                          // stream: the prompt (chat: the echoed message) went out
    FinishReason finish = FinishReason::none;
    bool sent_role = false;
    int completion_tokens = 0;
    int prompt_tokens = 0;                        // as the engine counted this choice's prompt
    int cached_tokens = 0;                        // of those, served from the prefix cache
    std::unique_ptr<ReasoningSplitter> reasoning_parser;  // chat with a `<think>` reasoning parser
    std::unique_ptr<HarmonyParser> harmony;               // chat with openai_gptoss: reasoning, content and its calls
    std::unique_ptr<ToolCallParser> tool_parser;  // chat with tools: splits text into content and calls
    std::string reasoning;                        // with a reasoning parser: the reasoning so far
    std::string content;                          // with either parser: the content released so far
    struct Call {
      std::string id, name, arguments;
    };
    std::vector<Call> calls;
  };
  // What one event's text released: reasoning, then content and calls.
  struct Split {
    std::string reasoning;
    ToolParse tools;
  };
  bool splits(const Choice& c) const { return c.reasoning_parser || c.tool_parser || c.harmony; }
  bool reasons(const Choice& c) const { return c.reasoning_parser || c.harmony; }
  // Feeds the event's text through the choice's parsers (when it has them), recording what they release.
  Split split_output(const Event& ev, Choice& c);
  ToolParse split_tools(std::string_view text, bool last, Choice& c);
  Split split_harmony(const Event& ev, Choice& c);
  // Records released calls in the choice (ids for new ones).
  void record_calls(const std::vector<ToolCallDelta>& calls, Choice& c);
  std::string chunk(int choice, const Event& ev, Choice& c, const Split& parsed) const;
  std::string chat_chunks(const Event& ev, Choice& c, const Split& parsed, nlohmann::ordered_json ch,
                          nlohmann::ordered_json body) const;
  // echo: chat's echo, the text the content starts with (empty: none).
  nlohmann::ordered_json chat_message(const Choice& c, const std::string& echo) const;
  // finish_reason: "tool_calls" for a choice that stopped after making calls, except a forced
  // named call ("stop", as OpenAI and vLLM answer).
  nlohmann::ordered_json choice_finish(const Choice& c) const;
  // The legacy completions / chat logprobs of generated tokens [from, to), the text of `from`
  // starting at text_offset; with_prompt (echo) puts the prompt's tokens first.
  std::string logprobs_json(const Choice& c, size_t from, size_t to, size_t text_offset, bool with_prompt) const;
  // vLLM's `prompt_logprobs`: [null, {"<id>": {logprob, rank, decoded_token}, ...}, ...].
  std::string prompt_logprobs_json(const Choice& c) const;
  std::string usage_json() const;

  CompletionRequest request_;
  std::string id_, model_;
  int64_t created_;
  std::vector<Choice> choices_;
  int n_done_ = 0;
  Status error_;
};

// Beam k of a beam search (use_beam_search) as the events a streamed choice would have had: one
// per token (its text, and its logprobs when the beams carry them), the last with the beam's
// finish; the first with the prompt's size, cached tokens and (with_prompt_ids) ids. A beam of no
// tokens (its end id dropped) is one final event.
std::vector<Event> beam_events(const BeamSearchResult& result, size_t k, bool with_prompt_ids);

// GET /v1/models.
std::string models_body(const std::string& model, int64_t created, int max_context);
// POST /tokenize and /detokenize (vLLM's bodies).
std::string tokenize_body(const std::vector<int32_t>& ids, int max_context,
                          const std::vector<std::string>* token_strs = nullptr);
std::string detokenize_body(const std::string& text);

}  // namespace brigade::server
