#include "server/score_route.h"

#include <ctime>

#include "server/embeddings_route.h"

namespace brigade::server {

void run_score(const std::shared_ptr<ServerContext>& ctx, ScoreRequest request, std::function<void(SimpleResponse)> done) {
  std::string id = request.api == ScoreApi::rerank ? "rerank-" : "score-";
  id += std::to_string(ctx->next_id.fetch_add(1));
  const auto created = static_cast<int64_t>(std::time(nullptr));
  std::string model = request.model.empty() ? ctx->options.model_name : request.model;
  std::vector<EmbedOptions> inputs = request.embed_options();
  embed_batch(ctx, std::move(inputs), [request = std::move(request), id, created, model = std::move(model),
                                       done = std::move(done)](Expected<std::vector<Embedding>> e) {
    if (!e) return done(embed_error_response(e.status()));
    const std::vector<PairScore> scores = pair_scores(request.first.size(), *e);
    done(SimpleResponse{200, "application/json",
                        request.api == ScoreApi::rerank ? rerank_body(scores, request.second, request.top_n, id, model)
                                                        : score_body(scores, id, created, model)});
  });
}

}  // namespace brigade::server
