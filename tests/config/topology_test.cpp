#include "brigade/topology.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace brigade {
namespace {

TEST(Topology, DefaultIsOneCpuExecutor) {
  TopologyConfig t = default_topology();
  ASSERT_TRUE(t.validate().is_ok());
  ASSERT_EQ(t.instances.size(), 1u);
  ASSERT_EQ(t.instances[0].executors.size(), 1u);
  EXPECT_EQ(t.instances[0].executors[0].device, "cpu");
}

TEST(Topology, ShippedDefaultFileParsesToTheDefault) {
  std::ifstream in(std::string(BRIGADE_SOURCE_DIR) + "/config/default.yaml");
  ASSERT_TRUE(in) << "config/default.yaml";
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = parse_topology(ss.str());
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  const TopologyConfig def = default_topology();  // not a reference into a temporary
  const auto& d = def.instances[0];
  const auto& p = t->instances[0];
  EXPECT_EQ(p.scheduler.max_running, d.scheduler.max_running);
  EXPECT_EQ(p.scheduler.max_step_tokens, d.scheduler.max_step_tokens);
  EXPECT_EQ(p.kv.page_size, d.kv.page_size);
  EXPECT_EQ(p.kv.memory_mb, d.kv.memory_mb);
  EXPECT_EQ(p.cache.host_bytes, d.cache.host_bytes);
  EXPECT_EQ(p.cache.disk_path, d.cache.disk_path);
  EXPECT_EQ(p.cache.disk_bytes, d.cache.disk_bytes);
  EXPECT_EQ(p.cache.write_policy, d.cache.write_policy);
  EXPECT_EQ(p.cache.state_snapshots, d.cache.state_snapshots);
  EXPECT_EQ(p.scheduler.speculative.method, d.scheduler.speculative.method);
  EXPECT_EQ(p.scheduler.speculative.num_tokens, d.scheduler.speculative.num_tokens);
  EXPECT_EQ(p.scheduler.speculative.ngram_max, d.scheduler.speculative.ngram_max);
  EXPECT_EQ(p.scheduler.speculative.min_acceptance, d.scheduler.speculative.min_acceptance);
}

TEST(Topology, CacheTiersAreOffUntilADiskPathIsNamed) {
  const CacheConfig off = default_topology().instances[0].cache;
  EXPECT_FALSE(off.tiers_enabled());
  EXPECT_EQ(off.effective_host_bytes(), 0);

  auto t = parse_topology("instances: [{cache: {disk_path: /var/cache/brigade, write_policy: write_back}}]");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  const CacheConfig& c = t->instances[0].cache;
  EXPECT_TRUE(c.tiers_enabled());
  EXPECT_EQ(c.effective_host_bytes(), CacheConfig::default_host_bytes_with_disk) << "auto host tier with a disk";
  EXPECT_EQ(c.write_policy, "write_back");

  auto host_only = parse_topology("instances: [{cache: {host_bytes: 1048576}}]");
  ASSERT_TRUE(host_only.has_value());
  EXPECT_TRUE(host_only->instances[0].cache.tiers_enabled());
  EXPECT_EQ(host_only->instances[0].cache.effective_host_bytes(), 1048576);

  auto disk_only = parse_topology("instances: [{cache: {host_bytes: 0, disk_path: /d, disk_bytes: 4096}}]");
  ASSERT_TRUE(disk_only.has_value());
  EXPECT_TRUE(disk_only->instances[0].cache.tiers_enabled());
  EXPECT_EQ(disk_only->instances[0].cache.effective_host_bytes(), 0);
  EXPECT_EQ(disk_only->instances[0].cache.disk_bytes, 4096);

  auto explicit_auto = parse_topology("instances: [{cache: {host_bytes: auto}}]");
  ASSERT_TRUE(explicit_auto.has_value());
  EXPECT_FALSE(explicit_auto->instances[0].cache.tiers_enabled());
}

TEST(Topology, CacheErrorsSayWhatIsValid) {
  auto policy = parse_topology("instances: [{cache: {write_policy: lazy}}]");
  ASSERT_FALSE(policy.has_value());
  EXPECT_NE(policy.status().message().find("write_back, write_through"), std::string::npos) << policy.status().message();
  auto key = parse_topology("instances: [{cache: {disk_size: 5}}]");
  ASSERT_FALSE(key.has_value());
  EXPECT_NE(key.status().message().find("disk_bytes"), std::string::npos) << key.status().message();
  EXPECT_FALSE(parse_topology("instances: [{cache: {host_bytes: -5}}]").has_value());
  EXPECT_FALSE(parse_topology("instances: [{cache: {host_bytes: lots}}]").has_value());
  // A recurrent model's state snapshots: a count, or auto.
  auto snaps = parse_topology("instances: [{cache: {state_snapshots: 12}}]");
  ASSERT_TRUE(snaps.has_value());
  EXPECT_EQ(snaps->instances[0].cache.state_snapshots, 12);
  auto snaps_auto = parse_topology("instances: [{cache: {state_snapshots: auto}}]");
  ASSERT_TRUE(snaps_auto.has_value());
  EXPECT_EQ(snaps_auto->instances[0].cache.state_snapshots, CacheConfig::kAuto);
  auto negative = parse_topology("instances: [{cache: {state_snapshots: -3}}]");
  ASSERT_FALSE(negative.has_value());
  EXPECT_NE(negative.status().message().find("state_snapshots"), std::string::npos) << negative.status().message();
  EXPECT_FALSE(parse_topology("instances: [{cache: {disk_path: /d, disk_bytes: 0}}]").has_value());
}

TEST(Topology, ParsesValues) {
  auto t = parse_topology(R"(
model: /models/x
instances:
  - name: a
    scheduler: {max_running: 8, max_step_tokens: 256}
    kv: {page_size: 32, pages: 100, dtype: bf16}
    executors: [{device: cpu, threads: 2}]
)");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->model, "/models/x");
  EXPECT_EQ(t->instances[0].scheduler.max_running, 8);
  EXPECT_EQ(t->instances[0].kv.page_size, 32);
  EXPECT_EQ(t->instances[0].kv.pages, 100);
  EXPECT_EQ(t->instances[0].executors[0].threads, 2);
}

TEST(Topology, MaxModelLenKey) {
  auto t = parse_topology("instances: [{scheduler: {max_model_len: 4096}}]");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->instances[0].scheduler.max_model_len, 4096);
  EXPECT_EQ(default_topology().instances[0].scheduler.max_model_len, 0) << "0: the model's positions";
  auto bad = parse_topology("instances: [{scheduler: {max_model_len: -1}}]");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("scheduler.max_model_len must be >= 0"), std::string::npos);
}

