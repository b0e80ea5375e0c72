// `brigade node`: serves one instance of a topology in this process for a front in another
// (brigade/node.h; docs/architecture.md "Processes"). The first line on stdout names the bound
// address once the instance is loaded and listening, so scripts can wait for it (port 0 = any).
// SIGINT/SIGTERM stop it; it also exits (status 1) when its instance stops on its own.
#include <csignal>
#include <cstdio>
#include <ctime>

#include "brigade/node.h"
#include "tools/commands.h"

namespace brigade::tools {

namespace {

struct NodeArgs {
  std::string topology;
  std::string instance;
  std::string listen;
  std::string model;
  int threads = 0;
  ExecutorFlags executor;
};

int run_node(const NodeArgs& a) {
  const sigset_t stop_signals = block_stop_signals();

  auto options = engine_options(a.topology, a.model, a.threads, /*default_model=*/true);
  if (!options) return fail(options.status());
  if (Status st = apply_executor_flags(a.executor, *options); !st.is_ok()) return fail(st);
  NodeOptions no;
  no.engine = std::move(*options);
  no.instance = a.instance;
  no.listen = a.listen;
  auto node = Node::start(no);
  if (!node) return fail(node.status());
  std::printf("node %s:%d serving instance '%s' of %s\n", (*node)->host().c_str(), (*node)->port(),
              (*node)->instance().c_str(), no.engine.model_path.c_str());
  std::fflush(stdout);

  const timespec tick{0, 200'000'000};
  while (true) {
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      std::fprintf(stderr, "%s: stopping node (requests in flight are aborted)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    if (!(*node)->serving()) {
      std::fprintf(stderr, "error: instance '%s' stopped; the node exits\n", (*node)->instance().c_str());
      node->reset();
      return 1;
    }
  }
  node->reset();
  return 0;
}

}  // namespace

void add_node_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("node", "Serve one instance of a topology for a front in another process (a local cluster)");
  auto a = std::make_shared<NodeArgs>();
  cmd->add_option("--topology", a->topology, "Topology YAML (the same file the front serves)")->required();
  cmd->add_option("--instance", a->instance, "The instance of the topology to serve")->required();
  cmd->add_option("--listen", a->listen,
                  "HOST:PORT to listen on (port 0 = any; default: the instance's remote: endpoint). Binds 127.0.0.1 "
                  "unless told otherwise: the port takes requests from anyone who can reach it");
  cmd->add_option("--model", a->model, "Checkpoint (default: the topology's model:, else the synthetic 100M model)");
  cmd->add_option("--threads", a->threads, "CPU threads for the executor (0 = all cores)");
  add_executor_flags(cmd, a->executor);
  cmd->callback([a, &run] { run = [a] { return run_node(*a); }; });
}

}  // namespace brigade::tools
