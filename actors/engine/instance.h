// One instance of the model inside an Engine (DESIGN.md §3): its executor ranks (backends,
// weights, KV cache), scheduler, KV page manager and HiCache tiers. An engine runs one or more
// instances (data parallelism); each is built in two phases: load (weights and KV memory; no
// actors, may fail cleanly) and spawn (the actors, wired to a sink for the scheduler's events).
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/executor/executor_actor.h"
#include "actors/hicache/hicache_actor.h"
#include "actors/scheduler/scheduler_actor.h"
#include "brigade/engine.h"
#include "models/tokenizer.h"

namespace brigade {

// What load_instance made, ready to spawn.
struct LoadedInstance {
  std::string name;
  std::vector<std::shared_ptr<ExecutorResources>> ranks;  // tensor-parallel ranks; rank 0 first
  SchedulerSetup setup;                                   // its counters are set
  std::optional<HiCacheSetup> tiers;                      // when the instance's cache has tiers
  RooflineCeilings ceilings;                              // zeros without `roofline: true`
  int n_pages = 0;                                        // pages in its KV pool
  // One page's bytes as the executor group reads and writes them (KvSave/KvExport): every tp
  // rank's part in rank order, or rank 0's alone for a latent (MLA) cache, which each rank holds
  // whole; and what they mean: kv_fingerprint of the layout, plus the tp size when the bytes are
  // split by rank. PD instances must agree on both.
  size_t kv_page_bytes = 0;
  std::string kv_layout;
};

// The instance's actors once spawned.
struct SpawnedInstance {
  std::string name;
  scheduler_actor scheduler;
  executor_actor executor;                      // rank 0
  hicache_actor tiers;                          // null without tiers
  std::vector<caf::actor> actors;               // all of them, for shutdown
  std::shared_ptr<SchedulerCounters> counters;
  RooflineCeilings ceilings;
  int n_pages = 0;
  PdRole role = PdRole::both;
};

// CPU threads of one executor rank: the configured count, or with `threads: 0` an equal share of
// the hardware threads among the engine's n_cpu_ranks CPU ranks (all instances, all tp ranks);
// 0 (= all) when there is only one.
int rank_threads(const ExecutorConfig& exe, int n_cpu_ranks);

// kv.memory_fraction (vLLM's --gpu-memory-utilization) on a device with `free` of `total` bytes
// free once the model is loaded: the bytes its KV pages may take, fraction * total less what is in
// use (weights, buffers, anything else on the device) less a reserve for what comes later (CUDA
// Graphs, NCCL, allocator slack: 1% of the device, at least 256 MiB). invalid_argument, naming
// the numbers, when that leaves nothing.
Expected<int64_t> kv_budget_from_fraction(double fraction, size_t free, size_t total);

// Loads instance `inst` of options.topology: every rank's backend and weights (options'
// backend_factory wins over the device), the KV cache and the scheduler's setup. Errors: a bad
// device, a model that does not load, KV memory too small for a page.
Expected<LoadedInstance> load_instance(const EngineOptions& options, const InstanceConfig& inst,
                                       const std::string& model_path, int n_cpu_ranks, bool progress);

// What a LoRA adapter's files hold (names, sizes, hashes of their first and last MiB): the
// scheduler roots the page keys of the adapter's prompts in it (SchedulerPolicy::set_lora_identity).
std::string lora_identity(const LoraModule& m);

// How an instance's PD hand-offs carry their KV bytes (topology pd.transfer). In the engine's own
// process (in_node false): a local handle, unless pd.transfer is inline or some decode instance
// is a node, where the bytes must cross. In a `brigade node` (in_node true), every hand-off
// crosses to the front. Crossing: a shared-memory segment for shm, and for auto when every PD
// instance is on this host (loopback endpoints); else inline.
BlobTransport pd_transport(const TopologyConfig& topology, bool in_node);

// The model's tokenizer: a directory's tokenizer files, or the vocabulary a GGUF carries; null
// when the model has none (a llama2.c .bin). Errors: tokenizer files that do not load. Check it
// against the model's vocabulary with check_tokenizer_fits.
Expected<std::shared_ptr<const Tokenizer>> load_model_tokenizer(const std::string& path);

// Spawns the loaded instance's actors; its scheduler sends TokenEvents to `sink`. `linked`: the
// scheduler is linked to every other actor of the instance, so when any of them dies (a crash, an
// exit with an error) the scheduler stops too and whoever monitors it (the router) sees the whole
// instance go. Unlinked (one instance, no router), a scheduler whose executor died stays up and
// fails each request's step with the executor's error.
// `handoffs`: where a prefill instance's scheduler sends its hand-offs (the router; unused for
// other roles).
SpawnedInstance spawn_instance(caf::actor_system& system, LoadedInstance loaded, token_sink_actor sink, bool linked,
                               handoff_sink_actor handoffs = {});

}  // namespace brigade
