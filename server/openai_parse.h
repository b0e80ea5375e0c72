// OpenAI request bodies (/v1/completions, /v1/chat/completions) → engine requests.
//
// A plain function over parsed JSON so that it is unit- and fuzz-testable without sockets. It
// never throws: every malformed or out-of-range field is an invalid_argument Status whose message
// names the field, says what was wrong and what is valid.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "models/generation_config.h"
#include "server/openai_tools.h"
#include "server/reasoning_parser.h"

namespace brigade::server {

enum class Endpoint { completions, chat };

// role (system, user, assistant, tool or developer), content (text parts joined), an assistant's
// tool_calls and a tool result's tool_call_id.
using ChatMessage = brigade::ChatMessage;

// One completions prompt: text, or token ids.
struct PromptInput {
  std::string text;
  std::vector<int32_t> ids;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                  // as sent; not checked against the served name
  GenerateOptions gen;                // prompt (completions: the first), sampling, max_tokens, stop, logprobs
  std::vector<ChatMessage> messages;  // chat only
  // Chat: the `image_url` parts' URLs in message order (each a ChatPart "image" of its message;
  // loaded into gen.images by route()).
  std::vector<std::string> image_urls;
  // Completions: every prompt (OpenAI's batch form, `prompt: [p0, p1, ...]`, gives several; gen
  // carries the first). Choice c of the response runs prompts[c / n].
  std::vector<PromptInput> prompts;
  int n = 1;                          // choices per prompt; choice i of a prompt runs with seed + i when a seed is given
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage: a last chunk with usage
  // vLLM's stream_options.continuous_usage_stats (with include_usage): each chunk carries its
  // choice's usage so far.
  bool continuous_usage = false;
  bool chat_logprobs = false;         // chat: `logprobs: true` (gen.logprobs = top_logprobs)
  // Completions `echo`: the prompt comes first in the choice's text, and with `logprobs` its
  // tokens come first in the choice's logprobs (gen.prompt_logprobs >= logprobs then). Chat's
  // (vLLM's): the last message's text comes first in the content when it is the assistant's.
  bool echo = false;
  std::vector<std::string> echo_texts;  // per prompt, as echoed: the text sent, or the token ids'
                                        // text (filled by the router, which has the tokenizer);
                                        // chat: the one assistant message's text, or none
  // vLLM's return_token_ids: each choice carries prompt_token_ids (chat: the response) and
  // token_ids (its output's), streamed as deltas.
  bool return_token_ids = false;
  // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N" (unset: the server's
  // --return-tokens-as-token-ids, resolved by route()).
  std::optional<bool> return_tokens_as_token_ids;
  int prompt_logprobs = -1;           // vLLM's `prompt_logprobs` field (>= 0: a `prompt_logprobs`
                                      // list in the response)
  ToolRequest tools;                  // chat: tools, tool_choice, parallel_tool_calls
  ToolFormat tool_format = ToolFormat::hermes;  // chat with tools: how this model writes calls (set by route())
  // Chat: vLLM's `include_reasoning` (false: the reasoning is dropped from the answer) and
  // SGLang's `separate_reasoning` (false: the output stays whole, as without a parser).
  bool include_reasoning = true;
  bool separate_reasoning = true;
  std::string chat_template_kwargs;  // chat: vLLM's extra template variables, a JSON object's text (or empty)
  std::string documents;             // chat: vLLM's documents (RAG templates), a JSON array's text (or empty)
  std::string chat_template;         // chat: vLLM's per-request Jinja template (empty: the model's);
                                     // served only with --trust-request-chat-template
  // chat: vLLM's add_generation_prompt / continue_final_message (how the rendered prompt ends).
  Engine::ChatEnding chat_ending = Engine::ChatEnding::generation_prompt;
  std::string reasoning_effort;      // chat: OpenAI's low, medium or high (empty: not given); a template variable
  ReasoningKind reasoning = ReasoningKind::none;  // chat: how <think> blocks are split (set by route())
  // The Responses API (POST /v1/responses) runs as this chat request; its output is rendered by
  // ResponsesState, which repeats these request fields (responses_echo's JSON text).
  bool responses = false;
  std::string responses_echo;

  // vLLM's use_beam_search: each prompt runs one beam search of width n whose beams are its n
  // choices, best first (Engine::submit_beam_search); length_penalty and early_stopping are its.
  // vLLM's request_id (or the X-Request-Id header, which route() prefers): the response's id is
  // "cmpl-" / "chatcmpl-" + it; empty: the server numbers responses.
  std::string request_id;
  bool use_beam_search = false;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::heuristic;

