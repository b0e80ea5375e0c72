// Internal to the engine: embedding requests (Engine::submit_embed, include/brigade/engine.h) as
// generation requests that sample nothing (max_tokens 0, a pooling mode), and the pooled vector
// of their final event turned into the caller's Embedding.
#pragma once

#include <string>

#include "brigade/engine.h"

namespace brigade {

// The embedding request checks the engine can make before it is queued: a prompt (text needs a
// tokenizer), ids inside the vocabulary, dimensions in [0, hidden_size], a pooling the model
// can run (ModelSummary::pooling_error).
Status validate_embed(const EmbedOptions& request, const ModelSummary& model);
// The generation request an embedding request travels as (max_tokens 0, greedy, no stops).
GenerateOptions embed_as_generate(const EmbedOptions& request);
// The event callback that hands on_done the finished embedding (finish_embedding with the
// request's dimensions and normalization, the model's by default) or the request's error.
EventCallback embed_events(const EmbedOptions& request, const ModelSummary& model, EmbedCallback on_done);
// The engine's pooling (options, else the model dir's sentence-transformers files, else last +
// normalize) into model.pooling / normalize_embeddings / pooling_error; logs what it chose.
void resolve_pooling(const EngineOptions& options, const std::string& model_path, ModelSummary& model);

}  // namespace brigade