// kv.memory_fraction (vLLM's --gpu-memory-utilization): 0 (kv.memory_mb) unless the file says;
// outside [0, 1] refused.
TEST(Topology, KvMemoryFractionKey) {
  EXPECT_EQ(default_topology().instances[0].kv.memory_fraction, 0.0);
  auto t = parse_topology("instances: [{kv: {memory_fraction: 0.85}}]");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_DOUBLE_EQ(t->instances[0].kv.memory_fraction, 0.85);
  for (const char* bad : {"1.5", "-0.1"}) {
    auto r = parse_topology(std::string("instances: [{kv: {memory_fraction: ") + bad + "}}]");
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.status().message().find("kv.memory_fraction must be in (0, 1]"), std::string::npos) << r.status().message();
  }
}

// executor.cuda_graphs (vLLM's --enforce-eager sets it false): on unless the file says.
TEST(Topology, CudaGraphsKey) {
  EXPECT_TRUE(default_topology().instances[0].executors[0].cuda_graphs);
  auto t = parse_topology("instances: [{executors: [{device: cpu, cuda_graphs: false}]}]");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_FALSE(t->instances[0].executors[0].cuda_graphs);
  auto bad = parse_topology("instances: [{executors: [{cuda_graphs: sometimes}]}]");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("cuda_graphs"), std::string::npos) << bad.status().message();
}

