// Multi-process clusters (docs/architecture.md "Processes"): a front Engine whose instances are
// `remote:` nodes. Most tests run the nodes in this process (each Node has its own actor system
// and talks to the front over TCP through CAF's middleman, exactly as between processes); the
// failure tests run real `brigade node` processes and SIGKILL one.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "brigade/engine.h"
#include "actors/node/node_launcher.h"
#include "actors/node/node_watch.h"
#include "brigade/node.h"
#include "messages/blob.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

using testing::Outcomes;

GenerateOptions seeded(std::vector<int32_t> ids, int max_tokens, uint64_t seed) {
  GenerateOptions g = testing::greedy_ids(std::move(ids), max_tokens);
  g.sampling.temperature = 0.9f;
  g.sampling.top_p = 0.95f;
  g.sampling.seed = seed;
  return g;
}

// Segments of process `pid` in /dev/shm (messages/blob.h names them brigade-kv.<pid>.*).
size_t segments_of(pid_t pid) {
  const std::string prefix = "brigade-kv." + std::to_string(pid) + ".";
  size_t n = 0;
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

class NodeCluster : public testing::TinyModelTest {
 protected:
  NodeCluster() : TinyModelTest("node_test", 11) {}

  // A topology of instances named `names`, one thread each, small KV pools and steps; `remote` gives
  // their endpoints (empty: local).
  TopologyConfig topology(const std::vector<std::string>& names, const std::vector<std::string>& remote = {}) const {
    EngineOptions o = testing::test_engine_options(model(), 1);
    InstanceConfig proto = o.topology.instances.front();
    proto.kv.memory_mb = 16;
    // Steps of at most 32 tokens stay below the BLAS threshold (cpu/ops.h kBlasMinRows): a row's
    // result then does not depend on its step-mates, and instances that batch differently (the
    // nodes, a local instance, prefill and decode apart) must give the same tokens.
    proto.scheduler.max_step_tokens = 32;
    o.topology.instances.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      o.topology.instances.push_back(proto);
      o.topology.instances.back().name = names[i];
      if (i < remote.size()) o.topology.instances.back().remote = remote[i];
    }
    o.topology.model = model();
    o.topology.router.policy = "round_robin";
    return o.topology;
  }

  // An engine of `topo` with the tests' options.
  Expected<std::unique_ptr<Engine>> engine(const TopologyConfig& topo) const {
    EngineOptions o = testing::test_engine_options(model(), 1);
    o.topology = topo;
    return Engine::create(o);
  }
  // The reference: one in-process instance of the same model.
  Expected<std::unique_ptr<Engine>> local_engine() const { return engine(topology({"local"})); }

  // Options of a node serving instance `name` of `topo` at `listen` (default: a free port).
  NodeOptions node_options(const TopologyConfig& topo, const std::string& name,
                           const std::string& listen = "127.0.0.1:0") const {
    NodeOptions no;
    no.engine = testing::test_engine_options(model(), 1);
    no.engine.topology = topo;
    no.instance = name;
    no.listen = listen;
    return no;
  }

  // A node serving instance `name` of `topo` on a free port of 127.0.0.1.
  std::unique_ptr<Node> start_node(const TopologyConfig& topo, const std::string& name) const {
    auto node = Node::start(node_options(topo, name));
    EXPECT_TRUE(node.has_value()) << node.status().to_string();
    return node ? std::move(*node) : nullptr;
  }

  static std::string endpoint(const Node& n) { return "127.0.0.1:" + std::to_string(n.port()); }

  // A front whose topology names the given nodes' instances remote (and `token_file`, if any).
  Expected<std::unique_ptr<Engine>> front(const std::vector<const Node*>& nodes, const std::string& token_file = "") const {
    std::vector<std::string> names, remote;
    for (const Node* n : nodes) {
      names.push_back(n->instance());
      remote.push_back(endpoint(*n));
    }
    TopologyConfig topo = topology(names, remote);
    topo.node_token_file = token_file;
    return engine(topo);
  }

  // A token file (mode 600) under the test's directory.
  std::string token_file(const std::string& name, const std::string& secret) const {
    const std::string path = model() + "_" + name;
    std::ofstream(path) << secret << "\n";
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
    return path;
  }

  // A prefill node and a decode node (in this process) with pd.transfer `transfer`, and a front
  // connected to them.
  struct PdCluster {
    std::unique_ptr<Node> p, d;
    Expected<std::unique_ptr<Engine>> front = internal_error("no nodes");
  };
  PdCluster pd_cluster(const std::string& transfer) const {
    TopologyConfig topo = topology({"p", "d"});
    topo.instances[0].role = "prefill";
    topo.instances[1].role = "decode";
    topo.pd.transfer = transfer;
    PdCluster c;
    c.p = start_node(topo, "p");
    c.d = start_node(topo, "d");
    if (!c.p || !c.d) return c;
    topo.instances[0].remote = endpoint(*c.p);
    topo.instances[1].remote = endpoint(*c.d);
    c.front = engine(topo);
    return c;
  }

  // Greedy and seeded outputs through a prefill and a decode node equal one in-process instance's,
  // and the front's stats are the nodes' counters; nothing recomputes. pd.transfer shm, and auto
  // with every node on this host: every hand-off carries its KV bytes in a shared-memory segment,
  // which the decode node takes (none is left); local: inline bytes cross (a local handle would be
  // refused there).
  void expect_pd_nodes_give_colocated_tokens(const std::string& transfer) const {
    auto [p, d, cluster] = pd_cluster(transfer);
    ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
    auto local = local_engine();
    ASSERT_TRUE(local.has_value());
    std::vector<GenerateOptions> reqs;
    for (int i = 0; i < 4; ++i) reqs.push_back(testing::greedy_ids(prompt(i, 20 + 7 * i), 12));
    for (int i = 0; i < 3; ++i) reqs.push_back(seeded(prompt(30 + i, 17), 12, 7 + i));
    EXPECT_EQ(testing::generate_all(**cluster, reqs), testing::generate_all(**local, reqs));
    const auto per = (*cluster)->instance_stats();
    EXPECT_EQ(per[0].role, "prefill");
    EXPECT_EQ(per[0].stats.pd_transfers_out, reqs.size());
    EXPECT_EQ(per[1].stats.pd_transfers_in, reqs.size());
    EXPECT_EQ(per[1].stats.pd_import_failures, 0u);
    EXPECT_GT(per[1].stats.pd_bytes_in, 0u);
    EXPECT_EQ(per[1].stats.pd_shm_transfers_in, transfer == "local" ? 0u : reqs.size());
    EXPECT_EQ(n_unreceived_shared_blobs(), 0u) << "the decode node took every segment";
    EXPECT_EQ(segments_of(::getpid()), 0u);
  }
};

