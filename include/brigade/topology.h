// TopologyConfig: which actors an engine runs and how they are wired (DESIGN.md §3), as parsed
// from a topology YAML file (config/*.yaml). The default is one instance with one CPU executor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

struct ExecutorConfig {
  std::string device = "cpu";  // "cpu" (the CUDA backend arrives with the GPU issue)
  int threads = 0;             // CPU threads; 0 = all hardware threads
};

struct KvConfig {
  int page_size = 16;      // tokens per page
  int pages = 0;           // pages in the pool; 0 = as many as memory_mb holds
  int64_t memory_mb = 1024;
  std::string dtype = "auto";  // auto (the weights' type), f32, bf16, f16
};

struct SchedulerConfig {
  int max_running = 64;        // sequences decoded together
  int max_waiting = 1024;      // queued requests beyond this are refused
  int max_step_tokens = 512;   // token budget of one step (chunked prefill)
  int max_inflight_steps = 2;  // steps sent to the executor before the first comes back:
                               // 2 overlaps scheduling and streaming with the forward pass
  bool chunked_prefill = true; // false: prompts run whole in prefill-only steps (decodes pause)
};

// The prefix cache (DESIGN.md §5): the radix tree over the device KV pool.
struct CacheConfig {
  bool radix = true;               // on by default, as in SGLang
  std::string eviction = "lru";    // lru, lfu or priority
};

struct InstanceConfig {
  std::string name = "main";
  SchedulerConfig scheduler;
  KvConfig kv;
  CacheConfig cache;
  std::vector<ExecutorConfig> executors = std::vector<ExecutorConfig>(1);
};

struct TopologyConfig {
  std::string model;  // checkpoint path; empty: given by the caller
  std::vector<InstanceConfig> instances = std::vector<InstanceConfig>(1);
  Status validate() const;
};

// One instance, one CPU executor, default limits.
TopologyConfig default_topology();
// Parses topology YAML; unknown keys and bad values are errors that list the valid choices.
Expected<TopologyConfig> parse_topology(const std::string& yaml_text);
Expected<TopologyConfig> load_topology_file(const std::string& path);

}  // namespace brigade
