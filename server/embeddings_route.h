// Runs one POST /v1/embeddings request on the engine (docs/architecture.md "Embeddings").
#pragma once

#include <functional>
#include <memory>

#include "server/embeddings_format.h"
#include "server/routes.h"

namespace brigade::server {

// Submits every input as its own engine request (they share steps with everything else running)
// and calls `done` once, on an engine thread: 200 with the embeddings in input order, or the
// first error's status (400 for an input too long for the context, 429 when the engine is full,
// 503 while shutting down); after an error the other inputs are cancelled. Every engine request
// holds a slot in ctx->inflight until its last event.
void run_embeddings(const std::shared_ptr<ServerContext>& ctx, EmbeddingsRequest request,
                    std::function<void(SimpleResponse)> done);

}  // namespace brigade::server
