// The OpenAI-compatible HTTP frontend (DESIGN.md §10) over an Engine.
//
//   auto server = brigade::server::HttpServer::start(*engine, {.port = 8000});
//   ...  // serves until stop() or destruction
//
// Asynchronous (Boost.Beast/Asio): a small pool of I/O threads runs every connection; engine
// events are posted to the connection's strand, never handled on the engine's threads. Endpoints:
// POST /v1/completions, POST /v1/chat/completions (SSE with "stream": true), GET /v1/models,
// GET /health, GET /metrics (Prometheus text). With an API key, /v1/* needs
// "Authorization: Bearer <key>" (401 otherwise); /health and /metrics stay open for probes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "models/generation_config.h"

namespace brigade::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;                 // 0 = an ephemeral port (see HttpServer::port())
  std::string api_key;             // empty = no authentication
  std::string model_name = "brigade";  // the id in /v1/models and in responses
  // vLLM's further --served-model-name names: /v1/models lists each beside model_name, and a
  // request naming one runs the base model (its responses say model_name, as vLLM's first name).
  std::vector<std::string> model_aliases;
  int n_threads = 2;                   // I/O threads (connections are multiplexed on them)
  size_t max_body_bytes = 4u << 20;    // larger bodies are answered 413
  // Chat answers split `<think>` blocks into reasoning_content (server/reasoning_parser.h):
  // deepseek_r1, qwen3, deepseek_v3, glm45, auto (qwen3's rule when the vocabulary has a
  // `</think>` token) or none (the output stays whole, as vLLM without --reasoning-parser).
  std::string reasoning_parser = "none";
  // What a request's thinking_token_budget forces once spent (vLLM's --reasoning-config
  // reasoning_end_str), e.g. "\n\nTime is up; the answer now.\n</think>": it must end with the
  // reasoning parser's closing tag, one token. Empty: the closing tag alone.
  std::string reasoning_end_str;
  // vLLM's reasoning_start_str, accepted when it is the parser's opening tag (start() fails otherwise).
  std::string reasoning_start_str;
  // How chat answers' tool calls are parsed (vLLM's --tool-call-parser names, models/chat_template.h
  // ChatToolSyntax): empty = the syntax the model's chat template teaches; a name overrides it.
  // An unknown name fails start() listing the names brigade has.
  std::string tool_call_parser;
  // Template variables every chat request gets (vLLM's --default-chat-template-kwargs), as a JSON
  // object's text; a request's chat_template_kwargs override them key by key.
  std::string default_chat_template_kwargs;
  // Serves POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's routes under
  // VLLM_ALLOW_RUNTIME_LORA_UPDATING): clients may then make the server read any adapter path it
  // can see, so it is off unless asked for (and behind api_key when one is set). The engine needs
  // LoRA slots (EngineOptions::enable_lora).
  bool allow_runtime_lora_updating = false;
  // Serves POST /reset_prefix_cache (vLLM's, under VLLM_SERVER_DEV_MODE) and GET/POST
  // /flush_cache (SGLang's): any client could then empty the prefix cache, so it is off unless
  // asked for (and behind api_key when one is set). `?disk=true` clears the disk tiers too.
  bool allow_cache_reset = false;
  // Logprobs name tokens "token_id:N" unless a request says otherwise (vLLM's
  // --return-tokens-as-token-ids: tokens that are not valid UTF-8 alone stay identifiable).
  bool return_tokens_as_token_ids = false;
  // A chat (or /tokenize) request's own chat_template is rendered (vLLM's
  // --trust-request-chat-template); refused with 400 otherwise, as a template is code the server runs.
  bool trust_request_chat_template = false;
  // Sampling settings for the fields a request leaves out, and a cap on max_tokens: the model's
  // generation_config.json as vLLM's --generation-config auto takes it (resolve_generation_defaults;
  // `brigade serve` fills it). Empty: brigade's own defaults (temperature 1, no top-p / top-k).
  GenerationDefaults generation_defaults;
  // vLLM's --enable-log-requests: each generation request the server starts is described here
  // (describe_request in server/stats_logger.h: its response id, prompt and sampling settings),
  // on an I/O thread; the prompt cut to max_log_len characters (or ids) when > 0. Unset: nothing.
  std::function<void(const std::string&)> request_log;
  int max_log_len = 0;
};

class HttpServer {
 public:
  // Binds and starts serving. The engine must outlive the server. Errors: a bad host, a port in
  // use (io_error).
  static Expected<std::unique_ptr<HttpServer>> start(Engine& engine, const ServerOptions& options);
  virtual ~HttpServer() = default;  // stops

  // The bound port (the chosen one when options.port was 0).
  virtual int port() const = 0;
  // Stops accepting, cancels the engine requests in flight and waits (bounded) for their last
  // events, then stops the I/O threads. Idempotent; thread-safe.
  virtual void stop() = 0;
};

}  // namespace brigade::server
