// Runs one POST /score, /rerank or /classify request on the engine (server/score_format.h,
// server/classify_format.h).
#pragma once

#include <functional>
#include <memory>

#include "server/classify_format.h"
#include "server/routes.h"
#include "server/score_format.h"

namespace brigade::server {

// Embeds every input of the request (embed_batch: each its own engine request, a shared query
// once) and calls `done` once, on an engine thread: 200 with the pairs' cosine scores (rerank:
// sorted, the first top_n), or the first error's response (400 for a model that serves no
// embeddings or an input too long for the context, 429 when the engine is full, 503 while
// shutting down).
// With a model that has a classifier (ModelSummary::classifier) each pair is one cross-encoder
// request instead (ScoreRequest::cross_encoder_options), scored by its classifier's output; 400
// when the classifier has more than one label.
void run_score(const std::shared_ptr<ServerContext>& ctx, ScoreRequest request, std::function<void(SimpleResponse)> done);

// Classifies every input (each its own engine request, task classify) and calls `done` once: 200
// with vLLM's ClassificationResponse, or the first error's response (400 for a model without a
// classifier or an input too long for the context, 429 when the engine is full).
void run_classify(const std::shared_ptr<ServerContext>& ctx, ClassifyRequest request,
                  std::function<void(SimpleResponse)> done);

}  // namespace brigade::server
