#include "actors/frontend/frontend_actor.h"

#include "messages/convert.h"

namespace brigade {

void CallbackRegistry::add(uint64_t id, EventCallback cb) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_[id] = std::make_shared<EventCallback>(std::move(cb));
}

void CallbackRegistry::deliver(const Event& ev) {
  std::shared_ptr<EventCallback> cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = callbacks_.find(ev.request_id);
    if (it == callbacks_.end()) return;
    cb = it->second;
    if (ev.finish != FinishReason::none) callbacks_.erase(it);
  }
  if (*cb) (*cb)(ev);  // outside the lock: the callback may submit or cancel
}

size_t CallbackRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return callbacks_.size();
}

Event to_event(schema::TokenEvent::Reader r) {
  Event ev;
  ev.request_id = r.getRequestId();
  ev.token_ids = to_vector(r.getTokenIds());
  ev.text = r.getText();
  for (auto lp : r.getLogprobs()) {
    ev.logprobs.push_back(lp.getLogprob());
    std::vector<std::pair<int32_t, float>> top;
    for (auto t : lp.getTop()) top.emplace_back(t.getTokenId(), t.getLogprob());
    if (!top.empty()) ev.top_logprobs.push_back(std::move(top));
  }
  for (auto p : r.getPromptLogprobs()) {
    PromptLogprob lp;
    lp.token = p.getTokenId();
    lp.text = p.getText();
    lp.rank = p.getRank();
    if (lp.rank > 0) lp.logprob = p.getLogprob();
    for (auto t : p.getTop()) lp.top.push_back({t.getTokenId(), t.getLogprob(), t.getText()});
    ev.prompt_logprobs.push_back(std::move(lp));
  }
  switch (r.getFinishReason()) {
    case schema::FinishReason::NONE: ev.finish = FinishReason::none; break;
    case schema::FinishReason::STOP: ev.finish = FinishReason::stop; break;
    case schema::FinishReason::LENGTH: ev.finish = FinishReason::length; break;
    case schema::FinishReason::ABORT: ev.finish = FinishReason::abort; break;
    case schema::FinishReason::ERROR: ev.finish = FinishReason::error; break;
  }
  ev.error = r.getError();
  ev.error_code = static_cast<StatusCode>(r.getErrorCode());
  ev.retry_after_ms = static_cast<int64_t>(r.getRetryAfterMs());
  ev.prompt_tokens = r.getPromptTokens();
  ev.cached_tokens = r.getCachedTokens();
  ev.prompt_token_ids = to_vector(r.getPromptTokenIds());
  ev.completion_tokens = r.getCompletionTokens();
  if (r.hasEmbedding()) ev.embedding = to_vector(r.getEmbedding());
  return ev;
}

namespace {

token_sink_actor::behavior_type frontend_fun(token_sink_actor::pointer, std::shared_ptr<CallbackRegistry> registry) {
  return {
      [registry](const token_event_msg& msg) { registry->deliver(to_event(msg.reader())); },
  };
}

}  // namespace

token_sink_actor spawn_frontend(caf::actor_system& system, std::shared_ptr<CallbackRegistry> registry) {
  return system.spawn(frontend_fun, std::move(registry));
}

}  // namespace brigade