// Greedy and seeded outputs through two nodes equal one in-process instance's, and the front's
// stats are the nodes' counters.
TEST_F(NodeCluster, TwoNodesGiveOneLocalInstancesTokens) {
  const TopologyConfig topo = topology({"a", "b"});
  auto a = start_node(topo, "a");
  auto b = start_node(topo, "b");
  ASSERT_TRUE(a && b);
  auto cluster = front({a.get(), b.get()});
  ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
  EXPECT_EQ((*cluster)->model().vocab_size, 300);
  EXPECT_TRUE((*cluster)->model().has_tokenizer);

  auto local = local_engine();
  ASSERT_TRUE(local.has_value()) << local.status().to_string();

  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(testing::greedy_ids(prompt(i, 5 + 9 * i), 16));
  for (int i = 0; i < 4; ++i) reqs.push_back(seeded(prompt(20 + i, 12), 16, 1000 + i));
  EXPECT_EQ(testing::generate_all(**cluster, reqs), testing::generate_all(**local, reqs));
  // Text in, text out: the front tokenizes and detokenizes for the nodes.
  GenerateOptions text;
  text.prompt = "hello there";
  text.max_tokens = 8;
  text.sampling.temperature = 0.0f;
  auto ct = (*cluster)->generate(text);
  auto lt = (*local)->generate(text);
  ASSERT_TRUE(ct.has_value() && lt.has_value());
  EXPECT_EQ(ct->token_ids, lt->token_ids);
  EXPECT_EQ(ct->text, lt->text);

  const auto per = (*cluster)->instance_stats();
  ASSERT_EQ(per.size(), 2u);
  EXPECT_EQ(per[0].name, "a");
  EXPECT_TRUE(per[0].serving && per[1].serving);
  EXPECT_EQ(per[0].stats.requests_done + per[1].stats.requests_done, reqs.size() + 1);
  EXPECT_GT(per[0].stats.requests_done, 0u);
  EXPECT_GT(per[1].stats.requests_done, 0u);
  EXPECT_EQ(per[0].stats.requests_done, a->stats().requests_done);
  EXPECT_EQ(per[0].stats.kv_pages_total, a->stats().kv_pages_total);
  EXPECT_GT(per[0].stats.kv_pages_total, 0);
  EXPECT_EQ((*cluster)->stats().generated_tokens, per[0].stats.generated_tokens + per[1].stats.generated_tokens);
  auto cached = (*cluster)->cached_prefix_tokens(prompt(0, 5));
  EXPECT_TRUE(cached.has_value()) << "prefix queries cross to the node";
}

