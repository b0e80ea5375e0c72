#include "actors/router/router_actor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "actors/step_codec.h"
#include "messages/blob.h"
#include "messages/convert.h"
#include "messages/error.h"

namespace brigade {

namespace {

struct RouterState {
  RouterSetup setup;
  std::unique_ptr<RouterPolicy> policy;
  std::vector<scheduler_actor> instances;
  token_sink_actor sink;
  std::set<uint64_t> aborting;  // PD: aborts sent to a prefill instance, whose hand-off may cross them
  static inline const char* name = "brigade.router";
};

using router_ptr = router_actor::stateful_pointer<RouterState>;

void on_request(router_ptr self, const generate_request_msg& msg) {
  auto& st = self->state;
  auto r = msg.reader();
  // A text prompt never gets here from the tokenizer; routed with no tokens, its scheduler
  // refuses it with the reason.
  const auto prompt = r.getPrompt().isTokenIds() ? to_vector(r.getPrompt().getTokenIds()) : std::vector<int32_t>{};
  auto d = st.policy->route(r.getRequestId(), prompt, r.getLora(), to_string_view(r.getCacheSalt()), r.getAdmitGroup(),
                            static_cast<int>(std::min<uint32_t>(r.getAdmitGroupSize(), 1u << 20)));
  if (!d) {
    self->send(st.sink, error_event(r.getRequestId(), d.status()));
    return;
  }
  if (st.setup.counters) st.setup.counters->routed[static_cast<size_t>(d->instance)][static_cast<size_t>(d->reason)]++;
  self->send(st.instances[static_cast<size_t>(d->instance)], msg);
}

void on_event(router_ptr self, const token_event_msg& msg) {
  auto r = msg.reader();
  if (r.getFinishReason() != schema::FinishReason::NONE) {
    self->state.policy->finished(r.getRequestId());
    self->state.aborting.erase(r.getRequestId());
  } else if (r.getTokenIds().size() > 0) {
    self->state.policy->prefilled(r.getRequestId());
  }
  self->send(self->state.sink, msg);
}

void on_abort(router_ptr self, const abort_msg& msg) {
  auto& st = self->state;
  const uint64_t id = msg.reader().getRequestId();
  // The owner, if the request is still in flight; CAF keeps this after the request itself.
  auto owner = st.policy->owner(id);
  if (!owner) return;
  if (st.policy->role(*owner) == PdRole::prefill) st.aborting.insert(id);
  self->send(st.instances[static_cast<size_t>(*owner)], msg);
}

// PD: a prefilled sequence goes on to a decode instance, unless it was aborted or its request
// already ended (its prefill instance died and the request was failed). A dropped hand-off's
// bytes go with it (a shared-memory segment is unlinked here).
void on_handoff(router_ptr self, const kv_handoff_msg& msg) {
  auto& st = self->state;
  auto r = msg.reader();
  const uint64_t id = r.getRequestId();
  if (!st.policy->owner(id)) return discard_blob(r.getKv());
  if (st.aborting.erase(id)) {
    discard_blob(r.getKv());
    st.policy->finished(id);
    SeqEvent ev;
    ev.seq_id = id;
    ev.finish = Finish::abort;
    ev.prompt_tokens = static_cast<int>(r.getPrompt().size());
    ev.completion_tokens = static_cast<int>(r.getGenerated().size());
    self->send(st.sink, encode_event(ev));
    return;
  }
  auto decode = st.policy->choose_decode();
  if (!decode) {
    discard_blob(r.getKv());
    st.policy->finished(id);
    self->send(st.sink, error_event(id, decode.status()));
    return;
  }
  st.policy->handed_off(id, *decode);
  if (st.setup.counters)
    st.setup.counters->routed[static_cast<size_t>(*decode)][static_cast<size_t>(RouteReason::load)]++;
  self->send(st.instances[static_cast<size_t>(*decode)], msg);
}

// The PrefixQuery's answer from the instance this prompt would be routed to.
caf::typed_response_promise<prefix_query_result_msg> on_prefix_query(router_ptr self, const prefix_query_msg& msg) {
  auto rp = self->make_response_promise<prefix_query_result_msg>();
  auto d = self->state.policy->choose(to_vector(msg.reader().getTokens()));
  if (!d) {
    rp.deliver(to_caf_error(d.status()));
    return rp;
  }
  self->request(self->state.instances[static_cast<size_t>(d->instance)], caf::infinite, msg)
      .then([rp](const prefix_query_result_msg& res) mutable { rp.deliver(res); },
            [rp](const caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

void on_down(router_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (size_t i = 0; i < st.instances.size(); ++i) {
    if (st.instances[i].address() != dm.source) continue;
    const std::string& name = st.setup.instance_names[i];
    const auto lost = st.policy->instance_down(static_cast<int>(i));
    for (uint64_t id : lost) st.aborting.erase(id);
    if (st.setup.counters) st.setup.counters->down[i] = true;
    // The engine going away stops its local instances with user_shutdown (and the router first);
    // a remote node that shuts down is an instance lost like any other.
    if (dm.reason == caf::exit_reason::user_shutdown && dm.source.node() == self->node()) return;
    spdlog::error("router: instance '{}' stopped ({}); {} requests in flight there fail, the others keep serving",
                  name, caf::to_string(dm.reason), lost.size());
    const Status why = internal_error("instance '" + name + "' stopped (" + caf::to_string(dm.reason) +
                                      ") before the request finished; retry it");
    for (uint64_t id : lost) self->send(st.sink, error_event(id, why));
    return;
  }
}

router_actor::behavior_type router_fun(router_ptr self, RouterSetup setup, token_sink_actor sink) {
  auto& st = self->state;
  const int n = static_cast<int>(setup.instance_names.size());
  st.policy = std::make_unique<RouterPolicy>(setup.config, n, setup.roles);
  st.setup = std::move(setup);
  st.instances.resize(static_cast<size_t>(n));
  st.sink = std::move(sink);
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  return {
      [self](const generate_request_msg& msg) { on_request(self, msg); },
      [self](const token_event_msg& msg) { on_event(self, msg); },
      [self](const abort_msg& msg) { on_abort(self, msg); },
      [self](const kv_handoff_msg& msg) { on_handoff(self, msg); },
      [self](const prefix_query_msg& msg) { return on_prefix_query(self, msg); },
      [self](const cache_reset_msg&) {  // the engine resets the instances' caches: affinity starts over
        self->state.policy->forget_prefixes();
        return cache_reset_done_msg::build([](auto) {});
      },
      [self](wire_atom, int32_t index, scheduler_actor scheduler) {
        auto& s = self->state;
        BRIGADE_CHECK(index >= 0 && static_cast<size_t>(index) < s.instances.size(), "router wired to an unknown instance");
        const auto i = static_cast<size_t>(index);
        // Wired again (the engine reconnected a remote instance's node): it serves again.
        if (s.instances[i] && !s.policy->up(index)) {
          s.policy->instance_up(index);
          if (s.setup.counters) s.setup.counters->down[i] = false;
          spdlog::info("router: instance '{}' serves again", s.setup.instance_names[i]);
        }
        self->monitor(scheduler);
        s.instances[i] = std::move(scheduler);
      },
  };
}

}  // namespace

router_actor spawn_router(caf::actor_system& system, RouterSetup setup, token_sink_actor sink) {
  return system.spawn(router_fun, std::move(setup), std::move(sink));
}

}  // namespace brigade