TEST(Topology, TensorParallelKey) {
  EXPECT_EQ(default_topology().instances[0].executors[0].tp, 1);
  auto t = parse_topology("instances: [{executors: [{device: cpu, threads: 1, tp: 4}]}]");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->instances[0].executors[0].tp, 4);
  for (const char* bad : {"0", "-2", "65"}) {
    auto r = parse_topology(std::string("instances: [{executors: [{tp: ") + bad + "}]}]");
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.status().message().find("tp must be in [1, 64]"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(parse_topology("instances: [{executors: [{tp: two}]}]").has_value());
  EXPECT_FALSE(t->instances[0].executors[0].expert_parallel);
  auto ep = parse_topology("instances: [{executors: [{tp: 2, expert_parallel: true}]}]");
  ASSERT_TRUE(ep.has_value()) << ep.status().to_string();
  EXPECT_TRUE(ep->instances[0].executors[0].expert_parallel);
  EXPECT_FALSE(parse_topology("instances: [{executors: [{tp: 2, expert_parallel: sometimes}]}]").has_value());
  // The cache tiers move every rank's part of a page (executor_actor.h).
  auto tiers = parse_topology("instances: [{cache: {radix: true, host_bytes: 1000000}, executors: [{tp: 2}]}]");
  EXPECT_TRUE(tiers.has_value()) << tiers.status().to_string();
}

TEST(Topology, DevicesAndStepPaths) {
  auto t = parse_topology("instances: [{executors: [{device: 'cuda:1', step_path: host}]}]");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->instances[0].executors[0].device, "cuda:1");
  EXPECT_EQ(t->instances[0].executors[0].step_path, "host");
  EXPECT_EQ(default_topology().instances[0].executors[0].step_path, "auto");
  EXPECT_TRUE(parse_topology("instances: [{executors: [{device: cuda, step_path: device}]}]").has_value());
  EXPECT_TRUE(parse_device("cuda")->cuda);
  EXPECT_EQ(parse_device("cuda:12")->index, 12);
  EXPECT_FALSE(parse_device("cpu")->cuda);
  for (const char* bad : {"cuda:", "cuda:-1", "cuda:x", "cuda:123456", "CUDA", "cuda0"}) {
    auto d = parse_device(bad);
    ASSERT_FALSE(d.has_value()) << bad;
    EXPECT_NE(d.status().message().find("cpu, cuda, cuda:N"), std::string::npos) << d.status().message();
  }
  auto path = parse_topology("instances: [{executors: [{step_path: gpu}]}]");
  ASSERT_FALSE(path.has_value());
  EXPECT_NE(path.status().message().find("auto, device, host"), std::string::npos) << path.status().message();
  // One GPU per rank (cuda:N takes GPUs N..N+tp-1); the engine joins them with NCCL.
  auto tp = parse_topology("instances: [{executors: [{device: 'cuda:2', tp: 2}]}]");
  ASSERT_TRUE(tp.has_value()) << tp.status().to_string();
  EXPECT_EQ(tp->instances[0].executors[0].tp, 2);
  auto tp_device = parse_topology("instances: [{executors: [{device: cuda, tp: 2, step_path: device}]}]");
  ASSERT_FALSE(tp_device.has_value());
  EXPECT_EQ(tp_device.status().code(), StatusCode::unsupported);
  EXPECT_NE(tp_device.status().message().find("step_path: device needs tp: 1"), std::string::npos)
      << tp_device.status().message();
}

TEST(Topology, WeightsKey) {
  EXPECT_EQ(default_topology().instances[0].executors[0].weights, "auto");
  for (const char* w : {"auto", "f32", "bf16", "fp8", "q8_0", "q4_0", "q4_1", "mxfp4"}) {
    auto t = parse_topology(std::string("instances: [{executors: [{device: cuda, weights: ") + w + "}]}]");
    ASSERT_TRUE(t.has_value()) << w << ": " << t.status().to_string();
    EXPECT_EQ(t->instances[0].executors[0].weights, w);
  }
  // Whether the backend runs fp8 (q8_0) is the load's question (LoadOptions), not the topology's.
  EXPECT_TRUE(parse_topology("instances: [{executors: [{weights: fp8}]}]").has_value());
  for (const char* bad : {"f8e4m3", "int8", "FP8", "q4_k", "Q8_0", "f16"}) {
    auto t = parse_topology(std::string("instances: [{executors: [{weights: ") + bad + "}]}]");
    ASSERT_FALSE(t.has_value()) << bad;
    EXPECT_NE(t.status().message().find("is not one of: auto, bf16, f32, fp8, mxfp4, q4_0, q4_1, q8_0"), std::string::npos)
        << t.status().message();
  }
}

TEST(Topology, RooflineKey) {
  EXPECT_TRUE(default_topology().instances[0].executors[0].roofline) << "ceilings are measured unless turned off";
  auto off = parse_topology("instances: [{executors: [{roofline: false}]}]");
  ASSERT_TRUE(off.has_value()) << off.status().to_string();
  EXPECT_FALSE(off->instances[0].executors[0].roofline);
  auto bad = parse_topology("instances: [{executors: [{roofline: sometimes}]}]");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("roofline has the wrong type"), std::string::npos) << bad.status().message();
}