// A front's cache reset crosses to every node: each empties its device cache and its host tier.
TEST_F(NodeCluster, ACacheResetCrossesToEveryNode) {
  TopologyConfig topo = topology({"a", "b"});
  topo.instances[0].cache.host_bytes = 1 << 20;  // node a has a host tier (write_through)
  auto a = start_node(topo, "a");
  auto b = start_node(topo, "b");
  ASSERT_TRUE(a && b);
  auto cluster = front({a.get(), b.get()});
  ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*cluster)->generate(testing::greedy_ids(prompt(i, 40), 8)).has_value());
  for (int i = 0; i < 500 && a->stats().tier_host_bytes_used == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int pages = a->stats().cache_pages + b->stats().cache_pages;
  ASSERT_GT(a->stats().cache_pages, 0);
  ASSERT_GT(b->stats().cache_pages, 0);
  ASSERT_GT(a->stats().tier_host_bytes_used, 0u);
  auto r = (*cluster)->reset_prefix_cache();
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->freed_pages, pages);
  EXPECT_GT(r->host_entries, 0u);
  EXPECT_EQ(a->stats().cache_pages, 0);
  EXPECT_EQ(b->stats().cache_pages, 0);
  EXPECT_EQ(a->stats().tier_host_bytes_used, 0u);
}

