// A local cluster in one command (docs/architecture.md "Processes"): the front starts a `brigade
// node` process for each remote instance of its topology whose endpoint is on this host, waits
// until each listens, and supervises them: a node that dies is started again (after 1 s, the wait
// doubling to 30 s while it keeps dying young), and the front's node watch reconnects to it as to
// any node that comes back. Destroying the launcher stops them (SIGTERM, SIGKILL after 10 s).
//
// Each node runs `BRIGADE node --topology FILE --instance NAME` plus `node_args`, in its own
// process group (a terminal's Ctrl-C reaches the front, which then stops the nodes) with
// PR_SET_PDEATHSIG (a front killed outright takes its nodes with it), and with no file descriptor
// of the front but its stdout and stderr pipe. Its output reaches the front's stderr line by line,
// prefixed with "[node NAME] ".
//
// Thread safety: nodes() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "brigade/topology.h"
#include "core/status.h"

namespace brigade {

struct LaunchOptions {
  std::string brigade;                 // the brigade executable the nodes run
  std::string topology_file;           // each node's --topology: the file the front serves
  std::vector<std::string> node_args;  // more arguments for every node (--model M, --threads N, ...)
  bool restart = true;                 // start a node that dies again
  std::chrono::seconds ready_timeout{600};  // a node must listen within this (it loads its model first)
};

class NodeLauncher {
 public:
  struct Launched {
    std::string instance;
    std::string endpoint;  // its remote: HOST:PORT
    pid_t pid = -1;        // the current process; -1 while waiting to be started again
    int restarts = 0;      // how often it was started again after dying
  };

  // Starts a node for every remote instance of `topology`, all on this host (a loopback
  // endpoint), and returns once every one listens. Errors: no remote instance, an endpoint on
  // another host, a node that exits or does not listen in time (with the end of its output).
  // Nothing started is left running after an error.
  static Expected<std::unique_ptr<NodeLauncher>> start(const TopologyConfig& topology, LaunchOptions options);

  virtual ~NodeLauncher() = default;
  virtual std::vector<Launched> nodes() const = 0;
};

}  // namespace brigade
