// Node: one instance of a topology, published for a front in another process (brigade/node.h).
#include "brigade/node.h"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include "actors/engine/instance.h"
#include "actors/engine/instance_stats.h"
#include "actors/node/node_actor.h"
#include "actors/node/node_auth.h"
#include "core/logging.h"
#include "core/token_trie.h"
#include "messages/blob.h"
#include "messages/registry.h"

namespace brigade {

namespace {

caf::actor_system_config& node_config(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  register_node_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.policy", caf::atom("sharing"));  // as the Engine's (engine.cpp says why)
  return cfg;
}

class NodeImpl final : public Node {
 public:
  NodeImpl() : system_(node_config(cfg_)) {}
  ~NodeImpl() override {
    if (node_) {
      system_.middleman().unpublish(node_, static_cast<uint16_t>(port_));
      caf::anon_send_exit(node_, caf::exit_reason::user_shutdown);
    }
    for (const auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    // system_ waits for every actor in its destructor.
  }

  Status start(const NodeOptions& options);
  const std::string& instance() const override { return instance_; }
  const std::string& host() const override { return host_; }
  int port() const override { return port_; }
  bool serving() const override { return !*stopped_; }
  EngineStats stats() const override {
    caf::scoped_actor self{*sys_};
    EngineStats s;
    self->request(node_, std::chrono::seconds(2), node_stats_request_msg::build([](auto) {}))
        .receive([&](const node_stats_msg& m) { s = decode_node_stats(m.reader()); }, [](const caf::error&) {});
    return s;
  }

 private:
  caf::actor_system_config cfg_;
  caf::actor_system system_;
  caf::actor_system* sys_ = &system_;  // for const methods that talk to actors
  node_actor node_;
  std::vector<caf::actor> actors_;
  std::string instance_, host_;
  int port_ = 0;
  std::shared_ptr<std::atomic<bool>> stopped_ = std::make_shared<std::atomic<bool>>(false);
};

Status NodeImpl::start(const NodeOptions& options) {
  const TopologyConfig& topo = options.engine.topology;
  BRIGADE_RETURN_IF_ERROR(topo.validate());
  std::string token;  // read before any weights load: a bad token file fails fast
  if (!topo.node_token_file.empty()) {
    BRIGADE_ASSIGN_OR_RETURN(token, load_node_token(topo.node_token_file));
  }
  const InstanceConfig* inst = nullptr;
  std::string names;
  for (const auto& i : topo.instances) {
    if (i.name == options.instance) inst = &i;
    names += (names.empty() ? "" : ", ") + i.name;
  }
  if (!inst) return not_found("the topology has no instance '" + options.instance + "' (it has: " + names + ")");
  const std::string listen = options.listen.empty() ? inst->remote : options.listen;
  if (listen.empty())
    return invalid_argument("instance '" + inst->name + "' names no remote: endpoint; give --listen HOST:PORT");
  BRIGADE_ASSIGN_OR_RETURN(Endpoint ep, parse_endpoint(listen, /*allow_any_port=*/true));
  const std::string path = options.engine.model_path.empty() ? topo.model : options.engine.model_path;
  if (path.empty()) return invalid_argument("no model given: pass a model path or set `model:` in the topology");

  InstanceConfig local = *inst;
  local.remote.clear();
  const ExecutorConfig& exe = local.executors.front();
  const int n_cpu_ranks = parse_device(exe.device)->cuda ? 0 : exe.tp;
  BRIGADE_ASSIGN_OR_RETURN(LoadedInstance loaded, load_instance(options.engine, local, path, n_cpu_ranks,
                                                                options.engine.progress));
  // Every hand-off of a node crosses a process (to the front's router), where a local blob handle
  // means nothing: the KV bytes travel inline, or in shared memory (pd.transfer: shm).
  loaded.setup.pd_transport = pd_transport(topo, /*in_node=*/true);
  const Model& model = *loaded.ranks.front()->model;
  BRIGADE_ASSIGN_OR_RETURN(auto tokenizer, load_model_tokenizer(path));
  if (tokenizer) {
    BRIGADE_RETURN_IF_ERROR(check_tokenizer_fits(*tokenizer, model.config().vocab_size));
    loaded.ranks.front()->runner.vocab = std::make_shared<const TokenTrie>(token_pieces(*tokenizer));
  }

  NodeSetup setup;
  setup.info = node_info_msg::build([&](schema::NodeInfo::Builder b) {
    b.setProtocol(kNodeProtocol);
    b.setInstance(inst->name);
    b.setRole(inst->role);
    b.setArch(model.config().arch);
    b.setVocabSize(model.config().vocab_size);
    b.setMaxPosition(loaded.setup.limits.max_context);  // an encoder's: at most a step
    b.setNParams(static_cast<uint64_t>(model.n_params()));
    b.setWeightBytes(static_cast<uint64_t>(model.weight_bytes()));
    b.setHasTokenizer(tokenizer != nullptr);
    b.setNPages(loaded.n_pages);
    b.setKvPageBytes(loaded.kv_page_bytes);
    b.setKvLayout(loaded.kv_layout);
    b.setPeakBytesPerS(loaded.ceilings.bytes_per_s);
    b.setPeakFlopsPerS(loaded.ceilings.flops_per_s);
    b.setPid(static_cast<int64_t>(::getpid()));
    b.setHostId(blob_host_id());
  });
  setup.counters = loaded.setup.counters;
  setup.ceilings = loaded.ceilings;
  setup.n_pages = loaded.n_pages;
  setup.stopped = stopped_;
  setup.token = std::move(token);
  node_ = spawn_node_actor(system_, std::move(setup));
  SpawnedInstance spawned =
      spawn_instance(system_, std::move(loaded), node_, /*linked=*/true, handoff_sink_actor{node_});
  actors_ = spawned.actors;
  {
    caf::scoped_actor self{system_};  // a sender of this process: the node takes no wiring from outside
    self->send(node_, wire_atom::value, spawned.scheduler, spawned.tiers);
  }
  auto port = system_.middleman().publish(node_, static_cast<uint16_t>(ep.port), ep.host.c_str(), /*reuse_addr=*/true);
  if (!port)
    return io_error("cannot listen on " + listen + ": " + system_.render(port.error()) +
                       (ep.port != 0 ? " (is the port in use?)" : ""));
  instance_ = inst->name;
  host_ = ep.host;
  port_ = *port;
  spdlog::info("node: instance '{}' listening on {}:{}", instance_, host_, port_);
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<Node>> Node::start(const NodeOptions& options) {
  init_logging();
  auto node = std::make_unique<NodeImpl>();
  BRIGADE_RETURN_IF_ERROR(node->start(options));
  return std::unique_ptr<Node>(std::move(node));
}

}  // namespace brigade
