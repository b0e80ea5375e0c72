// The front's watch over its remote instances (docs/architecture.md "Processes"). When the node
// of a remote instance goes (its process died or was restarted, the connection broke), the
// router fails that instance's requests in flight and routes around it; the watch then tries to
// reach the endpoint again, after 0.5 s and then with the wait doubling up to 8 s, until a node
// answers that serves the same instance with the same role and model (arch, vocabulary, KV page
// bytes). It then introduces the front to that node and wires it into the router, which routes
// to the instance again (with a cold prefix tree). Nothing blocks: the connection is asked of
// CAF's middleman actor.
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/node/front_hello.h"
#include "actors/node/node_actor.h"
#include "actors/router/router_actor.h"

namespace brigade {

// The current node of each remote instance, shared by the watch (which replaces a lost one) and
// the Engine (which asks it for stats).
struct RemoteNodes {
  std::mutex mu;
  std::vector<node_actor> nodes;  // per instance index; null for a local instance

  node_actor get(size_t index) {
    std::lock_guard<std::mutex> lock(mu);
    return nodes[index];
  }
};

struct WatchedInstance {
  int index = 0;          // in the router's instance list
  std::string host;
  uint16_t port = 0;
  node_info_msg info;     // what the node served at start; a node that comes back must match
  FrontIdentity who;      // how the front introduces itself (and its token)
  bool same_host = false; // hand-offs in shared memory: a node that comes back must share the front's
};

// Watches every instance of `watched` (their nodes are in `nodes`, connected to the front).
caf::actor spawn_node_watch(caf::actor_system& system, std::vector<WatchedInstance> watched,
                            std::shared_ptr<RemoteNodes> nodes, router_actor router);

// Whether a node that answers now serves what `then` described: the same instance, role and
// model, and with `same_host`, on this host (blob_host_id: its shared-memory segments are this
// host's). Empty when it does; else what differs.
std::string node_mismatch(schema::NodeInfo::Reader then, schema::NodeInfo::Reader now, bool same_host = false);

// Empty when the node of `info` shares this process's shared memory (blob_host_id); else why its
// hand-offs cannot go through it.
std::string other_host(schema::NodeInfo::Reader info);

}  // namespace brigade
