// OpenAI's POST /v1/embeddings bodies (vLLM's, SGLang's): the request → engine embedding
// requests, and the engine's embeddings → the response. Plain functions over JSON text, tested
// without sockets; every malformed field is an invalid_argument naming it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "server/openai_parse.h"

namespace brigade::server {

enum class EncodingFormat { floats, base64 };

struct EmbeddingsRequest {
  std::string model;                // as sent; not checked against the served name
  std::vector<PromptInput> inputs;  // `input`: a string, token ids, or a batch of either
  EncodingFormat encoding = EncodingFormat::floats;
  int dimensions = 0;               // 0: the whole embedding
  int truncate_prompt_tokens = 0;   // vLLM's: > 0 keeps each input's last k tokens; -1 (the context) until route() resolves it
  int priority = 0;                 // brigade's higher-first (vLLM's lower-first `priority`, negated)
  // The chat form (`messages` instead of `input`; parse_pooling_chat): route() renders it with the
  // chat template into the one text input.
  std::optional<CompletionRequest> chat;
  bool add_special_tokens = true;   // the tokenizer's special tokens around a text input; chat form: false
  // Each input's engine request (`user` is accepted and ignored, as vLLM does).
  EmbedOptions embed_options(size_t i) const;
};

// The most inputs one request may carry (OpenAI's limit).
constexpr int kMaxEmbeddingInputs = 2048;

// Validates a body: `input` required (no empty string or array), at most max_inputs inputs, or
// vLLM's chat form, `messages` (parse_pooling_chat); `encoding_format` float | base64;
// `dimensions` an integer >= 1 (its upper bound, the model's embedding size, is the engine's
// check); vLLM's `truncate_prompt_tokens`, `priority` and `add_special_tokens` (default true, the
// chat form false).
Expected<EmbeddingsRequest> parse_embeddings_body(std::string_view body, int max_inputs = kMaxEmbeddingInputs);

// The response: {"object": "list", "data": [{"object": "embedding", "index": i, "embedding":
// [floats] or base64 text}], "model", "usage": {"prompt_tokens", "total_tokens"}}.
std::string embeddings_body(std::span<const Embedding> embeddings, EncodingFormat encoding, const std::string& model);

// OpenAI's base64 encoding of an embedding: the f32 values' little-endian bytes, base64 with
// padding (numpy.frombuffer(base64.b64decode(s), dtype="<f4") reads it back).
std::string base64_f32(std::span<const float> values);

}  // namespace brigade::server
