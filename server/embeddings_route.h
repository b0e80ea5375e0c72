// Runs pooling requests on the engine: a batch of inputs embedded together (shared by
// POST /v1/embeddings, /score and /rerank), and the /v1/embeddings route on top of it
// (docs/architecture.md "Embeddings").
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "server/embeddings_format.h"
#include "server/routes.h"

namespace brigade::server {

// Called once, on an engine thread (or the caller's, for an error before anything was sent):
// every input's embedding in input order, or the first error.
using EmbedBatchCallback = std::function<void(Expected<std::vector<Embedding>>)>;

// Submits every input as its own engine request (they share steps with everything else running)
// and calls `done` once: the embeddings, or the first error (invalid_argument for an input too
// long for the context, out_of_resources when the engine is full, cancelled while shutting down);
// after an error the other inputs are cancelled and the rest are not sent. Every engine request
// holds a slot in ctx->inflight until its last event. `inputs` must not be empty.
void embed_batch(const std::shared_ptr<ServerContext>& ctx, std::vector<EmbedOptions> inputs, EmbedBatchCallback done);

// The response to an error of embed_batch: its status (400, 429, 503, ...) and OpenAI's body.
SimpleResponse embed_error_response(const Status& st);

// POST /v1/embeddings: embed_batch over the request's inputs, then `done` once with 200 and the
// embeddings in input order, or the first error's response.
void run_embeddings(const std::shared_ptr<ServerContext>& ctx, EmbeddingsRequest request,
                    std::function<void(SimpleResponse)> done);

}  // namespace brigade::server
