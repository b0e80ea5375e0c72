#include "actors/node/node_watch.h"

#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "messages/blob.h"
#include "messages/error.h"

namespace brigade {

namespace {

constexpr auto kFirstRetry = std::chrono::milliseconds(500);
constexpr auto kMaxRetry = std::chrono::seconds(8);
constexpr auto kAskTimeout = std::chrono::seconds(5);

struct Watched {
  WatchedInstance w;
  std::chrono::milliseconds wait = kFirstRetry;
  bool trying = false;  // a retry is scheduled or in progress
};

struct WatchState {
  std::vector<Watched> watched;
  std::shared_ptr<RemoteNodes> nodes;
  router_actor router;
  static inline const char* name = "brigade.node_watch";
};

using watch_ptr = caf::stateful_actor<WatchState>*;

void schedule(watch_ptr self, size_t k) {
  Watched& x = self->state.watched[k];
  x.trying = true;
  self->delayed_send(self, x.wait, retry_atom::value, static_cast<int32_t>(k));
  x.wait = std::min<std::chrono::milliseconds>(x.wait * 2, kMaxRetry);
}

// One attempt failed: log it (quietly after the first) and wait longer.
void failed(watch_ptr self, size_t k, const std::string& why) {
  const Watched& x = self->state.watched[k];
  const auto name = std::string(x.w.info.reader().getInstance());
  spdlog::log(x.wait <= kFirstRetry * 2 ? spdlog::level::warn : spdlog::level::debug,
              "node watch: instance '{}' at {}:{} not back yet: {}", name, x.w.host, x.w.port, why);
  schedule(self, k);
}

// The node answers (`now`) and serves the same thing: introduce the front and wire it into the
// router.
void connect(watch_ptr self, size_t k, node_actor node, const node_info_msg& now) {
  const Watched& x = self->state.watched[k];
  std::string nonce;
  auto hello = make_node_hello(x.w.who, now.reader(), nonce);
  if (!hello) return failed(self, k, hello.status().message());
  self->request(node, kAskTimeout, hello_atom::value, *hello, token_sink_actor{self->state.router},
                handoff_sink_actor{self->state.router})
      .then(
          [self, k, node, nonce](const node_info_msg& answer) {
            auto& st = self->state;
            if (Status auth = check_hello_answer(st.watched[k].w.who, nonce, answer.reader()); !auth.is_ok())
              return failed(self, k, auth.message());
            Watched& y = st.watched[k];
            {
              std::lock_guard<std::mutex> lock(st.nodes->mu);
              st.nodes->nodes[static_cast<size_t>(y.w.index)] = node;
            }
            self->monitor(node);
            self->send(st.router, wire_atom::value, static_cast<int32_t>(y.w.index), scheduler_actor{node});
            y.trying = false;
            y.wait = kFirstRetry;
            spdlog::info("node watch: instance '{}' is back at {}:{}", std::string(y.w.info.reader().getInstance()),
                         y.w.host, y.w.port);
          },
          [self, k](const caf::error& err) { failed(self, k, to_status(err).message()); });
}

void retry(watch_ptr self, size_t k) {
  const Watched& x = self->state.watched[k];
  auto mm = self->system().middleman().actor_handle();
  self->request(mm, kAskTimeout, caf::connect_atom::value, x.w.host, x.w.port)
      .then(
          [self, k](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
            const auto expected = self->system().message_types<node_actor>();
            if (!ptr || !std::includes(ifs.begin(), ifs.end(), expected.begin(), expected.end())) {
              failed(self, k, "what listens there is not a brigade node of this build");
              return;
            }
            auto node = caf::actor_cast<node_actor>(std::move(ptr));
            self->request(node, kAskTimeout, info_atom::value)
                .then(
                    [self, k, node](const node_info_msg& now) {
                      const std::string diff = node_mismatch(self->state.watched[k].w.info.reader(), now.reader(),
                                                                    self->state.watched[k].w.same_host);
                      if (!diff.empty()) {
                        failed(self, k, diff);
                        return;
                      }
                      connect(self, k, node, now);
                    },
                    [self, k](const caf::error& err) { failed(self, k, to_status(err).message()); });
          },
          [self, k](const caf::error& err) { failed(self, k, self->system().render(err)); });
}

caf::behavior watch_fun(watch_ptr self, std::vector<WatchedInstance> watched, std::shared_ptr<RemoteNodes> nodes,
                        router_actor router) {
  auto& st = self->state;
  st.nodes = std::move(nodes);
  st.router = std::move(router);
  for (auto& w : watched) st.watched.push_back(Watched{std::move(w)});
  for (const auto& x : st.watched) self->monitor(st.nodes->get(static_cast<size_t>(x.w.index)));
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& s = self->state;
    for (size_t k = 0; k < s.watched.size(); ++k) {
      const node_actor current = s.nodes->get(static_cast<size_t>(s.watched[k].w.index));
      if (!current || dm.source != current.address() || s.watched[k].trying) continue;
      schedule(self, k);
    }
  });
  return {
      [self](retry_atom, int32_t k) {
        if (k >= 0 && static_cast<size_t>(k) < self->state.watched.size()) retry(self, static_cast<size_t>(k));
      },
  };
}

}  // namespace

std::string node_mismatch(schema::NodeInfo::Reader then, schema::NodeInfo::Reader now, bool same_host) {
  if (Status serves = node_serves(now, std::string(then.getInstance()), std::string(then.getRole())); !serves.is_ok()) return serves.message();
  if (now.getArch() != then.getArch() || now.getVocabSize() != then.getVocabSize() ||
      now.getKvPageBytes() != then.getKvPageBytes())
    return "it serves another model or KV layout (" + std::string(now.getArch()) + ", " +
           std::to_string(now.getVocabSize()) + " ids, " + std::to_string(now.getKvPageBytes()) + "-byte pages)";
  return same_host ? other_host(now) : std::string();
}

std::string other_host(schema::NodeInfo::Reader info) {
  if (info.getHostId() == blob_host_id()) return {};
  return "its node does not share this process's shared memory (host '" + std::string(info.getHostId()) +
         "', this front's '" + blob_host_id() + "': another host, or a container with a /dev/shm of its own), "
         "but its KV hand-offs would go through it (pd.transfer shm, or auto with every node on a loopback "
         "endpoint): run the nodes beside this front, or set pd.transfer: inline";
}

caf::actor spawn_node_watch(caf::actor_system& system, std::vector<WatchedInstance> watched,
                            std::shared_ptr<RemoteNodes> nodes, router_actor router) {
  return system.spawn(watch_fun, std::move(watched), std::move(nodes), std::move(router));
}

}  // namespace brigade
