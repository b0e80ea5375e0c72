// The scheduler station (DESIGN.md §3, §6): one per instance. Owns a SchedulerPolicy (waiting
// queue, running set) and a lease of KV pages; turns tokenized GenerateRequests into StepPlans
// for its executor and StepResults into TokenEvents (ids only; text is the tokenizer's job).
//
// Contract: every accepted GenerateRequest yields TokenEvents to the sink ending in exactly one
// with finishReason != none; a request the policy refuses gets one event with finishReason error
// and the reason. Abort of an unknown or finished id is ignored.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "actors/executor/executor_actor.h"
#include "actors/kv_manager/kv_manager_actor.h"
#include "actors/scheduler/policy.h"
#include "messages/blob.h"
#include "messages/types.h"

namespace brigade {

// Anything that takes a stream of TokenEvents (tokenizer, frontend, a test probe).
using token_sink_actor = caf::typed_actor<caf::reacts_to<token_event_msg>>;

// Where a prefill instance's scheduler sends its hand-offs (the router, which picks the decode
// instance).
using handoff_sink_actor = caf::typed_actor<caf::reacts_to<kv_handoff_msg>>;

// KvHandoff (PD separation, decode side): a sequence prefilled elsewhere; it gets TokenEvents
// from its second token on, exactly as a request would (the prefill side streamed the first).
using scheduler_actor = caf::typed_actor<caf::reacts_to<generate_request_msg>, caf::reacts_to<abort_msg>,
                                         caf::replies_to<prefix_query_msg>::with<prefix_query_result_msg>,
                                         caf::reacts_to<kv_handoff_msg>>;

// What takes a prefix cache reset (Engine::reset_prefix_cache; CacheReset in step.capnp), through
// caf::actor_cast: the scheduler spawn_scheduler makes (its device cache), a node actor (its
// instance's cache and tiers) and the router (its per-instance prompt trees).
using cache_reset_actor = caf::typed_actor<caf::replies_to<cache_reset_msg>::with<cache_reset_done_msg>>;

// Step counters the scheduler keeps for its owner (the Engine reads them from another thread).
struct SchedulerCounters {
  std::atomic<uint64_t> steps{0};
  std::atomic<uint64_t> step_tokens{0};
  std::atomic<uint64_t> executor_us{0};
  std::atomic<uint64_t> requests_done{0};
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generated_tokens{0};
  std::atomic<uint64_t> preemptions{0};
  std::atomic<int> n_running{0};
  std::atomic<int> n_waiting{0};
  std::atomic<int> kv_pages_used{0};
  std::atomic<uint64_t> cache_lookups{0};
  std::atomic<uint64_t> cache_lookup_tokens{0};
  std::atomic<uint64_t> cache_hit_tokens{0};
  std::atomic<uint64_t> cache_partial_hit_tokens{0};
  std::atomic<uint64_t> cache_in_batch_waits{0};
  std::atomic<uint64_t> cache_loaded_tokens{0};
  std::atomic<uint64_t> cache_evicted_pages{0};
  std::atomic<int> cache_pages{0};
  std::atomic<int> cache_idle_pages{0};
  std::atomic<uint64_t> cache_state_saves{0};     // recurrent models' state snapshots (PrefixCacheStats)
  std::atomic<uint64_t> cache_state_restores{0};
  std::atomic<int> cache_state_snapshots{0};
  std::atomic<uint64_t> tier_saved_pages{0};     // pages sent down to the HiCache tiers
  std::atomic<uint64_t> tier_host_hit_pages{0};  // pages loaded back from the host tier
  std::atomic<uint64_t> tier_disk_hit_pages{0};  // pages loaded back from the disk tier
  // The roofline per step (DESIGN.md §9, StepReport): work done, and per bound (0 memory,
  // 1 compute) the steps, their executor time and the time the ceilings allowed them.
  std::atomic<uint64_t> step_flops{0};
  std::atomic<uint64_t> step_bytes{0};
  std::atomic<uint64_t> bound_steps[2] = {};
  std::atomic<uint64_t> bound_executor_us[2] = {};
  std::atomic<uint64_t> bound_roofline_ns[2] = {};
  // Speculative decoding (SpecStats).
  std::atomic<uint64_t> spec_draft_tokens{0};
  std::atomic<uint64_t> spec_accepted_tokens{0};
  std::atomic<uint64_t> spec_verify_seqs{0};
  std::atomic<uint64_t> spec_misses{0};
  std::atomic<uint64_t> spec_off_compute_bound_steps{0};
  std::atomic<uint64_t> spec_off_batch_steps{0};
  std::atomic<uint64_t> spec_seqs_turned_off{0};
  std::atomic<uint64_t> spec_draft_forwards{0};    // draft model (DrafterStats)
  std::atomic<uint64_t> spec_draft_forward_us{0};
  std::atomic<uint64_t> spec_draft_fed_tokens{0};
  // PD separation: hand-offs sent (prefill side) and received (decode side), their KV bytes, the
  // summed latency from the first token's arrival at the prefill scheduler to the decode side's
  // pages written (in-process clocks), and imports that failed (those sequences recompute).
  std::atomic<uint64_t> pd_transfers_out{0};
  std::atomic<uint64_t> pd_bytes_out{0};
  std::atomic<uint64_t> pd_transfers_in{0};
  std::atomic<uint64_t> pd_bytes_in{0};
  std::atomic<uint64_t> pd_shm_transfers_in{0};  // of pd_transfers_in: through a shared-memory segment
  std::atomic<uint64_t> pd_transfer_us{0};
  std::atomic<uint64_t> pd_import_failures{0};
};

struct SchedulerSetup {
  SchedulerLimits limits;
  int max_inflight_steps = 1;
  int pool_pages = 0;                // pages in the whole KV pool (admission limit)
  int lease_chunk = 64;              // pages asked for beyond the immediate need; the lease
                                     // keeps at most 4 chunks idle and returns the rest
  std::vector<int32_t> eos_ids;      // the model's end-of-sequence ids
  PageKey cache_root;                // names this model's KV pages (prefix cache, lower tiers)
  std::shared_ptr<SchedulerCounters> counters;  // may be null
  std::string instance_name;         // names the sender of hand-offs (logs)
  // How this instance's hand-offs carry their KV bytes: a local handle (they stay in the
  // process), inline, or a shared-memory segment (they cross processes of one host).
  BlobTransport pd_transport = BlobTransport::local;
  // The drafter of limits.spec (a draft model); null: the n-gram drafter. A draft model runs its
  // forwards inside the scheduler's handlers, so the scheduler then gets a thread of its own
  // (detached) instead of blocking one of CAF's shared workers.
  std::shared_ptr<Drafter> drafter;
  // The identity (lora_identity) of the LoRA adapter in slot i + 1 when the engine starts; the
  // engine's LoraUpdate messages change them later (SchedulerPolicy::set_lora_identity).
  std::vector<std::string> lora_identities;
};

// The scheduler spawn_scheduler makes also takes LoraUpdate (lora_slots_actor, through
// caf::actor_cast): a load drops the slot's cached prefixes and roots its page keys in the new
// adapter's identity; an unload drops them. Replies with an error (out_of_resources, nothing
// changed) while a request of the slot is still queued or running here.
// `handoffs`: where a prefill-role scheduler (setup.limits.role) sends its KvHandoffs; required
// for that role, unused otherwise.
scheduler_actor spawn_scheduler(caf::actor_system& system, const SchedulerSetup& setup,
                                executor_actor executor, kv_manager_actor kv_manager,
                                token_sink_actor sink, handoff_sink_actor handoffs = {});

}  // namespace brigade
