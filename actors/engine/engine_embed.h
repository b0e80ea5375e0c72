// Internal to the engine: embedding requests (Engine::submit_embed, include/brigade/engine.h) as
// generation requests that sample nothing (max_tokens 0, a pooling mode), and the pooled vector
// of their final event turned into the caller's Embedding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "actors/engine/instance.h"
#include "brigade/engine.h"

namespace brigade {

// The embedding request checks the engine can make before it is queued: a prompt (text needs a
// tokenizer), ids inside the vocabulary, token types one per id and inside the model's,
// dimensions in [0, hidden_size], a pooling the model can run (ModelSummary::pooling_error).
Status validate_embed(const EmbedOptions& request, const ModelSummary& model);
// The generation request an embedding request travels as (max_tokens 0, greedy, no stops), its
// token types packed into its ids (models/bert.h with_token_type).
GenerateOptions embed_as_generate(const EmbedOptions& request);
// The event callback that hands on_done the finished embedding (finish_embedding with the
// request's dimensions and normalization, the model's by default) or the request's error.
EventCallback embed_events(const EmbedOptions& request, const ModelSummary& model, EmbedCallback on_done);
// The engine's pooling (options, else the model dir's sentence-transformers files, else last +
// normalize) into model.pooling / normalize_embeddings / pooling_error; logs what it chose.
// An encoder's pooling defaults to cls (vLLM's for BERT-family models) where its files name none.
void resolve_pooling(const EngineOptions& options, const std::string& model_path, ModelSummary& model);
// ModelSummary::encoder and token_types from the first local instance's model, or (instances in
// other processes only) from model_path's config.json; an encoder never generates.
Status summarize_encoder(const std::string& model_path, const std::vector<std::optional<LoadedInstance>>& loaded,
                         ModelSummary& model);

}  // namespace brigade