TEST(Topology, SpeculativeKeys) {
  EXPECT_EQ(default_topology().instances[0].scheduler.speculative.method, "none") << "off by default";
  auto on = parse_topology(
      "instances: [{scheduler: {speculative: {method: ngram, num_tokens: 6, ngram_min: 2, ngram_max: 4, "
      "min_acceptance: 0.3, disable_batch_size: 16}}}]");
  ASSERT_TRUE(on.has_value()) << on.status().to_string();
  const SpeculativeConfig& sp = on->instances[0].scheduler.speculative;
  EXPECT_EQ(sp.method, "ngram");
  EXPECT_EQ(sp.num_tokens, 6);
  EXPECT_EQ(sp.ngram_min, 2);
  EXPECT_EQ(sp.ngram_max, 4);
  EXPECT_DOUBLE_EQ(sp.min_acceptance, 0.3);
  EXPECT_EQ(sp.disable_batch_size, 16);
  const auto refused = [](const std::string& block, const std::string& says) {
    auto t = parse_topology("instances: [{scheduler: {speculative: {" + block + "}}}]");
    ASSERT_FALSE(t.has_value()) << block;
    EXPECT_NE(t.status().message().find(says), std::string::npos) << t.status().message();
  };
  refused("method: medusa", "ngram, none");
  refused("method: ngram, num_tokens: 0", "num_tokens must be in [1, 16]");
  refused("method: ngram, num_tokens: 17", "num_tokens must be in [1, 16]");
  refused("method: ngram, ngram_min: 0", "ngram_min must be >= 1");
  refused("method: ngram, ngram_min: 3, ngram_max: 2", "ngram_max must be >= ngram_min");
  refused("method: ngram, min_acceptance: 1.5", "min_acceptance must be in [0, 1]");
  refused("method: ngram, disable_batch_size: -1", "disable_batch_size must be >= 0");
  refused("method: ngram, k: 4", "valid keys");
  refused("method: draft_model", "model must name the draft checkpoint");
  refused("method: ngram, model: /m", "model is the draft checkpoint of method draft_model");
  refused("method: draft_model, model: /m, kv_tokens: -1", "kv_tokens must be >= 0");
  refused("method: draft_model, model: /m, num_tokens: 17", "num_tokens must be in [1, 16]");

  auto draft = parse_topology(
      "instances: [{scheduler: {speculative: {method: draft_model, model: /models/small, num_tokens: 3, "
      "kv_tokens: 4096}}}]");
  ASSERT_TRUE(draft.has_value()) << draft.status().to_string();
  const SpeculativeConfig& dm = draft->instances[0].scheduler.speculative;
  EXPECT_EQ(dm.method, "draft_model");
  EXPECT_EQ(dm.model, "/models/small");
  EXPECT_EQ(dm.num_tokens, 3);
  EXPECT_EQ(dm.kv_tokens, 4096);

  refused("method: mtp, model: /m", "model is the draft checkpoint of method draft_model");
  refused("method: eagle3", "model must name the EAGLE-3 head's directory");
  auto eagle3 = parse_topology("instances: [{scheduler: {speculative: {method: eagle3, model: /m/head, num_tokens: 3}}}]");
  ASSERT_TRUE(eagle3.has_value()) << eagle3.status().to_string();
  EXPECT_EQ(eagle3->instances[0].scheduler.speculative.method, "eagle3");
  EXPECT_EQ(eagle3->instances[0].scheduler.speculative.model, "/m/head");
  refused("method: mtp, num_tokens: 0", "num_tokens must be in [1, 16]");
  auto mtp = parse_topology("instances: [{scheduler: {speculative: {method: mtp, num_tokens: 2}}}]");
  ASSERT_TRUE(mtp.has_value()) << mtp.status().to_string();
  EXPECT_EQ(mtp->instances[0].scheduler.speculative.method, "mtp");
  EXPECT_EQ(mtp->instances[0].scheduler.speculative.num_tokens, 2);
}

