#include "actors/station/station_actor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "actors/step_codec.h"
#include "messages/convert.h"

namespace brigade {

namespace {

// A request held by the station: the message as it came and the fields its on_request set.
struct Held {
  generate_request_msg msg;
  int max_tokens = 0;
  int priority = 0;
};

struct StationState;
using station_ptr = station_actor::stateful_pointer<StationState>;

// The StationContext of one station: every call acts on the hosting actor's state.
class Context final : public StationContext {
 public:
  explicit Context(station_ptr self) : self_(self) {}
  void release(uint64_t id) override;
  void reject(uint64_t id, StatusCode code, std::string message, int64_t retry_after_ms) override;
  void cancel(uint64_t id) override;
  void after(std::chrono::milliseconds delay, std::function<void()> fn) override;
  size_t n_held() const override;

 private:
  station_ptr self_;
};

struct StationState {
  std::string station_name;
  std::shared_ptr<Station> station;  // shared: CAF copies a function actor's arguments
  std::unique_ptr<Context> ctx;
  token_sink_actor upstream;
  scheduler_actor downstream;
  std::map<uint64_t, Held> held;          // by id: ids grow with submission order
  std::unordered_set<uint64_t> passed;    // went downstream; their final event has not come back
  std::unordered_map<uint64_t, std::function<void()>> timers;
  uint64_t next_timer = 0;
  std::shared_ptr<StationCounters> counters;
  static inline const char* name = "brigade.station";
};

// The message to send downstream: the original when on_request changed nothing (zero copy).
generate_request_msg with_fields(const generate_request_msg& m, int max_tokens, int priority) {
  if (m->getMaxTokens() == max_tokens && m->getPriority() == priority) return m;
  return m.edited([&](schema::GenerateRequest::Builder b) {
    b.setMaxTokens(max_tokens);
    b.setPriority(priority);
  });
}

void send_downstream(station_ptr self, const Held& h) {
  self->state.passed.insert(h.msg->getRequestId());
  self->send(self->state.downstream, with_fields(h.msg, h.max_tokens, h.priority));
}

token_event_msg abort_event(uint64_t id) {
  return token_event_msg::build([&](schema::TokenEvent::Builder b) {
    b.setRequestId(id);
    b.setFinishReason(schema::FinishReason::ABORT);
  });
}

StationFinish finish_of(schema::FinishReason f) {
  switch (f) {
    case schema::FinishReason::NONE: return StationFinish::none;
    case schema::FinishReason::STOP: return StationFinish::stop;
    case schema::FinishReason::LENGTH: return StationFinish::length;
    case schema::FinishReason::ABORT: return StationFinish::abort;
    case schema::FinishReason::ERROR: return StationFinish::error;
  }
  return StationFinish::error;
}

// Runs a station callback; what it throws is logged (`what` names the callback) and false.
template <class F>
bool guarded(station_ptr self, const char* what, F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("station '{}': {} threw: {}", self->state.station_name, what, e.what());
  } catch (...) {
    spdlog::error("station '{}': {} threw a non-standard exception", self->state.station_name, what);
  }
  return false;
}

// Ends a request that did not go downstream with one error event (ok is taken as invalid_argument).
void reject_request(station_ptr self, uint64_t id, StatusCode code, const std::string& message,
                    int64_t retry_after_ms = 0) {
  self->state.counters->rejected++;
  self->send(self->state.upstream,
             error_event(id, Status(code == StatusCode::ok ? StatusCode::invalid_argument : code, message), retry_after_ms));
}

void on_request(station_ptr self, const generate_request_msg& msg) {
  auto& st = self->state;
  const auto r = msg.reader();
  const uint64_t id = r.getRequestId();
  std::vector<std::pair<std::string, std::string>> labels;
  for (auto l : r.getLabels()) labels.emplace_back(l.getKey().cStr(), l.getValue().cStr());
  const auto ids = r.getPrompt().isTokenIds() ? r.getPrompt().getTokenIds() : capnp::List<int32_t>::Reader();
  const std::vector<int32_t> prompt = to_vector(ids);
  StationRequest req{id, prompt, r.getMaxTokens(), r.getPriority(), &labels};
  st.counters->requests++;
  StationVerdict verdict;
  if (!guarded(self, "on_request", [&] { verdict = st.station->on_request(req, *st.ctx); })) {
    reject_request(self, id, StatusCode::internal, "station '" + st.station_name + "' failed on this request");
    return;
  }
  Held h{msg, std::clamp(req.max_tokens, std::min(1, r.getMaxTokens()), r.getMaxTokens()), req.priority};
  switch (verdict.action) {
    case StationVerdict::Action::pass:
      st.counters->passed++;
      send_downstream(self, h);
      return;
    case StationVerdict::Action::hold:
      st.held.insert_or_assign(id, std::move(h));
      st.counters->held = static_cast<int>(st.held.size());
      return;
    case StationVerdict::Action::reject:
      reject_request(self, id, verdict.code, verdict.message, verdict.retry_after_ms);
      return;
  }
}

void on_event(station_ptr self, const token_event_msg& msg) {
  auto& st = self->state;
  const auto r = msg.reader();
  const StationEvent ev{r.getRequestId(), static_cast<int>(r.getTokenIds().size()), r.getPromptTokens(),
                        r.getCompletionTokens(), finish_of(r.getFinishReason()),
                        std::string_view(r.getError().cStr(), r.getError().size())};
  if (ev.finish != StationFinish::none) st.passed.erase(ev.id);
  guarded(self, "on_event", [&] { st.station->on_event(ev, *st.ctx); });
  self->send(st.upstream, msg);
}

void on_abort(station_ptr self, const abort_msg& msg) {
  auto& st = self->state;
  const uint64_t id = msg->getRequestId();
  const bool was_held = st.held.erase(id) > 0;
  if (was_held) {
    st.counters->cancelled++;
    st.counters->held = static_cast<int>(st.held.size());
  }
  guarded(self, "on_cancel", [&] { st.station->on_cancel(id, was_held, *st.ctx); });
  if (was_held) {
    self->send(st.upstream, abort_event(id));
  } else {
    self->send(st.downstream, msg);
  }
}

void Context::release(uint64_t id) {
  auto& st = self_->state;
  auto it = st.held.find(id);
  if (it == st.held.end()) return;
  Held h = std::move(it->second);
  st.held.erase(it);
  st.counters->released++;
  st.counters->held = static_cast<int>(st.held.size());
  send_downstream(self_, h);
}

void Context::reject(uint64_t id, StatusCode code, std::string message, int64_t retry_after_ms) {
  auto& st = self_->state;
  if (st.held.erase(id) == 0) return;
  st.counters->held = static_cast<int>(st.held.size());
  reject_request(self_, id, code, message, retry_after_ms);
}

void Context::cancel(uint64_t id) {
  auto& st = self_->state;
  if (!st.passed.count(id)) return;
  self_->send(st.downstream, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(id); }));
}

