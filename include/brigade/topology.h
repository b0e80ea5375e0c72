// TopologyConfig: which actors an engine runs and how they are wired (DESIGN.md §3), as parsed
// from a topology YAML file (config/*.yaml). The default is one instance with one CPU executor;
// several instances (data parallelism) are joined by a router (RouterConfig).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

struct ExecutorConfig {
  // "cpu", or "cuda" / "cuda:N" (GPU 0 / N; needs a build with the CUDA backend). With tp > 1,
  // rank r runs on GPU N + r, the ranks joined by NCCL (actors/engine/instance.cpp).
  std::string device = "cpu";
  int threads = 0;             // CPU threads per rank; 0 = an equal share of the hardware threads
                               // among every CPU rank of the engine (all instances, all tp ranks)
  // Tensor parallelism: ranks that each hold 1/tp of every layer's attention heads and MLP and
  // all-reduce inside the forward pass (one executor actor per rank, rank 0 samples). tp must
  // divide the model's n_heads, n_kv_heads and intermediate_size (checked at load).
  int tp = 1;
  // Mixture-of-experts models under tp > 1: false (the default, as vLLM's) cuts every expert by
  // columns over the tp ranks; true gives each rank E/tp whole experts (expert parallelism:
  // each rank runs only the tokens routed to its experts, and the MoE output is all-reduced as
  // the MLP's is). tp must then divide the expert count instead of moe_intermediate_size. No
  // effect with tp: 1 or on dense models.
  bool expert_parallel = false;
  // Where sampled tokens live (actors/executor/step_runner.h): "host" (logits come to the host),
  // "device" (sampling, the token feed and graph-replayed decode buckets on the backend), or
  // "auto": device for the CUDA backend, host for the CPU backend.
  std::string step_path = "auto";
  // CUDA Graphs for the decode buckets of the device step path: false runs every step op by op
  // (vLLM's --enforce-eager), for debugging or to save the graphs' memory. No effect on the CPU.
  bool cuda_graphs = true;
  // Matrix weights after load: "auto" (the checkpoint's type: a GGUF file's Q4_K, Q8_0, ... stay
  // quantized where the backend multiplies them, the CPU; the CUDA backend makes every weight
  // bf16), "f32" or "bf16" (everything dequantized / converted; f32 on the CPU only), "fp8" (E4M3
  // linear layers with per-tensor scales, embedding and lm_head bf16; a CUDA GPU of compute
  // capability >= 8.9, refused at load elsewhere), or "q8_0" / "q4_0" / "q4_1" (ggml's block
  // formats: linear layers and MoE experts of a float checkpoint quantized at load, embedding,
  // lm_head and MoE routers as stored; the CPU only, refused for DeepSeek).
  std::string weights = "auto";
  // Measure the device's ceilings at start (CPU: read bandwidth and f32 GEMM rate, under a
  // second; GPU: HBM copy bandwidth and bf16 GEMM rate) and report every step against them
  // (EngineStats, /metrics: DESIGN.md §9). false: steps still report their flops and bytes.
  bool roofline = true;
};

// A parsed ExecutorConfig::device.
struct DeviceSpec {
  bool cuda = false;
  int index = 0;  // CUDA device ordinal
};
// "cpu", "cuda" or "cuda:N" (N >= 0); anything else is invalid_argument listing the forms.
Expected<DeviceSpec> parse_device(const std::string& device);

struct KvConfig {
  int page_size = 16;      // tokens per page
  int pages = 0;           // pages in the pool; 0 = as many as memory_mb holds
  int64_t memory_mb = 1024;  // per tensor-parallel rank (a rank caches only its kv heads)
  // vLLM's --gpu-memory-utilization: on a GPU, the share of the device's memory this instance may
  // use in all (weights, buffers, KV pages); the KV pool takes what the loaded model leaves of it
  // (less a reserve for CUDA Graphs and the allocator: kv_budget_from_fraction), in place of
  // memory_mb. 0 = memory_mb; in (0, 1]. A CPU executor keeps memory_mb (logged).
  double memory_fraction = 0.0;
  std::string dtype = "auto";  // auto (the weights' type), f32, bf16, f16, int8 (CPU backend only)
};

