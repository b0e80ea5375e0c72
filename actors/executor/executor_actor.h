// The executor station (DESIGN.md §3): one per device or TP rank. Owns the model weights, the
// device KV memory and a StepRunner. Runs detached, since a forward pass blocks its thread.
//
// Contract: every StepPlan gets exactly one StepResult with the same stepId, in plan order. A
// step that fails (bad ids, pages outside the pool) returns StepResult.error and changes no KV
// state. Each result carries the step's roofline cost and, when the engine measured the device's
// ceilings (ExecutorResources::ceilings), the time they allow it (DESIGN.md §9). A sequence
// whose SeqWork has drafts (nDraft = k, speculative decoding) gets 1..k+1 SampledTokens, in
// order: the drafts the target accepted, then its own token (core/sampling.h verify_drafts).
//
// Steps in flight (the device path, step_runner.h): a step whose rows all sample on the device is
// queued and its reply waits for its tokens; a plan that arrives meanwhile (the scheduler keeps
// max_inflight_steps plans out) is queued behind it on the device before that wait, so the
// device does not idle while the host prepares the next step. Until then the executor sends
// itself a poll that goes round its mailbox.
//
// HiCache (hicache.capnp), when the executor was given a tier actor:
//   KvSave: reads the pages' bytes at once, before any later message (CAF keeps per-sender
//           order, so a StepPlan sent after the KvSave cannot overwrite them first), and sends
//           them to the tier actor. Without a tier actor, or with a bad page id, nothing is
//           saved (logged).
//   KvLoad -> KvLoaded: asks the tier actor for the keys and keeps running steps meanwhile;
//           when the pages arrive it writes them into the given device pages and replies with
//           how many leading keys were loaded (the rest the scheduler recomputes). The pages
//           must not be used by a step before the KvLoaded. A malformed request, no tier actor
//           or a failed tier answers nLoaded = 0 with the reason in `error`.
//
// PD separation (pd.capnp), with or without tiers:
//   KvExport -> KvExported: reads the pages into one host buffer (page after page, read_page's
//           layout), named by a local BlobRef (or inline when asked), before any later message.
//   KvImport -> KvImported: writes a blob's pages into the given device pages. A bad page id or
//           a blob of the wrong size changes nothing and answers the reason in `error`.
//
// Tensor parallelism (docs/architecture.md): the scheduler talks to rank 0 only, an ordinary
// executor_actor. Rank 0 resolves each plan's use_last_sampled tokens (it is the only rank that
// samples), forwards the resolved plan to the follower ranks, runs its own shard and replies.
// Every rank processes plans in arrival order, so in-flight steps keep their order on all ranks
// and the collectives of one step pair up. A rank whose step fails for any reason other than a
// bad plan (which every rank refuses alike, before any collective), or that stops, aborts the
// communicator group so no rank waits for it; the engine must then be rebuilt. KV pages under
// tensor parallelism (HiCache KvSave/KvLoad, PD KvExport/KvImport): a page's bytes are every
// rank's bytes of it in rank order (each rank caches its kv heads), or rank 0's alone for MLA's
// latent cache, which every rank holds whole; rank 0 gathers the followers' parts and scatters
// theirs back (executor_actor.cpp "pages across tensor-parallel ranks").
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <vector>

#include "actors/executor/step_runner.h"
#include "actors/hicache/hicache_actor.h"
#include "core/backend.h"
#include "core/communicator.h"
#include "messages/types.h"
#include "models/model.h"
#include "kvstore/kv_layout.h"

namespace brigade {

using executor_actor = caf::typed_actor<caf::replies_to<step_plan_msg>::with<step_result_msg>,
                                        caf::reacts_to<kv_save_msg>,
                                        caf::replies_to<kv_load_msg>::with<kv_loaded_msg>,
                                        caf::replies_to<kv_export_msg>::with<kv_exported_msg>,
                                        caf::replies_to<kv_import_msg>::with<kv_imported_msg>>;
// The engine's handle on what holds LoRA adapter slots at run time: the executor (the weights)
// and the scheduler (the slot's cached prefixes and page-key root). The actors spawn_executor and
// spawn_scheduler make take it besides their own interface (caf::actor_cast to this type).
using lora_slots_actor = caf::typed_actor<caf::replies_to<lora_update_msg>::with<lora_updated_msg>>;
// A tensor-parallel rank other than 0: runs the (resolved) plans rank 0 forwards (no replies),
// and reads or writes its part of KV pages for rank 0 (its own page bytes; a local BlobRef).
// Rank 0 forwards the engine's LoraUpdate to them (each rank holds its part of an adapter).
using tp_follower_actor = caf::typed_actor<caf::reacts_to<step_plan_msg>,
                                           caf::replies_to<lora_update_msg>::with<lora_updated_msg>,
                                           caf::replies_to<kv_export_msg>::with<kv_exported_msg>,
                                           caf::replies_to<kv_import_msg>::with<kv_imported_msg>>;

// The device's measured ceilings (DESIGN.md §9): bytes it can move and flops it can do per
// second (CPU: read bandwidth and f32 GEMM rate, cpu/membw.h; GPU: HBM copy bandwidth and bf16
// GEMM rate, gpu/roofline.h). 0 = not measured: steps then report no roofline time.
struct RooflineCeilings {
  double bytes_per_s = 0.0;
  double flops_per_s = 0.0;
  bool known() const { return bytes_per_s > 0.0 && flops_per_s > 0.0; }
};

// What an executor owns; moved into the actor at spawn. Members are destroyed bottom-up: the
// model (which points at the communicator) goes before the communicator.
struct ExecutorResources {
  std::unique_ptr<Communicator> communicator;  // this rank's; nullptr without tensor parallelism
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  KvCache kv;
  StepRunnerOptions runner;  // host or device path (step_runner.h); followers never sample
  RooflineCeilings ceilings;  // rank 0 reports each step against them
};

// `tiers` may be null: no HiCache tiers below this executor's KV pool. Under tensor parallelism
// this is rank 0, with the other ranks as `followers`.
executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources,
                              hicache_actor tiers = {}, std::vector<tp_follower_actor> followers = {});
// A follower rank; resources->communicator must be set.
tp_follower_actor spawn_tp_follower(caf::actor_system& system, std::shared_ptr<ExecutorResources> resources);

}  // namespace brigade