// An abort crosses to the node that owns the request; a front that goes away ends its requests
// on the node (their pages come back) and a new front is served.
TEST_F(NodeCluster, AbortsAndAFrontThatGoesAway) {
  const TopologyConfig topo = topology({"a"});
  auto a = start_node(topo, "a");
  ASSERT_TRUE(a);
  {
    Outcomes out;  // outlives the front, whose callbacks write into it until it is gone
    auto cluster = front({a.get()});
    ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
    auto id = (*cluster)->submit(testing::greedy_ids(prompt(1, 8), 1800), out.callback());
    ASSERT_TRUE(id.has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*cluster)->cancel(*id);
    ASSERT_TRUE(out.wait(1));
    EXPECT_EQ(out.get(*id).finish, FinishReason::abort);
    EXPECT_LT(out.get(*id).token_ids.size(), 1800u);

    // A second front while the first is connected is refused with the reason.
    auto second = front({a.get()});
    ASSERT_FALSE(second.has_value());
    EXPECT_NE(second.status().message().find("already serves front"), std::string::npos) << second.status().message();

    for (int i = 0; i < 2; ++i) ASSERT_TRUE((*cluster)->submit(testing::greedy_ids(prompt(2 + i, 8), 1800), out.callback()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // the front goes with two long requests running on the node
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (a->stats().n_running + a->stats().n_waiting > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(a->stats().n_running + a->stats().n_waiting, 0) << "the node aborted the gone front's requests";
  EXPECT_LT(a->stats().generated_tokens, 3u * 1800u);

  auto again = front({a.get()});  // the node serves the next front
  ASSERT_TRUE(again.has_value()) << again.status().to_string();
  auto c = (*again)->generate(testing::greedy_ids(prompt(9, 8), 6));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 6u);
}

TEST_F(NodeCluster, PrefillAndDecodeNodesGiveColocatedTokens) { expect_pd_nodes_give_colocated_tokens("local"); }

TEST_F(NodeCluster, PrefillAndDecodeNodesMoveKvThroughSharedMemory) {
  expect_pd_nodes_give_colocated_tokens("shm");
}

TEST_F(NodeCluster, NodesOfThisHostUseSharedMemoryByDefault) { expect_pd_nodes_give_colocated_tokens("auto"); }

// pd.transfer shm with aborts at every stage: at once, on the first token (the hand-off is being
// exported or is in flight through the front) and later (on the decode node). Every request ends
// once and no segment is left behind: the prefill node frees the segment of a sequence aborted
// while its pages were read, the front's router one it drops, the decode node one it took.
TEST_F(NodeCluster, AbortedShmHandOffsLeaveNoSegment) {
  auto [p, d, cluster] = pd_cluster("shm");
  ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
  Engine& engine = **cluster;
  Outcomes out;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 24; ++i) {
    const int when = i % 4 == 0 ? -1 : i % 4 == 3 ? 3 : 1;  // events seen before cancelling (-1: at once)
    auto seen = std::make_shared<int>(0);
    auto id = engine.submit(testing::greedy_ids(prompt(200 + i, 24 + 11 * (i % 5)), 20),
                            out.callback([&engine, when, seen](const Event& ev) {
                              if (++*seen == when && ev.finish == FinishReason::none) engine.cancel(ev.request_id);
                            }));
    ASSERT_TRUE(id.has_value());
    if (when < 0) engine.cancel(*id);
    ids.push_back(*id);
  }
  ASSERT_TRUE(out.wait(ids.size())) << "every request ends, none hangs";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // late hand-offs would land now
  for (uint64_t id : ids) EXPECT_EQ(out.n_final(id), 1) << "request " << id << " ends exactly once";
  EXPECT_EQ(n_unreceived_shared_blobs(), 0u) << "a segment of an aborted hand-off is left";
  EXPECT_EQ(segments_of(::getpid()), 0u);
  auto c = engine.generate(testing::greedy_ids(prompt(299, 30), 5));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 5u);
}

// A front's own prefill instance hands off to a decode node: its bytes must cross the process
// (inline with local, a segment with shm and auto), and a node's prefill to the front's own
// decode instance likewise. Neither recomputes.
TEST_F(NodeCluster, HandOffsBetweenTheFrontAndANodeCrossWithTheirBytes) {
  auto local = local_engine();
  ASSERT_TRUE(local.has_value());
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(testing::greedy_ids(prompt(60 + i, 19 + 5 * i), 8));
  reqs.push_back(seeded(prompt(70, 23), 8, 3));
  const auto want = testing::generate_all(**local, reqs);
  for (const std::string transfer : {"local", "shm", "auto"}) {
    for (const int remote_side : {0, 1}) {  // 0: the prefill instance is the node; 1: the decode instance
      SCOPED_TRACE("pd.transfer " + transfer + ", node: " + (remote_side == 0 ? "prefill" : "decode"));
      TopologyConfig topo = topology({"p", "d"});
      topo.instances[0].role = "prefill";
      topo.instances[1].role = "decode";
      topo.pd.transfer = transfer;
      const std::string name = topo.instances[static_cast<size_t>(remote_side)].name;
      auto node = start_node(topo, name);
      ASSERT_TRUE(node);
      topo.instances[static_cast<size_t>(remote_side)].remote = endpoint(*node);
      auto front = engine(topo);
      ASSERT_TRUE(front.has_value()) << front.status().to_string();
      EXPECT_EQ(testing::generate_all(**front, reqs), want);
      const auto per = (*front)->instance_stats();
      EXPECT_EQ(per[1].stats.pd_transfers_in, reqs.size());
      EXPECT_EQ(per[1].stats.pd_import_failures, 0u);
      EXPECT_EQ(per[1].stats.pd_shm_transfers_in, transfer == "local" ? 0u : reqs.size());
      EXPECT_EQ(segments_of(::getpid()), 0u);
    }
  }
}

// A node that stops (SIGTERM, a restart) fails its requests in flight at the front, none hangs;
// when a node serving the same instance listens there again, the front's node watch connects to
// it and routes there again. The cluster authenticates (node_token_file): the watch's hello to the
// new node proves the token over that node's fresh challenge.
TEST_F(NodeCluster, ANodeThatComesBackIsServedAgain) {
  TopologyConfig topo = topology({"a", "b"});
  topo.node_token_file = token_file("comeback", "0123456789abcdef0123456789abcdef");
  auto a = start_node(topo, "a");
  auto b = start_node(topo, "b");
  ASSERT_TRUE(a && b);
  const int port = a->port();
  auto cluster = front({a.get(), b.get()}, topo.node_token_file);
  ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
  Outcomes out;
  const auto ids = submit_long(**cluster, 4, 1200, out);  // round robin: even positions on a, odd on b
  ASSERT_EQ(ids.size(), 4u);
  ASSERT_TRUE(wait_routed(**cluster, 4));
  // Stopped as soon as its requests are routed: a 50 ms pause here once let the tiny model
  // decode all 1200 tokens first (a clean-clone CI run: both ended with length, none was left to
  // fail).
  a.reset();  // stops: a clean shutdown of the node, seen by the front as the instance going
  ASSERT_TRUE(out.wait(ids.size())) << "every request ends, none hangs";
  for (size_t i = 0; i < ids.size(); i += 2) {
    EXPECT_EQ(out.get(ids[i]).finish, FinishReason::error) << i;
    EXPECT_NE(out.error(ids[i]).find("instance 'a' stopped"), std::string::npos) << out.error(ids[i]);
  }
  EXPECT_FALSE((*cluster)->instance_stats()[0].serving);

  auto again = Node::start(node_options(topo, "a", "127.0.0.1:" + std::to_string(port)));
  ASSERT_TRUE(again.has_value()) << again.status().to_string();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(*cluster)->instance_stats()[0].serving && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE((*cluster)->instance_stats()[0].serving) << "the watch reconnected";
  for (int i = 0; i < 4; ++i) {
    auto c = (*cluster)->generate(testing::greedy_ids(prompt(60 + i, 8), 4));
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
  }
  EXPECT_EQ((*again)->stats().requests_done, 2u) << "round robin sends every other request to the new node";
}

// What a node that answers after a loss must still serve; anything else is not reconnected.
TEST(NodeWatch, AComebackMustServeTheSameInstanceRoleAndModelAndWithShmBeOnThisHost) {
  const auto info = [](const char* instance, const char* role, const char* arch, int vocab, uint64_t page_bytes,
                        const std::string& host = blob_host_id()) {
    return node_info_msg::build([&](schema::NodeInfo::Builder b) {
      b.setProtocol(kNodeProtocol);
      b.setInstance(instance);
      b.setRole(role);
      b.setArch(arch);
      b.setVocabSize(vocab);
      b.setKvPageBytes(page_bytes);
      b.setHostId(host);
    });
  };
  const auto then = info("a", "both", "llama", 300, 4096);
  EXPECT_EQ(node_mismatch(then.reader(), info("a", "both", "llama", 300, 4096).reader()), "");
  EXPECT_NE(node_mismatch(then.reader(), info("b", "both", "llama", 300, 4096).reader()).find("instance 'b'"),
            std::string::npos);
  EXPECT_NE(node_mismatch(then.reader(), info("a", "decode", "llama", 300, 4096).reader()).find("role decode"),
            std::string::npos);
  EXPECT_NE(node_mismatch(then.reader(), info("a", "both", "qwen3", 300, 4096).reader()).find("another model"),
            std::string::npos);
  EXPECT_NE(node_mismatch(then.reader(), info("a", "both", "llama", 301, 4096).reader()), "");
  EXPECT_NE(node_mismatch(then.reader(), info("a", "both", "llama", 300, 8192).reader()), "");
  // Hand-offs in shared memory: the same node on another host (or /dev/shm) is refused; without
  // them it may move.
  const auto elsewhere = info("a", "both", "llama", 300, 4096, "another-boot-id");
  EXPECT_EQ(node_mismatch(then.reader(), elsewhere.reader()), "");
  EXPECT_NE(node_mismatch(then.reader(), elsewhere.reader(), /*same_host=*/true).find("does not share this process"),
            std::string::npos);
  EXPECT_NE(other_host(elsewhere.reader()).find("set pd.transfer: inline"), std::string::npos);  // the front's start
  EXPECT_EQ(other_host(then.reader()), "");
  EXPECT_EQ(node_mismatch(then.reader(), info("a", "both", "llama", 300, 4096).reader(), /*same_host=*/true), "");
}

// Clear errors: nothing listening, a node serving another instance, a role that disagrees, a
// node asked for an instance the topology lacks, a port in use.
TEST_F(NodeCluster, MisconfigurationsFailClearly) {
  const TopologyConfig topo = topology({"a"});
  auto a = start_node(topo, "a");
  ASSERT_TRUE(a);

  EngineOptions o = testing::test_engine_options(model(), 1);
  o.topology = topology({"a"}, {"127.0.0.1:1"});
  auto missing = Engine::create(o);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.status().code(), StatusCode::io_error);
  EXPECT_NE(missing.status().message().find("no brigade node answers there"), std::string::npos)
      << missing.status().message();

  o.topology = topology({"a"}, {endpoint(*a)});
  o.model_path = (dir_ / "not-here").string();  // the front reads the tokenizer there
  o.topology.model.clear();
  auto no_tokenizer = Engine::create(o);
  ASSERT_FALSE(no_tokenizer.has_value());
  EXPECT_NE(no_tokenizer.status().message().find("its node's model has a tokenizer, but none was found"),
            std::string::npos)
      << no_tokenizer.status().message();
  o.model_path = model();

  o.topology = topology({"x"}, {endpoint(*a)});
  auto other = Engine::create(o);
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.status().message().find("serves instance 'a', not 'x'"), std::string::npos)
      << other.status().message();

  o.topology = topology({"a", "b"}, {endpoint(*a)});
  o.topology.instances[0].role = "decode";
  o.topology.instances[1].role = "prefill";
  auto role = Engine::create(o);
  ASSERT_FALSE(role.has_value());
  EXPECT_NE(role.status().message().find("with role both, the front's topology says decode"), std::string::npos) << role.status().message();

  NodeOptions no = node_options(topo, "nope");
  auto unknown = Node::start(no);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.status().message().find("no instance 'nope' (it has: a)"), std::string::npos)
      << unknown.status().message();
  no.instance = "a";
  no.listen = "";
  auto nowhere = Node::start(no);
  ASSERT_FALSE(nowhere.has_value());
  EXPECT_NE(nowhere.status().message().find("--listen"), std::string::npos) << nowhere.status().message();
  no.listen = endpoint(*a);
  auto taken = Node::start(no);
  ASSERT_FALSE(taken.has_value());
  EXPECT_EQ(taken.status().code(), StatusCode::io_error) << taken.status().to_string();

  // The node is unharmed by all of it.
  auto ok = front({a.get()});
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_TRUE((*ok)->generate(testing::greedy_ids(prompt(3, 6), 4)).has_value());
}