// The prefix cache and its HiCache tiers below the device KV pool (DESIGN.md §5). The tiers are
// off unless `disk_path` names a directory or `host_bytes` is set to a size.
struct CacheConfig {
  bool radix = true;                // the radix prefix cache over the device pool; on by default
  std::string eviction = "lru";     // lru, lfu or priority
  bool partial_pages = true;        // reuse the cached rows of partly matched pages (copy-on-write
                                    // of one page per request; SchedulerLimits::partial_pages)
  int in_batch_prefix_tokens = 32;  // a waiting prompt sharing this many uncached tokens with one being
                                    // prefilled waits to take them from the cache (0 = off;
                                    // SchedulerLimits::in_batch_prefix_tokens)
  // Recurrent models (state-space and hybrids): how many snapshots of sequences' states the
  // prefix cache keeps (docs/architecture.md "State snapshots"), out of kv.memory_mb like the
  // running sequences' states; auto: what the memory holds beyond max_running states (at most 4x
  // max_running), or a quarter of it when it holds fewer; 0: no prefix cache for such a model.
  static constexpr int64_t kAuto = -1;
  int64_t state_snapshots = kAuto;
  static constexpr int64_t auto_bytes = kAuto;
  static constexpr int64_t default_host_bytes_with_disk = int64_t{1} << 30;  // 1 GiB
  int64_t host_bytes = auto_bytes;  // host memory tier; auto = 1 GiB when disk_path is set, else off;
                                    // 0 = off
  std::string disk_path;            // RocksDB directory of the disk tier; empty = no disk tier
  int64_t disk_bytes = int64_t{16} << 30;      // disk tier capacity (16 GiB)
  std::string write_policy = "write_through";  // write_through | write_back (kvstore/tier_stack.h)

  // host_bytes with `auto` resolved.
  int64_t effective_host_bytes() const {
    if (host_bytes != auto_bytes) return host_bytes;
    return disk_path.empty() ? 0 : default_host_bytes_with_disk;
  }
  bool tiers_enabled() const { return effective_host_bytes() > 0 || !disk_path.empty(); }
};

// Speculative decoding (DESIGN.md §7): `method: ngram` drafts by prompt lookup, `draft_model`
// with a small model of the target's vocabulary (`model`); `none` is off.
struct SpeculativeConfig {
  std::string method = "none";  // none | ngram | draft_model | mtp | eagle3
  int num_tokens = 4;           // drafts verified per sequence and step, [1, 16]
  int ngram_min = 1;            // suffix lengths the drafter looks up, longest first
  int ngram_max = 3;
  double min_acceptance = 0.2;  // a sequence below this acceptance stops drafting for a while
  int disable_batch_size = 0;   // no drafts while more sequences decode (0 = no limit)
  std::string model;            // draft_model: the draft checkpoint (HF directory, GGUF, llama2.c .bin);
                                // eagle3: the EAGLE-3 head's directory
  int kv_tokens = 0;            // draft_model: tokens its own KV pool holds (0 = as many as the target's)
};

struct SchedulerConfig {
  int max_running = 64;        // sequences decoded together
  int max_waiting = 1024;      // queued requests beyond this are refused
  int max_step_tokens = 512;   // token budget of one step (chunked prefill)
  int max_inflight_steps = 2;  // steps sent to the executor before the first comes back:
                               // 2 overlaps scheduling and streaming with the forward pass
  bool chunked_prefill = true; // false: prompts run whole in prefill-only steps (decodes pause)
  // Tokens a sequence may hold, prompt and output (vLLM's max_model_len): prompts beyond it are
  // refused and max_tokens capped to what it leaves. 0 = the model's max_position_embeddings; more
  // than that is refused when the instance loads.
  int max_model_len = 0;
  SpeculativeConfig speculative;
};

// What an instance does (DESIGN.md §3 "Topologies"; docs/architecture.md "PD separation"):
// both: colocated prefill and decode (chunked prefill mixes them); prefill: runs prompts, samples
// each request's first token and hands the sequence with its KV pages to a decode instance;
// decode: takes those hand-offs and decodes (it never receives a prompt from the router).
enum class PdRole : uint8_t { both, prefill, decode };
const char* pd_role_name(PdRole r);  // "both", "prefill", "decode"
// A role's name; anything else is invalid_argument listing the valid ones.
Expected<PdRole> parse_pd_role(const std::string& name);

struct InstanceConfig {
  // Unique within a topology; letters, digits, '_', '-', '.' (it labels /metrics series).
  std::string name = "main";
  // both | prefill | decode. A topology with prefill or decode instances needs at least one of
  // each, no `both` instance beside them, and the same kv.page_size and kv.dtype on all (the
  // engine then checks that the loaded page layouts agree, tp included).
  std::string role = "both";
  // HOST:PORT of a `brigade node` serving this instance in another process; empty: the instance
  // runs in this process. The front (Engine, `brigade serve`) connects to the node instead of
  // loading the instance; the node (`brigade node --instance NAME` on the same file) runs it
  // with the sections below and listens there. One file describes the whole cluster.
  std::string remote;
  SchedulerConfig scheduler;
  KvConfig kv;
  CacheConfig cache;
  std::vector<ExecutorConfig> executors = std::vector<ExecutorConfig>(1);
};