// vLLM's --speculative-config JSON over the topology's speculative block.
TEST(Topology, SpeculativeConfigJson) {
  SpeculativeConfig sp;
  ASSERT_TRUE(parse_speculative_json(R"({"method": "deepseek_mtp", "num_speculative_tokens": 2})", sp).is_ok());
  EXPECT_EQ(sp.method, "mtp");
  EXPECT_EQ(sp.num_tokens, 2);
  sp = {};
  ASSERT_TRUE(parse_speculative_json(R"({"method": "glm4_moe_mtp", "num_speculative_tokens": 1})", sp).is_ok());
  EXPECT_EQ(sp.method, "mtp") << "vLLM's name for GLM-4.5's module";
  sp = {};
  ASSERT_TRUE(parse_speculative_json(R"({"method": "glm4_moe_lite_mtp", "num_speculative_tokens": 1})", sp).is_ok());
  EXPECT_EQ(sp.method, "mtp") << "vLLM's name for GLM-4.7-Flash's module";
  sp = {};
  ASSERT_TRUE(parse_speculative_json(R"({"model": "/m/draft", "num_speculative_tokens": 5, "kv_tokens": 64})", sp).is_ok());
  EXPECT_EQ(sp.method, "draft_model") << "a model without a method is a draft model, as in vLLM";
  EXPECT_EQ(sp.model, "/m/draft");
  EXPECT_EQ(sp.kv_tokens, 64);
  sp = {};
  ASSERT_TRUE(parse_speculative_json(R"({"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4,
                                         "disable_by_batch_size": 8, "min_acceptance": 0.5})", sp).is_ok());
  EXPECT_EQ(sp.ngram_min, 2);
  EXPECT_EQ(sp.ngram_max, 4);
  EXPECT_EQ(sp.disable_batch_size, 8);
  EXPECT_EQ(sp.min_acceptance, 0.5);
  const auto refused = [](const std::string& text, const std::string& says) {
    SpeculativeConfig c;
    const Status st = parse_speculative_json(text, c);
    EXPECT_FALSE(st.is_ok()) << text;
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  refused("{", "not JSON");
  refused("[1]", "must be a JSON object");
  refused(R"({"method": "eagle"})", "method 'eagle' is not one of");
  sp = {};
  ASSERT_TRUE(parse_speculative_json(R"({"method": "eagle3", "model": "/m/head", "num_speculative_tokens": 3})", sp).is_ok());
  EXPECT_EQ(sp.method, "eagle3") << "vLLM's EAGLE-3 head";
  EXPECT_EQ(sp.model, "/m/head");
  // Without a method vLLM reads the model's name: "eagle3" in it is EAGLE-3, "eagle-" EAGLE-1/2.
  for (const char* name : {"/m/RedHatAI/Qwen3-8B-speculator.eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                           "AngelSlim/Qwen3-8B_eagle3"}) {
    sp = {};
    ASSERT_TRUE(parse_speculative_json(std::string(R"({"num_speculative_tokens": 3, "model": ")") + name + "\"}", sp).is_ok());
    EXPECT_EQ(sp.method, "eagle3") << name;
  }
  refused(R"({"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3})", "EAGLE-1/2 head");
  refused(R"({"method": "mtp", "k": 2})", "unknown key 'k'");
  refused(R"({"method": "mtp", "num_speculative_tokens": "2"})", "'num_speculative_tokens' has the wrong type");
  refused(R"({"num_speculative_tokens": 2})", "needs a method");
}

TEST(Topology, ErrorsListValidChoices) {
  auto unknown = parse_topology("instances: [{schedular: {}}]");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.status().message().find("schedular"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("scheduler"), std::string::npos) << "lists the valid keys";

  auto dtype = parse_topology("instances: [{kv: {dtype: f8}}]");
  ASSERT_FALSE(dtype.has_value());
  EXPECT_NE(dtype.status().message().find("bf16"), std::string::npos);
  EXPECT_NE(dtype.status().message().find("int8"), std::string::npos);
  auto int8 = parse_topology("instances: [{kv: {dtype: int8}}]");
  ASSERT_TRUE(int8.has_value()) << int8.status().to_string();
  EXPECT_EQ(int8->instances[0].kv.dtype, "int8");

  auto device = parse_topology("instances: [{executors: [{device: tpu}]}]");
  ASSERT_FALSE(device.has_value());
  EXPECT_NE(device.status().message().find("cpu"), std::string::npos);

  EXPECT_FALSE(parse_topology("instances: [{scheduler: {max_running: many}}]").has_value());
  EXPECT_FALSE(parse_topology("instances: [{scheduler: {max_running: 0}}]").has_value());
  EXPECT_FALSE(parse_topology("{ unbalanced").has_value());
  EXPECT_FALSE(load_topology_file("/nonexistent.yaml").has_value());
}

TEST(Topology, SeveralInstancesAndTheRouter) {
  auto t = parse_topology(R"(
instances:
  - name: a
    kv: {pages: 64}
  - name: b
    executors: [{device: cpu, threads: 2}]
router: {policy: round_robin, cache_threshold: 0.5, balance_abs_threshold: 4, balance_rel_threshold: 2, max_tree_tokens: 1000}
)");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_EQ(t->instances.size(), 2u);
  EXPECT_EQ(t->instances[0].name, "a");
  EXPECT_EQ(t->instances[0].kv.pages, 64);
  EXPECT_EQ(t->instances[1].executors[0].threads, 2);
  EXPECT_EQ(t->router.policy, "round_robin");
  EXPECT_DOUBLE_EQ(t->router.cache_threshold, 0.5);
  EXPECT_EQ(t->router.balance_abs_threshold, 4);
  EXPECT_DOUBLE_EQ(t->router.balance_rel_threshold, 2.0);
  EXPECT_EQ(t->router.max_tree_tokens, 1000);

  const RouterConfig def;  // SGLang's router defaults
  EXPECT_EQ(def.policy, "cache_aware");
  EXPECT_DOUBLE_EQ(def.cache_threshold, 0.3);
  EXPECT_EQ(def.balance_abs_threshold, 64);
  EXPECT_DOUBLE_EQ(def.balance_rel_threshold, 1.5);
}

TEST(Topology, ShippedTwoInstanceFileParses) {
  auto t = load_topology_file(std::string(BRIGADE_SOURCE_DIR) + "/config/two_cpu_instances.yaml");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_EQ(t->instances.size(), 2u);
  EXPECT_NE(t->instances[0].name, t->instances[1].name);
  EXPECT_EQ(t->router.policy, "cache_aware");
}

TEST(Topology, ShippedPdFileParses) {
  auto t = load_topology_file(std::string(BRIGADE_SOURCE_DIR) + "/config/pd_cpu.yaml");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_EQ(t->instances.size(), 2u);
  EXPECT_EQ(t->instances[0].role, "prefill");
  EXPECT_EQ(t->instances[1].role, "decode");
  EXPECT_EQ(t->pd.transfer, "auto");
  EXPECT_TRUE(t->pd_separated());
  EXPECT_FALSE(default_topology().pd_separated());
}

TEST(Topology, ShippedClusterFileParses) {
  auto t = load_topology_file(std::string(BRIGADE_SOURCE_DIR) + "/config/two_cpu_nodes.yaml");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_EQ(t->instances.size(), 2u);
  EXPECT_EQ(t->instances[0].remote, "127.0.0.1:7101");
  EXPECT_EQ(t->instances[1].remote, "127.0.0.1:7102");
  EXPECT_EQ(t->instances[1].executors.front().threads, 1);
}

TEST(Topology, PdErrorsSayWhatIsWrong) {
  const auto error = [](const std::string& yaml) {
    auto t = parse_topology(yaml);
    return t ? std::string("(parsed)") : t.status().message();
  };
  EXPECT_NE(error("instances: [{name: a, role: prefil}]").find("not one of: both, decode, prefill"), std::string::npos);
  EXPECT_NE(error("instances: [{name: a, role: prefill}]").find("at least one prefill and one decode"),
            std::string::npos);
  EXPECT_NE(error("instances: [{name: a, role: decode}, {name: b, role: decode}]").find("0 prefill and 2 decode"),
            std::string::npos);
  EXPECT_NE(error("instances: [{name: a, role: prefill}, {name: b, role: decode}, {name: c}]").find("role both"),
            std::string::npos);
  EXPECT_NE(error("instances: [{name: a, role: prefill}, {name: b, role: decode, kv: {page_size: 8}}]")
                .find("one KV layout"),
            std::string::npos);
  EXPECT_NE(error("instances: [{name: a, role: prefill}, {name: b, role: decode, kv: {dtype: int8}}]")
                .find("one KV layout"),
            std::string::npos);
  // tp may differ between PD instances as far as the file goes; the engine compares the loaded
  // page layouts (a latent cache is the same at any tp).
  EXPECT_EQ(error("instances: [{name: a, role: prefill, executors: [{tp: 2}]}, {name: b, role: decode}]"), "(parsed)");
  EXPECT_NE(error("instances: [{name: a, role: prefill}, {name: b, role: decode}]\npd: {transfer: nfs}")
                .find("not one of: auto, inline, local, shm"),
            std::string::npos);
  EXPECT_EQ(error("instances: [{name: a, role: prefill}, {name: b, role: decode}]\npd: {transfer: inline}"), "(parsed)");
  EXPECT_EQ(error("instances: [{name: a, role: prefill}, {name: b, role: decode}]\npd: {transfer: shm}"), "(parsed)");
}

TEST(Topology, InstanceAndRouterErrorsSayWhatIsValid) {
  auto same = parse_topology("instances: [{name: a}, {name: a}]");
  ASSERT_FALSE(same.has_value());
  EXPECT_NE(same.status().message().find("unique"), std::string::npos) << same.status().message();
  auto unnamed = parse_topology("instances: [{}, {}]");  // both default to "main"
  ASSERT_FALSE(unnamed.has_value());
  EXPECT_NE(unnamed.status().message().find("'main'"), std::string::npos) << unnamed.status().message();
  auto label = parse_topology("instances: [{name: \"a b\"}]");
  ASSERT_FALSE(label.has_value());
  EXPECT_NE(label.status().message().find("letters, digits"), std::string::npos) << label.status().message();
  EXPECT_FALSE(parse_topology("instances: [{name: \"\"}]").has_value());
  EXPECT_FALSE(parse_topology("instances: []").has_value());
  // Each instance is validated as a lone one is.
  auto second = parse_topology("instances: [{name: a}, {name: b, kv: {page_size: 0}}]");
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.status().message().find("instances[b]"), std::string::npos) << second.status().message();

  auto policy = parse_topology("instances: [{name: a}, {name: b}]\nrouter: {policy: random}");
  ASSERT_FALSE(policy.has_value());
  EXPECT_NE(policy.status().message().find("cache_aware, least_load, round_robin"), std::string::npos)
      << policy.status().message();
  auto key = parse_topology("router: {threshold: 0.5}");
  ASSERT_FALSE(key.has_value());
  EXPECT_NE(key.status().message().find("cache_threshold"), std::string::npos) << key.status().message();
  EXPECT_FALSE(parse_topology("router: {cache_threshold: 1.5}").has_value());
  EXPECT_FALSE(parse_topology("router: {cache_threshold: -0.1}").has_value());
  EXPECT_TRUE(parse_topology("router: {cache_threshold: 0}").has_value()) << "the edges are valid";
  EXPECT_TRUE(parse_topology("router: {cache_threshold: 1}").has_value());
  EXPECT_FALSE(parse_topology("router: {balance_abs_threshold: -1}").has_value());
  EXPECT_FALSE(parse_topology("router: {balance_rel_threshold: 0.9}").has_value());
  EXPECT_FALSE(parse_topology("router: {max_tree_tokens: 0}").has_value());
  EXPECT_FALSE(parse_topology("router: {policy: [a]}").has_value());
}

