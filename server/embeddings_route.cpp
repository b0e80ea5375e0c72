#include "server/embeddings_route.h"

#include <mutex>
#include <optional>

#include "server/openai_format.h"

namespace brigade::server {

namespace {

// What the inputs' callbacks share. `done` runs once: when every input has its embedding, or at
// the first error.
struct Batch {
  std::mutex mu;
  std::vector<EmbedOptions> inputs;
  std::vector<Embedding> results;
  std::vector<uint64_t> ids;  // engine ids, 0 until known or once finished
  size_t n_left = 0;
  bool answered = false;
  EmbedBatchCallback done;
};

// The inputs still running once the batch failed.
std::vector<uint64_t> fail(Batch& b, const Status& st, std::optional<Expected<std::vector<Embedding>>>& answer) {
  if (b.answered) return {};
  b.answered = true;
  answer = st;
  std::vector<uint64_t> running;
  for (uint64_t id : b.ids)
    if (id != 0) running.push_back(id);
  return running;
}

void on_result(const std::shared_ptr<ServerContext>& ctx, const std::shared_ptr<Batch>& b, size_t i,
               Expected<Embedding> e) {
  std::optional<Expected<std::vector<Embedding>>> answer;
  std::vector<uint64_t> cancel;
  {
    std::lock_guard<std::mutex> lock(b->mu);
    b->ids[i] = 0;
    if (!e) {
      cancel = fail(*b, e.status(), answer);
    } else if (!b->answered) {
      b->results[i] = std::move(*e);
      if (--b->n_left == 0) {
        b->answered = true;
        answer = std::move(b->results);
      }
    }
  }
  for (uint64_t id : cancel) ctx->engine.cancel(id);
  if (answer) b->done(std::move(*answer));
}

}  // namespace

void embed_batch(const std::shared_ptr<ServerContext>& ctx, std::vector<EmbedOptions> inputs, EmbedBatchCallback done) {
  BRIGADE_CHECK(!inputs.empty(), "embed_batch needs at least one input (the parsers refuse empty batches)");
  auto b = std::make_shared<Batch>();
  const size_t n = inputs.size();
  b->inputs = std::move(inputs);
  b->results.resize(n);
  b->ids.assign(n, 0);
  b->n_left = n;
  b->done = std::move(done);
  for (size_t i = 0; i < n; ++i) {
    {
      std::lock_guard<std::mutex> lock(b->mu);
      if (b->answered) break;  // an earlier input failed: the rest are not sent
    }
    uint64_t key = 0;
    if (!ctx->inflight.begin(key)) {
      on_result(ctx, b, i, Status(StatusCode::cancelled, "the server is shutting down"));
      break;
    }
    auto submitted = ctx->engine.submit_embed(b->inputs[i], [ctx, b, i, key](Expected<Embedding> e) mutable {
      on_result(ctx, b, i, std::move(e));
      b.reset();  // the batch (and the session its `done` holds) before Inflight lets stop() go on
      ctx->inflight.end(key);
    });
    if (!submitted) {
      ctx->inflight.end(key);
      on_result(ctx, b, i, submitted.status());
      break;
    }
    ctx->inflight.set_id(key, *submitted);
    std::lock_guard<std::mutex> lock(b->mu);
    if (!b->answered && b->results[i].values.empty()) b->ids[i] = *submitted;
  }
}

SimpleResponse embed_error_response(const Status& st) {
  return error_response(http_status_for(st.code()), st.message(), st.code());
}

void run_embeddings(const std::shared_ptr<ServerContext>& ctx, EmbeddingsRequest request,
                    std::function<void(SimpleResponse)> done) {
  std::vector<EmbedOptions> inputs;
  for (size_t i = 0; i < request.inputs.size(); ++i) inputs.push_back(request.embed_options(i));
  embed_batch(ctx, std::move(inputs), [encoding = request.encoding, model = std::move(request.model),
                                       done = std::move(done)](Expected<std::vector<Embedding>> e) {
    if (!e) return done(embed_error_response(e.status()));
    done(SimpleResponse{200, "application/json", embeddings_body(*e, encoding, model)});
  });
}

}  // namespace brigade::server
