// A node of a multi-process cluster (DESIGN.md §3 "Topologies"; docs/architecture.md
// "Processes"): serves one instance of a topology in this process and publishes it on a TCP port,
// for a front (an Engine whose topology names the instance `remote: HOST:PORT`) to route to.
// `brigade node` is this class on the command line.
#pragma once

#include <memory>
#include <string>

#include "brigade/engine.h"
#include "core/status.h"

namespace brigade {

struct NodeOptions {
  EngineOptions engine;  // the topology (validated whole), model path, backend factory
  std::string instance;  // which of engine.topology's instances to serve
  // HOST:PORT to listen on (port 0 = any free port); empty: the instance's `remote:` endpoint.
  // Bind 127.0.0.1 unless the front is on another host: the port takes requests from anyone.
  std::string listen;
};

class Node {
 public:
  // Loads the instance (its weights, KV cache, tiers) and starts listening. Errors: an unknown
  // instance, nowhere to listen, a port in use, a model that does not load.
  static Expected<std::unique_ptr<Node>> start(const NodeOptions& options);
  // Stops listening and ends the instance: requests in flight are aborted (a connected front sees
  // the instance go and fails them).
  virtual ~Node() = default;

  virtual const std::string& instance() const = 0;
  virtual const std::string& host() const = 0;
  virtual int port() const = 0;  // the bound port (the one the kernel chose for port 0)
  // False once the instance stopped on its own (an executor died); the node then serves nothing.
  virtual bool serving() const = 0;
  // The instance's counters (what a front's Engine::instance_stats shows for it).
  virtual EngineStats stats() const = 0;
};

}  // namespace brigade