TEST(Topology, InstancesDoNotShareAGpuOrADiskTier) {
  auto gpu = parse_topology(R"(instances: [{name: a, executors: [{device: "cuda:0"}]},
                                           {name: b, executors: [{device: cuda}]}])");
  ASSERT_FALSE(gpu.has_value());
  EXPECT_EQ(gpu.status().code(), StatusCode::unsupported);
  EXPECT_NE(gpu.status().message().find("both use GPU 0"), std::string::npos) << gpu.status().message();
  // tp 2 on cuda:0 takes GPUs 0 and 1.
  auto ranks = parse_topology(R"(instances: [{name: a, executors: [{device: "cuda:0", tp: 2}]},
                                             {name: b, executors: [{device: "cuda:1"}]}])");
  ASSERT_FALSE(ranks.has_value());
  EXPECT_NE(ranks.status().message().find("GPU 1"), std::string::npos) << ranks.status().message();
  EXPECT_TRUE(parse_topology(R"(instances: [{name: a, executors: [{device: "cuda:0", tp: 2}]},
                                            {name: b, executors: [{device: "cuda:2"}]},
                                            {name: c, executors: [{device: cpu}]}])")
                  .has_value());
  auto disk = parse_topology("instances: [{name: a, cache: {disk_path: /d}}, {name: b, cache: {disk_path: /d}}]");
  ASSERT_FALSE(disk.has_value());
  EXPECT_NE(disk.status().message().find("disk tier directory of its own"), std::string::npos) << disk.status().message();
}

