// The envelopes exchanged between actors: one alias per root message struct (DESIGN.md §3).
// Every alias here is registered with CAF by register_message_types (messages/registry.h); a new
// message type needs both an alias here and a line there.
#pragma once

#include "messages/envelope.h"
#include "messages/hicache.capnp.h"
#include "messages/kv.capnp.h"
#include "messages/node.capnp.h"
#include "messages/pd.capnp.h"
#include "messages/request.capnp.h"
#include "messages/step.capnp.h"

namespace brigade {

// Client-facing (request.capnp).
using generate_request_msg = msg<schema::GenerateRequest>;
using token_event_msg = msg<schema::TokenEvent>;
using abort_msg = msg<schema::Abort>;
// Scheduler <-> executor (step.capnp).
using step_plan_msg = msg<schema::StepPlan>;
using step_result_msg = msg<schema::StepResult>;
using lora_update_msg = msg<schema::LoraUpdate>;    // engine -> executor, scheduler
using lora_updated_msg = msg<schema::LoraUpdated>;
using cache_reset_msg = msg<schema::CacheReset>;  // engine -> scheduler, node, router
using cache_reset_done_msg = msg<schema::CacheResetDone>;
// Scheduler <-> KV page manager (kv.capnp).
using page_lease_request_msg = msg<schema::PageLeaseRequest>;
using page_lease_grant_msg = msg<schema::PageLeaseGrant>;
using page_free_msg = msg<schema::PageFree>;
using prefix_query_msg = msg<schema::PrefixQuery>;
using prefix_query_result_msg = msg<schema::PrefixQueryResult>;
// HiCache (hicache.capnp): scheduler -> executor, executor -> tier actor.
using kv_save_msg = msg<schema::KvSave>;
using kv_load_msg = msg<schema::KvLoad>;
using kv_loaded_msg = msg<schema::KvLoaded>;
using tier_put_msg = msg<schema::TierPut>;
using tier_get_msg = msg<schema::TierGet>;
using tier_pages_msg = msg<schema::TierPages>;
using tier_stats_request_msg = msg<schema::TierStatsRequest>;
using tier_stats_msg = msg<schema::TierStats>;
using tier_clear_msg = msg<schema::TierClear>;
using tier_cleared_msg = msg<schema::TierCleared>;
// PD separation (pd.capnp): scheduler <-> executor, prefill scheduler -> router -> decode scheduler.
using kv_export_msg = msg<schema::KvExport>;
using kv_exported_msg = msg<schema::KvExported>;
using kv_import_msg = msg<schema::KvImport>;
using kv_imported_msg = msg<schema::KvImported>;
using kv_handoff_msg = msg<schema::KvHandoff>;
// Multi-process clusters (node.capnp): front <-> node actor.
using node_hello_msg = msg<schema::NodeHello>;
using node_info_msg = msg<schema::NodeInfo>;
using node_stats_request_msg = msg<schema::NodeStatsRequest>;
using node_stats_msg = msg<schema::NodeStats>;

}  // namespace brigade
