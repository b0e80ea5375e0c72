#include "actors/node/node_actor.h"

#include <spdlog/spdlog.h>

#include <string>
#include <unordered_set>

#include "actors/engine/instance_stats.h"
#include "actors/node/node_auth.h"
#include "messages/blob.h"
#include "messages/convert.h"
#include "messages/error.h"

namespace brigade {

namespace {

struct NodeState {
  NodeSetup setup;
  std::string instance;            // the instance name (logs)
  scheduler_actor scheduler;       // null until wired
  hicache_actor tiers;             // null without tiers
  token_sink_actor front;          // null while no front is connected
  handoff_sink_actor front_handoffs;
  std::string front_name;
  caf::node_id front_node;                 // the front's process (valid while a front is connected)
  std::unordered_set<uint64_t> in_flight;  // the front's requests this instance owns now
  ChallengeBook challenges;                // with a token: issued by (info), spent by a hello
  static inline const char* name = "brigade.node";
};

using node_ptr = node_actor::stateful_pointer<NodeState>;

// Whether the message being handled came from `who` (by address: a remote sender arrives as a
// proxy, which compares equal by address to the handle the hello carried).
template <class Handle>
bool sent_by(node_ptr self, const Handle& who) {
  return who && caf::actor_cast<caf::actor_addr>(self->current_sender()) == who.address();
}

// Whether the message being handled comes from the connected front's process (or this one).
bool from_front_process(node_ptr self) {
  const auto sender = self->current_sender();
  if (!sender) return false;
  return sender->node() == self->node() || (self->state.front && sender->node() == self->state.front_node);
}

// (info): what the node serves, with a fresh challenge when it authenticates.
node_info_msg on_info(node_ptr self) {
  auto& st = self->state;
  if (st.setup.token.empty()) return st.setup.info;
  const std::string challenge = st.challenges.issue();
  return st.setup.info.edited([&](schema::NodeInfo::Builder b) {
    b.setAuthRequired(true);
    b.setChallenge(as_data(challenge));
  });
}

// The front went away: nobody will read the answers to its requests, so end them here and give
// their pages back.
void drop_front(node_ptr self, const caf::error& reason) {
  auto& st = self->state;
  // A front that shut down cleanly is routine; a lost connection is worth a warning.
  spdlog::log(reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn,
              "node '{}': front '{}' is gone ({}); aborting its {} requests in flight", st.instance, st.front_name,
              caf::to_string(reason), st.in_flight.size());
  for (uint64_t id : st.in_flight)
    self->send(st.scheduler, abort_msg::build([&](schema::Abort::Builder b) { b.setRequestId(id); }));
  st.in_flight.clear();
  st.front = nullptr;
  st.front_handoffs = nullptr;
  st.front_name.clear();
}

caf::result<node_info_msg> on_connect(node_ptr self, const node_hello_msg& hello, token_sink_actor sink,
                                      handoff_sink_actor handoffs) {
  auto& st = self->state;
  const auto h = hello.reader();
  const std::string front = h.getFront();
  if (h.getProtocol() != kNodeProtocol)
    return to_caf_error(unsupported("node '" + st.instance + "' speaks node protocol " +
                                    std::to_string(kNodeProtocol) + ", the front '" + front + "' speaks " +
                                    std::to_string(h.getProtocol()) + ": run one brigade build on both"));
  if (Status serves = node_serves(st.setup.info.reader(), std::string(h.getInstance()), std::string(h.getRole())); !serves.is_ok())
    return to_caf_error(serves);
  if (!st.scheduler) return to_caf_error(internal_error("node '" + st.instance + "' is not wired yet"));
  if (st.front)
    return to_caf_error(out_of_resources("node '" + st.instance + "' already serves front '" + st.front_name +
                                    "'; a node serves one front at a time"));
  if (!sink || !handoffs) return to_caf_error(invalid_argument("the hello names no event sink"));
  node_info_msg answer = st.setup.info;
  if (!st.setup.token.empty()) {
    const std::string challenge = to_string(h.getChallenge());
    const bool fresh = st.challenges.redeem(challenge);
    if (!fresh || !same_proof(to_string(h.getProof()), hello_proof(st.setup.token, challenge, std::string(h.getInstance()),
                                                                    std::string(h.getRole())))) {
      spdlog::warn("node '{}': refused front '{}': {}", st.instance, front,
                   fresh ? "it did not prove the node token" : "its challenge is unknown or spent");
      return to_caf_error(invalid_argument("node '" + st.instance + "' refused the front '" + front +
                                           "': it did not prove the node token (node_token_file must name the "
                                           "same secret on both sides)"));
    }
    const std::string proof = answer_proof(st.setup.token, to_string(h.getNonce()), st.instance);
    answer = answer.edited([&](schema::NodeInfo::Builder b) {
      b.setAuthRequired(true);
      b.setProof(as_data(proof));
    });
  }
  st.front = std::move(sink);
  st.front_node = self->current_sender() ? self->current_sender()->node() : caf::node_id{};
  st.front_handoffs = std::move(handoffs);
  st.front_name = front;
  self->monitor(st.front);
  spdlog::info("node '{}': serving front '{}'{}", st.instance, front, st.setup.token.empty() ? "" : " (authenticated)");
  return answer;
}

caf::typed_response_promise<node_stats_msg> on_stats(node_ptr self) {
  const bool allowed = from_front_process(self);  // before the promise takes the sender away
  auto rp = self->make_response_promise<node_stats_msg>();
  auto& st = self->state;
  if (!allowed) {
    rp.deliver(to_caf_error(invalid_argument("stats go to the connected front only")));
    return rp;
  }
  SpawnedInstance view;  // counter_stats reads the counters, ceilings and pool size
  view.counters = st.setup.counters;
  view.ceilings = st.setup.ceilings;
  view.n_pages = st.setup.n_pages;
  EngineStats s = counter_stats(view);
  if (!st.tiers) {
    rp.deliver(encode_node_stats(s));
    return rp;
  }
  self->request(st.tiers, std::chrono::seconds(2), tier_stats_request_msg::build([](auto) {}))
      .then(
          [rp, s](const tier_stats_msg& m) mutable {
            add_tier_stats(m.reader(), s);
            rp.deliver(encode_node_stats(s));
          },
          [rp, s](const caf::error&) mutable {  // counters without the tier bytes beat no answer
            s.tiers = true;
            rp.deliver(encode_node_stats(s));
          });
  return rp;
}

// The instance's cache reset: the scheduler's device cache, then its tiers (the host tier, and the
// disk tier when asked), one answer for both.
caf::typed_response_promise<cache_reset_done_msg> on_cache_reset(node_ptr self, const cache_reset_msg& msg) {
  const bool allowed = from_front_process(self);  // before the promise takes the sender away
  auto rp = self->make_response_promise<cache_reset_done_msg>();
  auto& st = self->state;
  if (!allowed || !st.scheduler) {
    rp.deliver(to_caf_error(allowed ? internal_error("the node is not wired yet")
                                    : invalid_argument("cache resets come from the connected front only")));
    return rp;
  }
  const bool disk = msg.reader().getDisk();
  self->request(caf::actor_cast<cache_reset_actor>(st.scheduler), std::chrono::seconds(30), msg)
      .then(
          [self, rp, disk](const cache_reset_done_msg& done) mutable {
            const hicache_actor& tiers = self->state.tiers;
            if (!tiers) {
              rp.deliver(done);
              return;
            }
            self->request(tiers, std::chrono::seconds(120), tier_clear_msg::build([&](auto b) { b.setDisk(disk); }))
                .then([rp, done](const tier_cleared_msg& c) mutable { rp.deliver(with_tiers_cleared(done, c.reader())); },
                      [rp](const caf::error& err) mutable { rp.deliver(err); });
          },
          [rp](const caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

node_actor::behavior_type node_fun(node_ptr self, NodeSetup setup) {
  self->state.instance = setup.info.reader().getInstance();
  self->state.setup = std::move(setup);
  self->attach_functor([stopped = self->state.setup.stopped](const caf::error&) {
    if (stopped) *stopped = true;
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.front && dm.source == st.front.address()) {
      drop_front(self, dm.reason);
    } else if (st.scheduler && dm.source == st.scheduler.address()) {
      spdlog::error("node '{}': the instance stopped ({})", st.instance, caf::to_string(dm.reason));
      self->quit(dm.reason ? dm.reason : caf::error(caf::exit_reason::normal));
    }
  });
  return {
      [self](const generate_request_msg& msg) {
        auto& st = self->state;
        if (!sent_by(self, st.front)) {
          // Not from the connected front (whose router is also its sink): nobody would get the events.
          spdlog::warn("node '{}': request {} from an unconnected sender dropped", st.instance,
                       msg.reader().getRequestId());
          return;
        }
        st.in_flight.insert(msg.reader().getRequestId());
        self->send(st.scheduler, msg);
      },
      [self](const abort_msg& msg) {
        if (self->state.scheduler && from_front_process(self)) self->send(self->state.scheduler, msg);
      },
      [self](const prefix_query_msg& msg) -> caf::result<prefix_query_result_msg> {
        if (!self->state.scheduler) return to_caf_error(internal_error("the node is not wired yet"));
        if (!from_front_process(self)) return to_caf_error(invalid_argument("prefix queries come from the connected front only"));
        return self->delegate(self->state.scheduler, msg);
      },
      [self](const kv_handoff_msg& msg) {
        auto& st = self->state;
        const uint64_t id = msg.reader().getRequestId();
        if (sent_by(self, st.scheduler)) {  // prefilled here: the front's router picks a decode instance
          st.in_flight.erase(id);
          if (st.front_handoffs) {
            self->send(st.front_handoffs, msg);
          } else {
            discard_blob(msg.reader().getKv());  // no front: the hand-off (and its segment) is dropped
          }
          return;
        }
        if (!from_front_process(self)) return;  // not the front's: its segment is not ours to free
        if (!st.scheduler) return discard_blob(msg.reader().getKv());
        st.in_flight.insert(id);  // prefilled elsewhere: decoded here from now on
        self->send(st.scheduler, msg);
      },
      [self](const token_event_msg& msg) {
        auto& st = self->state;
        if (!sent_by(self, st.scheduler)) return;
        if (msg.reader().getFinishReason() != schema::FinishReason::NONE) st.in_flight.erase(msg.reader().getRequestId());
        if (st.front) self->send(st.front, msg);
      },
      [self](const cache_reset_msg& msg) { return on_cache_reset(self, msg); },
      [self](info_atom) { return on_info(self); },
      [self](hello_atom, const node_hello_msg& hello, token_sink_actor sink, handoff_sink_actor handoffs) {
        return on_connect(self, hello, std::move(sink), std::move(handoffs));
      },
      [self](const node_stats_request_msg&) { return on_stats(self); },
      [self](wire_atom, scheduler_actor scheduler, hicache_actor tiers) {
        auto& st = self->state;
        const auto sender = self->current_sender();
        if (st.scheduler || !sender || sender->node() != self->node()) return;
        st.scheduler = std::move(scheduler);
        st.tiers = std::move(tiers);
        self->monitor(st.scheduler);
      },
  };
}

}  // namespace

Status node_serves(schema::NodeInfo::Reader info, const std::string& instance, const std::string& role) {
  if (info.getProtocol() != kNodeProtocol)
    return unsupported("the node speaks node protocol " + std::to_string(info.getProtocol()) + ", this build " +
                       std::to_string(kNodeProtocol) + ": run one brigade build on both");
  if (info.getInstance() != instance)
    return invalid_argument("this node serves instance '" + std::string(info.getInstance()) + "', not '" + instance +
                            "': check the remote: endpoint of that instance in the front's topology");
  if (info.getRole() != role)
    return invalid_argument("the node serves instance '" + instance + "' with role " + std::string(info.getRole()) +
                            ", the front's topology says " + role);
  return Status::ok();
}

void register_node_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<scheduler_actor>("brigade.scheduler_actor");
  cfg.add_message_type<token_sink_actor>("brigade.token_sink_actor");
  cfg.add_message_type<handoff_sink_actor>("brigade.handoff_sink_actor");
  cfg.add_message_type<hicache_actor>("brigade.hicache_actor");
}

node_actor spawn_node_actor(caf::actor_system& system, NodeSetup setup) {
  return system.spawn(node_fun, std::move(setup));
}

}  // namespace brigade
