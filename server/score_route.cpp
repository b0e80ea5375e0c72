#include "server/score_route.h"

#include <ctime>

#include "server/embeddings_route.h"

namespace brigade::server {

void run_score(const std::shared_ptr<ServerContext>& ctx, ScoreRequest request, std::function<void(SimpleResponse)> done) {
  std::string id = request.api == ScoreApi::rerank ? "rerank-" : "score-";
  id += std::to_string(ctx->next_id.fetch_add(1));
  const auto created = static_cast<int64_t>(std::time(nullptr));
  std::string model = request.model.empty() ? ctx->options.model_name : request.model;
  // A model with a classifier scores each pair as a cross-encoder; others by the cosine of the
  // two embeddings.
  const auto& head = ctx->engine.model().classifier;
  std::vector<EmbedOptions> inputs;
  if (head) {
    auto pairs = request.cross_encoder_options(ctx->engine, *head);
    if (!pairs) return done(embed_error_response(pairs.status()));
    inputs = std::move(*pairs);
  } else {
    inputs = request.embed_options();
  }
  const bool cross = head != nullptr;
  embed_batch(ctx, std::move(inputs), [request = std::move(request), id, created, model = std::move(model), cross,
                                       done = std::move(done)](Expected<std::vector<Embedding>> e) {
    if (!e) return done(embed_error_response(e.status()));
    const std::vector<PairScore> scores = cross ? cross_encoder_scores(*e) : pair_scores(request.first.size(), *e);
    done(SimpleResponse{200, "application/json",
                        request.api == ScoreApi::rerank ? rerank_body(scores, request.second, request.top_n, id, model)
                                                        : score_body(scores, id, created, model)});
  });
}

void run_classify(const std::shared_ptr<ServerContext>& ctx, ClassifyRequest request,
                  std::function<void(SimpleResponse)> done) {
  const std::string id = "classify-" + std::to_string(ctx->next_id.fetch_add(1));
  const auto created = static_cast<int64_t>(std::time(nullptr));
  std::string model = request.model.empty() ? ctx->options.model_name : request.model;
  const auto& head = ctx->engine.model().classifier;
  std::vector<std::string> labels = head ? head->labels : std::vector<std::string>();
  std::vector<EmbedOptions> inputs;
  for (size_t i = 0; i < request.inputs.size(); ++i) inputs.push_back(request.classify_options(i));
  embed_batch(ctx, std::move(inputs), [labels = std::move(labels), id, created, model = std::move(model),
                                       done = std::move(done)](Expected<std::vector<Embedding>> e) {
    if (!e) return done(embed_error_response(e.status()));
    done(SimpleResponse{200, "application/json", classify_body(*e, labels, id, created, model)});
  });
}

}  // namespace brigade::server