// A node with node_token_file serves only a front that proves the same secret, and proves it back;
// every mismatch fails Engine::create with what to fix, and leaves the node serving.
TEST_F(NodeCluster, ANodeTokenAuthenticatesFrontAndNode) {
  const std::string good = token_file("good", "0123456789abcdef0123456789abcdef");
  const std::string bad = token_file("bad", "fedcba9876543210fedcba9876543210");
  TopologyConfig topo = topology({"a"});
  topo.node_token_file = good;
  auto a = start_node(topo, "a");
  ASSERT_TRUE(a);

  auto none = front({a.get()});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("its node requires authentication; set node_token_file"), std::string::npos)
      << none.status().message();
  auto wrong = front({a.get()}, bad);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.status().message().find("refused the front"), std::string::npos) << wrong.status().message();
  EXPECT_NE(wrong.status().message().find("did not prove the node token"), std::string::npos);

  auto ok = front({a.get()}, good);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  auto c = (*ok)->generate(testing::greedy_ids(prompt(5, 6), 4));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 4u);
  ok->reset();

  // A front with a token does not trust a node without one.
  auto open_node = start_node(topology({"b"}), "b");
  ASSERT_TRUE(open_node);
  auto trusting = front({open_node.get()}, good);
  ASSERT_FALSE(trusting.has_value());
  EXPECT_NE(trusting.status().message().find("its node does not authenticate"), std::string::npos)
      << trusting.status().message();

  // A token file that is too short is refused at start, by either side.
  topo.node_token_file = token_file("short", "abc");
  auto short_node = Node::start(node_options(topo, "a"));
  ASSERT_FALSE(short_node.has_value());
  EXPECT_NE(short_node.status().message().find("use at least 16"), std::string::npos) << short_node.status().message();
}

