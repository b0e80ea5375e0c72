// Runs one POST /score or /rerank request on the engine (server/score_format.h).
#pragma once

#include <functional>
#include <memory>

#include "server/routes.h"
#include "server/score_format.h"

namespace brigade::server {

// Embeds every input of the request (embed_batch: each its own engine request, a shared query
// once) and calls `done` once, on an engine thread: 200 with the pairs' cosine scores (rerank:
// sorted, the first top_n), or the first error's response (400 for a model that serves no
// embeddings or an input too long for the context, 429 when the engine is full, 503 while
// shutting down).
void run_score(const std::shared_ptr<ServerContext>& ctx, ScoreRequest request, std::function<void(SimpleResponse)> done);

}  // namespace brigade::server
