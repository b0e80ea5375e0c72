// Request routing, apart from sockets: decides each HTTP request's answer, or hands back a parsed
// completion request for the session to run on the engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "brigade/engine.h"
#include "server/classify_format.h"
#include "server/embeddings_format.h"
#include "server/http_server.h"
#include "server/inflight.h"
#include "server/metrics.h"
#include "server/openai_parse.h"
#include "server/score_format.h"

namespace brigade::server {

// What every connection shares; lives as long as the last connection.
struct ServerContext {
  ServerContext(Engine& e, ServerOptions o) : engine(e), options(std::move(o)), metrics(options.model_name) {}
  Engine& engine;
  const ServerOptions options;
  ServerMetrics metrics;
  Inflight inflight;
  int64_t created = 0;  // unix seconds at start
  std::atomic<uint64_t> next_id{1};
  ReasoningKind reasoning = ReasoningKind::none;  // options.reasoning_parser, resolved at start
  std::optional<ChatToolSyntax> tool_syntax;      // options.tool_call_parser, resolved at start (none: the template's)
  // The reasoning kind's tags' token ids (`<think>` / `</think>`, Seed-OSS's `<seed:think>` /
  // `</seed:think>`, Cohere's `<|START_THINKING|>` / `<|END_THINKING|>`) when each is one token of the vocabulary, else -1: a constrained answer
  // waits for the close tag only when it is one token (OutputConstraints watches ids, not text).
  int32_t think_open_id = -1;
  int32_t think_close_id = -1;
  // options.reasoning_end_str's tokens (think_close_id last), forced when a thinking_token_budget
  // is spent; empty: think_close_id alone.
  std::vector<int32_t> thinking_end_ids;
  // harmony's `<|return|>` and `<|call|>` where each is one token: a harmony chat stops at them
  // (gpt-oss's generation_config names them EOS; a tokenizer alone may not).
  std::vector<int32_t> harmony_stop_ids;
  // harmony's final-channel header (`<|channel|>final`'s ids) and `<|message|>`'s id where it is
  // one token: a constrained answer waits for them (delay_constraint), else -1 / empty.
  std::vector<int32_t> harmony_final_header;
  int32_t harmony_message_id = -1;
};

struct SimpleResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  int64_t retry_after_ms = 0;  // > 0: Retry-After (whole seconds, rounded up) and retry-after-ms
};

struct HttpRequestView {
  std::string_view method;  // "GET", "POST", ...
  std::string_view target;  // path and query
  std::string_view authorization;
  std::string_view body;
  std::string_view request_id;  // the X-Request-Id header (vLLM's: names the response), or empty
};

// A JSON error response with the OpenAI body.
SimpleResponse error_response(int status, const std::string& message, StatusCode code);
// What route() hands the session: an answer, or a completion, embeddings, score or classify
// request to run.
using Routed = std::variant<SimpleResponse, CompletionRequest, EmbeddingsRequest, ScoreRequest, ClassifyRequest>;

// The answer to one request, or the request to run on the engine.
Routed route(ServerContext& ctx, const HttpRequestView& req);

}  // namespace brigade::server