// Bytes that are not CAF's protocol (a port scanner, a confused client) cost the node one closed
// connection, nothing more.
TEST_F(NodeCluster, GarbageOnTheNodePortIsDropped) {
  auto a = start_node(topology({"a"}), "a");
  ASSERT_TRUE(a);
  for (int round = 0; round < 3; ++round) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(a->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string junk(4096, '\0');
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 131 + round * 17) & 0xff);
    if (round == 2) junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    EXPECT_GT(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::close(fd);
  }
  EXPECT_TRUE(a->serving());
  auto cluster = front({a.get()});
  ASSERT_TRUE(cluster.has_value()) << cluster.status().to_string();
  auto c = (*cluster)->generate(testing::greedy_ids(prompt(4, 6), 5));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 5u);
}

// Real processes: `brigade node` children, one SIGKILLed mid-generation. Its requests end with
// errors (none hangs), the other node's complete, and the front routes to the survivor.
class NodeProcesses : public NodeCluster {
 protected:
  struct Child {
    pid_t pid = -1;
    int port = 0;
  };
  void TearDown() override {
    for (const Child& c : children_) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
    }
    NodeCluster::TearDown();
  }
  // Starts `brigade node` for `instance` of the topology file on a free port and reads the port
  // from its first line.
  Child spawn(const std::string& topology_file, const std::string& instance) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    const std::string bin = std::string(BRIGADE_BINARY_DIR) + "/tools/brigade";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::execl(bin.c_str(), bin.c_str(), "node", "--topology", topology_file.c_str(), "--instance", instance.c_str(),
              "--listen", "127.0.0.1:0", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    Child c;
    c.pid = pid;
    children_.push_back(c);
    FILE* f = ::fdopen(out[0], "r");
    char line[512] = {};
    if (f && std::fgets(line, sizeof line, f)) std::sscanf(line, "node 127.0.0.1:%d", &c.port);
    if (f) std::fclose(f);
    EXPECT_GT(c.port, 0) << "brigade node printed: " << line;
    children_.back().port = c.port;
    return c;
  }
  // Writes `instances` (YAML list items) under this test's model into NAME in the test's
  // directory (with `extra` top-level lines) and starts a node for each of `names` from it.
  std::vector<Child> spawn_nodes(const std::string& name, const std::string& extra, const std::string& instances,
                                 const std::vector<std::string>& names) {
    const std::string file = (dir_ / name).string();
    std::ofstream(file) << "model: " << model() << "\n" << extra << "instances:\n" << instances;
    std::vector<Child> out;
    for (const auto& n : names) out.push_back(spawn(file, n));
    return out;
  }
  static std::vector<std::string> endpoints(const std::vector<Child>& nodes) {
    std::vector<std::string> out;
    for (const Child& c : nodes) out.push_back("127.0.0.1:" + std::to_string(c.port));
    return out;
  }
  std::vector<Child> children_;
};