TEST(Topology, EndpointsAreHostAndPort) {
  auto e = parse_endpoint("127.0.0.1:7001");
  ASSERT_TRUE(e.has_value()) << e.status().message();
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 7001);
  EXPECT_EQ(parse_endpoint("node-3.local:65535")->port, 65535);
  EXPECT_FALSE(parse_endpoint("127.0.0.1:0").has_value());
  EXPECT_EQ(parse_endpoint("127.0.0.1:0", /*allow_any_port=*/true)->port, 0);
  for (const char* bad : {"", "7001", ":7001", "host:", "host:65536", "host:-1", "host:70o1", "host:123456",
                          "a b:1", "host:1:2"})
    EXPECT_FALSE(parse_endpoint(bad).has_value()) << bad;
  auto v6 = parse_endpoint("[::1]:7001");
  ASSERT_FALSE(v6.has_value());
  EXPECT_EQ(v6.status().code(), StatusCode::unsupported);
}

TEST(Topology, RemoteInstances) {
  auto t = parse_topology(R"(instances: [{name: a, remote: "127.0.0.1:7001"}, {name: b, remote: "127.0.0.1:7002"},
                                         {name: c}])");
  ASSERT_TRUE(t.has_value()) << t.status().message();
  EXPECT_EQ(t->instances[0].remote, "127.0.0.1:7001");
  EXPECT_EQ(t->instances[1].remote, "127.0.0.1:7002");
  EXPECT_TRUE(t->instances[2].remote.empty());
  // Its GPUs are the node's: a remote and a local instance may both say cuda:0 in their own files.
  EXPECT_TRUE(parse_topology(R"(instances: [{name: a, remote: "h:1"}, {name: b, executors: [{device: "cuda:0"}]}])")
                  .has_value());

  auto port = parse_topology(R"(instances: [{name: a, remote: "127.0.0.1:99999"}])");
  ASSERT_FALSE(port.has_value());
  EXPECT_NE(port.status().message().find("instances[a]: remote:"), std::string::npos) << port.status().message();
  auto twice = parse_topology(R"(instances: [{name: a, remote: "h:1"}, {name: b, remote: "h:1"}])");
  ASSERT_FALSE(twice.has_value());
  EXPECT_NE(twice.status().message().find("a brigade node serves one instance"), std::string::npos);
  // One file describes the cluster: a remote instance's sections are what its node runs, so they
  // parse and are checked like a local instance's.
  auto sections = parse_topology(R"(instances: [{name: a, remote: "h:1", scheduler: {max_running: 2}, kv: {pages: 8}}])");
  ASSERT_TRUE(sections.has_value()) << sections.status().message();
  EXPECT_EQ(sections->instances[0].scheduler.max_running, 2);
  EXPECT_EQ(sections->instances[0].kv.pages, 8);
  auto bad = parse_topology(R"(instances: [{name: a, remote: "h:1", scheduler: {max_running: 0}}])");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("max_running"), std::string::npos) << bad.status().message();
}