void Context::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto& st = self_->state;
  const uint64_t timer = st.next_timer++;
  st.timers.emplace(timer, std::move(fn));
  self_->delayed_send(self_, std::max(delay, std::chrono::milliseconds(0)), timer_atom::value, timer);
}

size_t Context::n_held() const { return self_->state.held.size(); }

station_actor::behavior_type station_fun(station_ptr self, std::string name, std::shared_ptr<Station> station,
                                         token_sink_actor upstream, std::shared_ptr<StationCounters> counters) {
  auto& st = self->state;
  st.counters = std::move(counters);
  st.station_name = std::move(name);
  st.station = std::move(station);
  st.ctx = std::make_unique<Context>(self);
  st.upstream = std::move(upstream);
  return {
      [self](const generate_request_msg& msg) { on_request(self, msg); },
      [self](const token_event_msg& msg) { on_event(self, msg); },
      [self](const abort_msg& msg) { on_abort(self, msg); },
      [self](const prefix_query_msg& msg) { return self->delegate(self->state.downstream, msg); },
      [self](const kv_handoff_msg& msg) { self->send(self->state.downstream, msg); },
      [self](wire_atom, scheduler_actor downstream) { self->state.downstream = std::move(downstream); },
      [self](timer_atom, uint64_t timer) {
        auto node = self->state.timers.extract(timer);
        if (!node.empty()) guarded(self, "a timer", [&] { node.mapped()(); });
      },
  };
}

}  // namespace

station_actor spawn_station(caf::actor_system& system, const StationConfig& config, std::unique_ptr<Station> station,
                            token_sink_actor upstream, std::shared_ptr<StationCounters> counters) {
  BRIGADE_CHECK(counters != nullptr, "spawn_station needs counters");
  std::shared_ptr<Station> shared = std::move(station);
  if (config.detached)
    return system.spawn<caf::detached>(station_fun, config.name, shared, std::move(upstream), std::move(counters));
  return system.spawn(station_fun, config.name, shared, std::move(upstream), std::move(counters));
}

Expected<std::vector<std::unique_ptr<Station>>> make_stations(const std::vector<StationConfig>& configs,
                                                              const std::map<std::string, StationFactory>& types) {
  std::vector<std::unique_ptr<Station>> out;
  for (const StationConfig& c : configs) {
    const StationFactory* factory = nullptr;
    if (auto it = types.find(c.type); it != types.end()) factory = &it->second;
    const auto& builtin = builtin_station_types();
    if (!factory) {
      auto it = builtin.find(c.type);
      if (it == builtin.end()) {
        std::string known;
        std::map<std::string, StationFactory> all = builtin;
        for (const auto& [type, f] : types) all.emplace(type, f);
        for (const auto& [type, f] : all) known += (known.empty() ? "" : ", ") + type;
        return invalid_argument("station '" + c.name + "': unknown type '" + c.type + "' (known types: " + known + ")");
      }
      factory = &it->second;
    }
    auto made = (*factory)(StationSpec{c.name, c.type, c.options});
    if (!made) return Status(made.status().code(), "station '" + c.name + "': " + made.status().message());
    if (!*made) return internal_error("station '" + c.name + "': its factory returned no station");
    out.push_back(std::move(*made));
  }
  return out;
}

}  // namespace brigade
