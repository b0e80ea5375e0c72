// vLLM's POST /classify bodies: the request -> engine classify requests, and the engine's
// outputs -> vLLM's ClassificationResponse. Plain functions over JSON text, tested without
// sockets; every malformed field is an invalid_argument naming it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/engine.h"
#include "server/embeddings_format.h"

namespace brigade::server {

struct ClassifyRequest {
  std::string model;                // as sent; empty: the served name answers
  std::vector<PromptInput> inputs;  // `input`: a string, token ids, or a batch of either
  bool add_special_tokens = true;   // the tokenizer's special tokens around a text input (vLLM's default)
  bool use_activation = true;       // false: the raw logits (vLLM's use_activation; older `activation`, `softmax`)
  int truncate_prompt_tokens = 0;   // > 0: classify each input's last k tokens; -1 until route() resolves it
  int priority = 0;                 // brigade's higher-first (vLLM's lower-first `priority`, negated)
  // The chat form (`messages` instead of `input`; parse_pooling_chat): route() renders it with the
  // chat template into the one text input; add_special_tokens is false by default then.
  std::optional<CompletionRequest> chat;
  // Each input's engine request (task classify; `user` is accepted and ignored).
  EmbedOptions classify_options(size_t i) const;
};

// Validates a /classify body: `input` (at most max_inputs, none empty), `model`,
// `add_special_tokens`, `use_activation` (and its older names), `truncate_prompt_tokens`,
// `priority`, `user`; or vLLM's chat form, `messages` (parse_pooling_chat).
Expected<ClassifyRequest> parse_classify_body(std::string_view body, int max_inputs = kMaxEmbeddingInputs);

// vLLM's ClassificationResponse: {"id", "object": "list", "created", "model", "data": [{"index",
// "label", "probs", "num_classes"}], "usage": {"prompt_tokens", "total_tokens",
// "completion_tokens": 0, "prompt_tokens_details": null}}; `label` names the largest output.
std::string classify_body(std::span<const Embedding> outputs, const std::vector<std::string>& labels,
                          const std::string& id, int64_t created, const std::string& model);

}  // namespace brigade::server