TEST(Topology, StationsAreAListOfTypedEntries) {
  auto t = parse_topology(R"(
stations:
  - type: request_log
    options: {path: /tmp/x.jsonl}
  - name: limit
    type: rate_limit
    detached: true
    options: {requests_per_minute: 60, mode: queue}
)");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_EQ(t->stations.size(), 2u);
  EXPECT_EQ(t->stations[0].name, "request_log");  // the type, when unnamed
  EXPECT_EQ(t->stations[0].options.at("path"), "/tmp/x.jsonl");
  EXPECT_FALSE(t->stations[0].detached);
  EXPECT_EQ(t->stations[1].name, "limit");
  EXPECT_TRUE(t->stations[1].detached);
  EXPECT_EQ(t->stations[1].options.at("requests_per_minute"), "60");  // as written: the factory reads it
  EXPECT_TRUE(parse_topology("{}")->stations.empty());

  const auto error_of = [](const char* yaml) { return parse_topology(yaml).status().message(); };
  EXPECT_NE(error_of("stations: {type: a}").find("stations must be a list"), std::string::npos);
  EXPECT_NE(error_of("stations: [{name: a}]").find("stations[0].type is missing"), std::string::npos);
  EXPECT_NE(error_of("stations: [{type: a, kind: b}]").find("unknown key 'kind'"), std::string::npos);
  EXPECT_NE(error_of("stations: [{type: a, options: {x: [1]}}]").find("options.x must be a scalar"), std::string::npos);
  EXPECT_NE(error_of("stations: [{type: a}, {type: a}]").find("two stations are named 'a'"), std::string::npos);
  EXPECT_NE(error_of("stations: [{type: a, name: \"a b\"}]").find("letters, digits"), std::string::npos);
}

}  // namespace
}  // namespace brigade
