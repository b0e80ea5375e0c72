#include "messages/registry.h"

#include "messages/error.h"
#include "messages/types.h"

namespace brigade {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<generate_request_msg>("brigade.GenerateRequest");
  cfg.add_message_type<token_event_msg>("brigade.TokenEvent");
  cfg.add_message_type<abort_msg>("brigade.Abort");
  cfg.add_message_type<step_plan_msg>("brigade.StepPlan");
  cfg.add_message_type<step_result_msg>("brigade.StepResult");
  cfg.add_message_type<lora_update_msg>("brigade.LoraUpdate");
  cfg.add_message_type<lora_updated_msg>("brigade.LoraUpdated");
  cfg.add_message_type<cache_reset_msg>("brigade.CacheReset");
  cfg.add_message_type<cache_reset_done_msg>("brigade.CacheResetDone");
  cfg.add_message_type<page_lease_request_msg>("brigade.PageLeaseRequest");
  cfg.add_message_type<page_lease_grant_msg>("brigade.PageLeaseGrant");
  cfg.add_message_type<page_free_msg>("brigade.PageFree");
  cfg.add_message_type<prefix_query_msg>("brigade.PrefixQuery");
  cfg.add_message_type<prefix_query_result_msg>("brigade.PrefixQueryResult");
  cfg.add_message_type<kv_save_msg>("brigade.KvSave");
  cfg.add_message_type<kv_load_msg>("brigade.KvLoad");
  cfg.add_message_type<kv_loaded_msg>("brigade.KvLoaded");
  cfg.add_message_type<tier_put_msg>("brigade.TierPut");
  cfg.add_message_type<tier_get_msg>("brigade.TierGet");
  cfg.add_message_type<tier_pages_msg>("brigade.TierPages");
  cfg.add_message_type<tier_stats_request_msg>("brigade.TierStatsRequest");
  cfg.add_message_type<tier_stats_msg>("brigade.TierStats");
  cfg.add_message_type<tier_clear_msg>("brigade.TierClear");
  cfg.add_message_type<tier_cleared_msg>("brigade.TierCleared");
  cfg.add_message_type<kv_export_msg>("brigade.KvExport");
  cfg.add_message_type<kv_exported_msg>("brigade.KvExported");
  cfg.add_message_type<kv_import_msg>("brigade.KvImport");
  cfg.add_message_type<kv_imported_msg>("brigade.KvImported");
  cfg.add_message_type<kv_handoff_msg>("brigade.KvHandoff");
  cfg.add_message_type<node_hello_msg>("brigade.NodeHello");
  cfg.add_message_type<node_info_msg>("brigade.NodeInfo");
  cfg.add_message_type<node_stats_request_msg>("brigade.NodeStatsRequest");
  cfg.add_message_type<node_stats_msg>("brigade.NodeStats");
  cfg.add_error_category(error_category, render_error);
}

}  // namespace brigade