  // The response's choices: n per prompt.
  int n_prompts() const { return std::max<int>(1, static_cast<int>(prompts.size())); }
  int n_choices() const { return n * n_prompts(); }
  // The engine request of choice c: its prompt (completions), and seed + c % n.
  GenerateOptions choice_request(int c) const;
  // use_beam_search: prompt p's beam search (its choices are p * n ... p * n + n - 1).
  BeamSearchOptions beam_request(int p) const;
  // The echoed prompt of choice c (empty without echo).
  const std::string& echo_of(int c) const;
};

// Optional fields of a request body (absent or null keeps `out`); invalid_argument naming the
// field when it has the wrong type or lies outside [lo, hi] (integers: floats are refused and the
// range is checked before narrowing; floats: `lo_open` makes the lower bound exclusive, NaN never
// passes).
Status read_int(const nlohmann::json& body, const char* field, int64_t lo, int64_t hi, int64_t& out);
Status read_int(const nlohmann::json& body, const char* field, int64_t lo, int64_t hi, int& out);
Status read_float(const nlohmann::json& body, const char* field, double lo, double hi, bool lo_open, float& out);
Status read_bool(const nlohmann::json& body, const char* field, bool& out);

// A client's request id (the body's request_id, the X-Request-Id header): at most 256 printable
// ASCII bytes, else invalid_argument.
Status check_request_id(std::string_view id);

// vLLM's truncate_prompt_tokens: keep the prompt's last k tokens; -1 is the model's context,
// which the router resolves (0 and below -1 are refused).
Status read_truncate_prompt_tokens(const nlohmann::json& body, int& out);
// vLLM's priority (lower is served first), negated into brigade's higher-first value.
Status read_priority(const nlohmann::json& body, int& out);

// A prompt field's one prompt or batch (OpenAI's completions `prompt`, embeddings `input`): a
// string, an array of token ids, or an array of either (not mixed), at most max_prompts of them;
// none empty. invalid_argument naming `field` (and the element) otherwise.
Status read_prompt_batch(const nlohmann::json& p, const std::string& field, int max_prompts,
                         std::vector<PromptInput>& out);

// Limits a request is checked against.
struct ParseLimits {
  int max_n = 16;
  int max_prompts = 256;  // completions prompts in one request
  int max_choices = 256;  // prompts x n
  int max_stop = 16;  // stop strings
  int max_logprobs = 20;
  int max_logit_bias = 1024;  // logit_bias entries (each travels with every step of the request)
  int default_max_tokens_completions = 16;  // OpenAI's default
  // Chat without max_tokens generates to the end of the context, as OpenAI's and vLLM's (the
  // engine caps it to the context once the prompt is tokenized).
  int default_max_tokens_chat = std::numeric_limits<int32_t>::max();
  // The model's generation_config.json (ServerOptions::generation_defaults): sampling settings for
  // the fields a request leaves out, and max_new_tokens capping max_tokens (vLLM's
  // default_sampling_params). Empty: brigade's own defaults.
  GenerationDefaults defaults;
};

// Validates one request body. invalid_argument for wrong types, missing prompt/messages and
// out-of-range values; unsupported for fields brigade does not implement (best_of > 1, echo
// on chat). `max_tokens` 0 is accepted with `echo` or
// `prompt_logprobs` (the prompt is scored, nothing generated).
Expected<CompletionRequest> parse_completion_request(const nlohmann::json& body, Endpoint endpoint,
                                                     const ParseLimits& limits = {});
// The same from raw bytes: malformed JSON is invalid_argument too.
Expected<CompletionRequest> parse_completion_body(std::string_view body, Endpoint endpoint,
                                                  const ParseLimits& limits = {});

// vLLM's POST /tokenize {"prompt": text, "add_special_tokens": bool = true} and POST /detokenize
// {"tokens": [ids]}: invalid_argument for malformed JSON, wrong types and ids outside [0, 2^31).
// vLLM's POST /tokenize: a prompt, or (its chat form) `messages` rendered by the chat template
// as a chat completion's would be (with tools, documents, chat_template_kwargs,
// add_generation_prompt, continue_final_message), then tokenized.
struct TokenizeRequest {
  std::string prompt;
  std::optional<CompletionRequest> chat;  // the chat form, parsed as a chat completion
  bool add_special_tokens = true;         // the chat form's default: false (the template has them)
  bool return_token_strs = false;         // token_strs: each id's vocabulary string
};
Expected<TokenizeRequest> parse_tokenize_body(std::string_view body);

// vLLM's chat form of the pooling routes (/v1/embeddings and /classify with `messages` instead of
// `input`): the body read as a chat completion's (messages, tools, documents, chat_template,
// chat_template_kwargs, continue_final_message), with add_generation_prompt false unless the body
// says otherwise (vLLM's EmbeddingChatRequest and ClassificationChatRequest defaults).
// invalid_argument for `input` beside `messages` and what a chat completion refuses; unsupported
// for image parts.
Expected<CompletionRequest> parse_pooling_chat(const nlohmann::json& body);
// What the pooling routes' bodies share: `model`, then `input` (a string, token ids, or a batch
// of either, at most max_inputs, none empty) into `inputs`, or `messages` into `chat`
// (parse_pooling_chat); `add_special_tokens` (default true with `input`, false with `messages`).
Status read_pooling_input(const nlohmann::json& body, int max_inputs, std::string& model, std::vector<PromptInput>& inputs,
                          std::optional<CompletionRequest>& chat, bool& add_special_tokens);
Expected<std::vector<int32_t>> parse_detokenize_body(std::string_view body);

}  // namespace brigade::server