// Real processes with pd.transfer shm: the prefill process's segments are mapped by the decode
// process (the bytes never pass through the front), tokens equal a local instance's, and when the
// nodes exit no segment of theirs is left.
TEST_F(NodeProcesses, PrefillAndDecodeProcessesShareKvPagesThroughSharedMemory) {
  const auto nodes = spawn_nodes(
      "pd_shm.yaml", "pd: {transfer: shm}\n",
      "  - {name: p, role: prefill, executors: [{threads: 1}], kv: {memory_mb: 16}, scheduler: {max_step_tokens: 32}}\n"
      "  - {name: d, role: decode, executors: [{threads: 1}], kv: {memory_mb: 16}, scheduler: {max_step_tokens: 32}}\n",
      {"p", "d"});
  const Child &p = nodes[0], &d = nodes[1];
  ASSERT_TRUE(p.port > 0 && d.port > 0);
  TopologyConfig topo = topology({"p", "d"}, endpoints(nodes));
  topo.instances[0].role = "prefill";
  topo.instances[1].role = "decode";
  topo.pd.transfer = "shm";
  auto e = engine(topo);
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  auto local = local_engine();
  ASSERT_TRUE(local.has_value());
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(testing::greedy_ids(prompt(80 + i, 40 + 9 * i), 10));
  reqs.push_back(seeded(prompt(90, 33), 10, 5));
  EXPECT_EQ(testing::generate_all(**e, reqs), testing::generate_all(**local, reqs));
  const auto per = (*e)->instance_stats();
  EXPECT_EQ(per[1].stats.pd_transfers_in, reqs.size());
  EXPECT_EQ(per[1].stats.pd_shm_transfers_in, reqs.size());
  EXPECT_EQ(per[1].stats.pd_import_failures, 0u);
  EXPECT_EQ(segments_of(p.pid), 0u) << "the decode process took every segment";
  for (const Child& c : children_) {
    ASSERT_EQ(::kill(c.pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(c.pid, &status, 0), c.pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  children_.clear();
  EXPECT_EQ(segments_of(p.pid) + segments_of(d.pid), 0u);
}

TEST_F(NodeProcesses, ANodeKilledMidGenerationFailsOnlyItsRequests) {
  const auto nodes = spawn_nodes("cluster.yaml", "",
                                 "  - {name: a, executors: [{threads: 1}], kv: {memory_mb: 16}}\n"
                                 "  - {name: b, executors: [{threads: 1}], kv: {memory_mb: 16}}\n",
                                 {"a", "b"});
  const Child a = nodes[0], b = nodes[1];
  ASSERT_TRUE(a.port > 0 && b.port > 0);
  auto e = engine(topology({"a", "b"}, endpoints(nodes)));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  Outcomes out;
  const auto ids = submit_long(**e, 4, 1200, out);  // round robin: even positions on a, odd on b
  ASSERT_EQ(ids.size(), 4u);
  ASSERT_TRUE(wait_routed(**e, 4));
  // Frozen as soon as its requests are routed (it cannot have decoded their 1200 tokens in the
  // poll's 2 ms), then killed: on a fast or idle machine a 100 ms pause let the tiny model finish
  // them first, and the test then saw no request to fail.
  ASSERT_EQ(::kill(a.pid, SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::kill(a.pid, SIGKILL), 0);
  ASSERT_TRUE(out.wait(ids.size())) << "every request ends, none hangs";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(out.get(ids[i]).finish, FinishReason::error) << "a's request " << i;
      EXPECT_NE(out.error(ids[i]).find("instance 'a' stopped"), std::string::npos) << out.error(ids[i]);
    } else {
      EXPECT_EQ(out.get(ids[i]).finish, FinishReason::length) << "b serves on: " << out.error(ids[i]);
      EXPECT_EQ(out.get(ids[i]).token_ids.size(), 1200u);
    }
  }
  const auto per = (*e)->instance_stats();
  EXPECT_FALSE(per[0].serving);
  EXPECT_TRUE(per[1].serving);
  EXPECT_EQ(per[1].stats.requests_done, 2u);
  for (int i = 0; i < 3; ++i) {
    auto c = (*e)->generate(testing::greedy_ids(prompt(50 + i, 8), 4));
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    EXPECT_EQ(c->finish, FinishReason::length);
  }
  // SIGTERM ends the other node cleanly.
  ASSERT_EQ(::kill(b.pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(b.pid, &status, 0), b.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  children_.pop_back();
}

// A free TCP port of 127.0.0.1 (bound, then released for a node to bind).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// --launch-nodes (actors/node/node_launcher.h): the front starts a node process per remote
// instance and serves through them; a node SIGKILLed mid-run is started again by the launcher and
// the front's watch routes to it again; the launcher's end stops every node.
TEST_F(NodeCluster, LaunchedNodesServeAndOneThatDiesIsStartedAgain) {
  const std::string a = "127.0.0.1:" + std::to_string(free_port()), b = "127.0.0.1:" + std::to_string(free_port());
  const std::string file = (dir_ / "launch.yaml").string();
  std::ofstream(file) << "model: " << model() << "\ninstances:\n"
                      << "  - {name: a, remote: '" << a << "', executors: [{threads: 1}], kv: {memory_mb: 16}, "
                      << "scheduler: {max_step_tokens: 32}}\n"
                      << "  - {name: b, remote: '" << b << "', executors: [{threads: 1}], kv: {memory_mb: 16}, "
                      << "scheduler: {max_step_tokens: 32}}\n";
  auto topo = load_topology_file(file);
  ASSERT_TRUE(topo.has_value()) << topo.status().to_string();
  LaunchOptions lo;
  lo.brigade = std::string(BRIGADE_BINARY_DIR) + "/tools/brigade";
  lo.topology_file = file;
  auto launcher = NodeLauncher::start(*topo, lo);
  ASSERT_TRUE(launcher.has_value()) << launcher.status().to_string();
  auto launched = (*launcher)->nodes();
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_EQ(launched[0].instance, "a");
  EXPECT_EQ(launched[1].endpoint, b);
  const pid_t first_a = launched[0].pid, first_b = launched[1].pid;
  ASSERT_GT(first_a, 0);
  ASSERT_GT(first_b, 0);

  auto front = engine(topology({"a", "b"}, {a, b}));
  ASSERT_TRUE(front.has_value()) << front.status().to_string();
  auto local = local_engine();
  ASSERT_TRUE(local.has_value());
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(testing::greedy_ids(prompt(100 + i, 12 + 3 * i), 6));
  EXPECT_EQ(testing::generate_all(**front, reqs), testing::generate_all(**local, reqs));

  ASSERT_EQ(::kill(first_a, SIGKILL), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    launched = (*launcher)->nodes();
    if (launched[0].restarts == 1 && launched[0].pid > 0 && (*front)->instance_stats()[0].serving) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(launched[0].restarts, 1);
  EXPECT_NE(launched[0].pid, first_a);
  EXPECT_EQ(launched[1].pid, first_b) << "b was not touched";
  ASSERT_TRUE((*front)->instance_stats()[0].serving) << "the watch reconnected to the new node";
  const uint64_t done_before = (*front)->instance_stats()[0].stats.requests_done;
  EXPECT_EQ(testing::generate_all(**front, reqs), testing::generate_all(**local, reqs));
  EXPECT_GT((*front)->instance_stats()[0].stats.requests_done, done_before) << "a serves again";

  const pid_t second_a = launched[0].pid;
  front->reset();
  launcher->reset();
  for (pid_t pid : {second_a, first_b}) EXPECT_NE(::kill(pid, 0), 0) << "stopped and reaped: " << pid;
}

TEST_F(NodeCluster, LaunchingRefusesWhatItCannotStartAndLeavesNothingRunning) {
  LaunchOptions lo;
  lo.brigade = std::string(BRIGADE_BINARY_DIR) + "/tools/brigade";
  lo.topology_file = (dir_ / "refused.yaml").string();
  const auto error = [&](const std::string& yaml, const LaunchOptions& opts) {
    std::ofstream(opts.topology_file) << yaml;
    auto topo = load_topology_file(opts.topology_file);
    EXPECT_TRUE(topo.has_value()) << topo.status().to_string();
    if (!topo) return std::string();
    auto l = NodeLauncher::start(*topo, opts);
    return l.has_value() ? std::string("(started)") : l.status().message();
  };
  EXPECT_NE(error("instances: [{name: a}]\n", lo).find("no remote instance"), std::string::npos);
  EXPECT_NE(error("instances: [{name: a, remote: '10.1.2.3:7000'}]\n", lo).find("on this host only"),
            std::string::npos);
  LaunchOptions missing = lo;
  missing.brigade = (dir_ / "no-such-brigade").string();
  EXPECT_NE(error("instances: [{name: a, remote: '127.0.0.1:7000'}]\n", missing).find("is not there"),
            std::string::npos);
  // A node that cannot load its model exits: the error says so, with the node's own words.
  LaunchOptions bad_model = lo;
  bad_model.node_args = {"--model", (dir_ / "no-such-model").string()};
  const std::string port = std::to_string(free_port());
  const std::string why = error("instances: [{name: a, remote: '127.0.0.1:" + port + "'}, {name: b, remote: '127.0.0.1:" +
                                    std::to_string(free_port()) + "'}]\n",
                                bad_model);
  EXPECT_NE(why.find("node 'a'"), std::string::npos) << why;
  EXPECT_NE(why.find("exited before it listened"), std::string::npos) << why;
  EXPECT_NE(why.find("no-such-model"), std::string::npos) << "the node's own error: " << why;
}

}  // namespace
}  // namespace brigade