// How the router sends each tokenized request to one of several instances (the knobs of SGLang's
// router, same defaults). A topology with one instance has no router; the section is then unused.
struct RouterConfig {
  // cache_aware: the instance whose prompts share the longest prefix with this one, when the
  //   matched fraction is above cache_threshold and the load is balanced; else the least loaded.
  // least_load: always the least loaded (fewest requests in flight, then fewest prompt tokens
  //   waiting for their prefill). round_robin: in turn.
  std::string policy = "cache_aware";
  double cache_threshold = 0.3;       // [0, 1]: matched prefix / prompt length must exceed it
  // The load is imbalanced when the busiest and the idlest instance differ by more than
  // balance_abs_threshold requests in flight AND the busiest has more than balance_rel_threshold
  // times the idlest's; then even a cache hit goes to the least loaded instance.
  int balance_abs_threshold = 64;     // >= 0
  double balance_rel_threshold = 1.5; // >= 1
  // Token ids the router remembers per instance (its approximate prefix tree); beyond this the
  // least recently used branches are trimmed.
  int64_t max_tree_tokens = int64_t{1} << 22;
};

// PD separation's data plane: how a hand-off carries its KV bytes. Where it stays in a process,
// a handle to a host buffer (no copy through the message) unless `inline`; where it crosses to
// another process (a `brigade node`):
//   auto:   a POSIX shared-memory segment that the receiver maps when every PD instance is on
//           this host (no remote: endpoint other than a loopback one), else the bytes inline;
//   local:  the bytes inside the message;
//   inline: the bytes inside the message (in the process too);
//   shm:    a shared-memory segment (every PD node on the front's host, which connecting checks).
struct PdConfig {
  std::string transfer = "auto";  // auto | local | inline | shm
};

// One actor of the application's (or brigade's own) in the request path, between the tokenizer
// and the router / scheduler (include/brigade/station.h).
struct StationConfig {
  // Unique among the stations; letters, digits, '_', '-', '.'.
  std::string name;
  // A key of EngineOptions::station_types or a built-in type (rate_limit, request_log).
  std::string type;
  // true: the station's actor gets a thread of its own (it may block); false: cooperative.
  bool detached = false;
  // The entry's `options:` mapping, scalars only, given to the station's factory as written.
  std::map<std::string, std::string> options;
};

struct TopologyConfig {
  std::string model;  // checkpoint path; empty: given by the caller
  // One or more instances: each a whole copy of the model with its own scheduler, KV pool,
  // prefix cache and executor(s), on its own devices (data parallelism).
  std::vector<InstanceConfig> instances = std::vector<InstanceConfig>(1);
  RouterConfig router;
  PdConfig pd;
  // A file holding the secret that fronts and `brigade node`s of this topology prove to each
  // other (HMAC challenge-response at the hello: actors/node/node_auth.h); empty: nodes take any
  // front. Both sides read it from the same topology; at least 16 bytes (`openssl rand -hex 32`).
  std::string node_token_file;
  // Requests pass these in order on their way in, events in reverse order on their way out.
  // They run in the process that tokenizes (the front); `brigade node` ignores them.
  std::vector<StationConfig> stations;
  // Whether some instance has the prefill or decode role.
  bool pd_separated() const;
  Status validate() const;
};

// A TCP endpoint "HOST:PORT" (the `remote:` of an instance, `brigade node --listen`). HOST is a
// name or an IPv4 address (no brackets, no ':'); PORT is in [1, 65535], or 0 when allow_any_port
// (a listener that lets the kernel choose).
struct Endpoint {
  std::string host;
  int port = 0;
  // On this host: localhost or 127.0.0.0/8.
  bool loopback() const { return host == "localhost" || host.rfind("127.", 0) == 0; }
};
Expected<Endpoint> parse_endpoint(const std::string& text, bool allow_any_port = false);

// One instance, one CPU executor, default limits.
TopologyConfig default_topology();
// Parses topology YAML; unknown keys and bad values are errors that list the valid choices.
Expected<TopologyConfig> parse_topology(const std::string& yaml_text);
// vLLM's --speculative-config: a JSON object over `out`. Keys: method (ngram, draft_model, mtp, eagle3;
// vLLM's deepseek_mtp is mtp; without method, a model means eagle3 where its name holds "eagle3" and
// draft_model otherwise, as vLLM infers it; "eagle-" (EAGLE-1/2) is refused), num_speculative_tokens,
// model, prompt_lookup_min / prompt_lookup_max (ngram), disable_by_batch_size, and brigade's
// min_acceptance and kv_tokens. Unknown keys, methods and wrong types are refused by name; the
// values are checked with the rest of the topology (TopologyConfig::validate).
Status parse_speculative_json(const std::string& json_text, SpeculativeConfig& out);
Expected<TopologyConfig> load_topology_file(const std::string& path);

}  // namespace brigade
