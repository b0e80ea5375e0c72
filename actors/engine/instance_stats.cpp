#include "actors/engine/instance_stats.h"

#include <string_view>

namespace brigade {

namespace {

template <class T>
struct Field {
  const char* name;
  T EngineStats::*member;
};

// Every field of EngineStats, by kind. accumulate() and the NodeStats codec walk these, so a
// field added to EngineStats needs one line here (and in kFromCounters if a counter feeds it).
constexpr Field<uint64_t> kCounts[] = {
    {"steps", &EngineStats::steps},
    {"step_tokens", &EngineStats::step_tokens},
    {"executor_us", &EngineStats::executor_us},
    {"requests_done", &EngineStats::requests_done},
    {"prompt_tokens", &EngineStats::prompt_tokens},
    {"generated_tokens", &EngineStats::generated_tokens},
    {"preemptions", &EngineStats::preemptions},
    {"cache_lookups", &EngineStats::cache_lookups},
    {"cache_lookup_tokens", &EngineStats::cache_lookup_tokens},
    {"cache_hit_tokens", &EngineStats::cache_hit_tokens},
    {"cache_partial_hit_tokens", &EngineStats::cache_partial_hit_tokens},
    {"cache_in_batch_waits", &EngineStats::cache_in_batch_waits},
    {"cache_loaded_tokens", &EngineStats::cache_loaded_tokens},
    {"cache_evicted_pages", &EngineStats::cache_evicted_pages},
    {"cache_state_saves", &EngineStats::cache_state_saves},
    {"cache_state_restores", &EngineStats::cache_state_restores},
    {"tier_saved_pages", &EngineStats::tier_saved_pages},
    {"tier_host_hit_pages", &EngineStats::tier_host_hit_pages},
    {"tier_disk_hit_pages", &EngineStats::tier_disk_hit_pages},
    {"tier_host_bytes_in", &EngineStats::tier_host_bytes_in},
    {"tier_host_bytes_out", &EngineStats::tier_host_bytes_out},
    {"tier_host_bytes_used", &EngineStats::tier_host_bytes_used},
    {"tier_disk_bytes_in", &EngineStats::tier_disk_bytes_in},
    {"tier_disk_bytes_out", &EngineStats::tier_disk_bytes_out},
    {"tier_disk_bytes_used", &EngineStats::tier_disk_bytes_used},
    {"tier_disk_corrupt", &EngineStats::tier_disk_corrupt},
    {"step_flops", &EngineStats::step_flops},
    {"step_bytes", &EngineStats::step_bytes},
    {"memory_bound_steps", &EngineStats::memory_bound_steps},
    {"compute_bound_steps", &EngineStats::compute_bound_steps},
    {"memory_bound_executor_us", &EngineStats::memory_bound_executor_us},
    {"compute_bound_executor_us", &EngineStats::compute_bound_executor_us},
    {"spec_draft_tokens", &EngineStats::spec_draft_tokens},
    {"spec_accepted_tokens", &EngineStats::spec_accepted_tokens},
    {"spec_verify_seqs", &EngineStats::spec_verify_seqs},
    {"spec_misses", &EngineStats::spec_misses},
    {"spec_off_compute_bound_steps", &EngineStats::spec_off_compute_bound_steps},
    {"spec_off_batch_steps", &EngineStats::spec_off_batch_steps},
    {"spec_seqs_turned_off", &EngineStats::spec_seqs_turned_off},
    {"spec_draft_forwards", &EngineStats::spec_draft_forwards},
    {"spec_draft_forward_us", &EngineStats::spec_draft_forward_us},
    {"spec_draft_fed_tokens", &EngineStats::spec_draft_fed_tokens},
    {"pd_transfers_out", &EngineStats::pd_transfers_out},
    {"pd_bytes_out", &EngineStats::pd_bytes_out},
    {"pd_transfers_in", &EngineStats::pd_transfers_in},
    {"pd_bytes_in", &EngineStats::pd_bytes_in},
    {"pd_shm_transfers_in", &EngineStats::pd_shm_transfers_in},
    {"pd_transfer_us", &EngineStats::pd_transfer_us},
    {"pd_import_failures", &EngineStats::pd_import_failures},
};
constexpr Field<int> kGauges[] = {
    {"n_running", &EngineStats::n_running},     {"n_waiting", &EngineStats::n_waiting},
    {"kv_pages_used", &EngineStats::kv_pages_used}, {"kv_pages_total", &EngineStats::kv_pages_total},
    {"cache_pages", &EngineStats::cache_pages},     {"cache_idle_pages", &EngineStats::cache_idle_pages},
    {"cache_state_snapshots", &EngineStats::cache_state_snapshots},
};
constexpr Field<double> kReals[] = {
    {"peak_bytes_per_s", &EngineStats::peak_bytes_per_s},
    {"peak_flops_per_s", &EngineStats::peak_flops_per_s},
    {"memory_bound_roofline_us", &EngineStats::memory_bound_roofline_us},
    {"compute_bound_roofline_us", &EngineStats::compute_bound_roofline_us},
};
constexpr Field<bool> kFlags[] = {
    {"tiers", &EngineStats::tiers},
    {"tier_disk_degraded", &EngineStats::tier_disk_degraded},
};

// Where counter_stats finds each field in the scheduler's counters.
template <class T>
using CounterField = std::pair<T EngineStats::*, std::atomic<T> SchedulerCounters::*>;
constexpr CounterField<uint64_t> kCounterTotals[] = {
    {&EngineStats::steps, &SchedulerCounters::steps},
    {&EngineStats::step_tokens, &SchedulerCounters::step_tokens},
    {&EngineStats::executor_us, &SchedulerCounters::executor_us},
    {&EngineStats::requests_done, &SchedulerCounters::requests_done},
    {&EngineStats::prompt_tokens, &SchedulerCounters::prompt_tokens},
    {&EngineStats::generated_tokens, &SchedulerCounters::generated_tokens},
    {&EngineStats::preemptions, &SchedulerCounters::preemptions},
    {&EngineStats::cache_lookups, &SchedulerCounters::cache_lookups},
    {&EngineStats::cache_lookup_tokens, &SchedulerCounters::cache_lookup_tokens},
    {&EngineStats::cache_hit_tokens, &SchedulerCounters::cache_hit_tokens},
    {&EngineStats::cache_partial_hit_tokens, &SchedulerCounters::cache_partial_hit_tokens},
    {&EngineStats::cache_in_batch_waits, &SchedulerCounters::cache_in_batch_waits},
    {&EngineStats::cache_loaded_tokens, &SchedulerCounters::cache_loaded_tokens},
    {&EngineStats::cache_evicted_pages, &SchedulerCounters::cache_evicted_pages},
    {&EngineStats::cache_state_saves, &SchedulerCounters::cache_state_saves},
    {&EngineStats::cache_state_restores, &SchedulerCounters::cache_state_restores},
    {&EngineStats::tier_saved_pages, &SchedulerCounters::tier_saved_pages},
    {&EngineStats::tier_host_hit_pages, &SchedulerCounters::tier_host_hit_pages},
    {&EngineStats::tier_disk_hit_pages, &SchedulerCounters::tier_disk_hit_pages},
    {&EngineStats::step_flops, &SchedulerCounters::step_flops},
    {&EngineStats::step_bytes, &SchedulerCounters::step_bytes},
    {&EngineStats::spec_draft_tokens, &SchedulerCounters::spec_draft_tokens},
    {&EngineStats::spec_accepted_tokens, &SchedulerCounters::spec_accepted_tokens},
    {&EngineStats::spec_verify_seqs, &SchedulerCounters::spec_verify_seqs},
    {&EngineStats::spec_misses, &SchedulerCounters::spec_misses},
    {&EngineStats::spec_off_compute_bound_steps, &SchedulerCounters::spec_off_compute_bound_steps},
    {&EngineStats::spec_off_batch_steps, &SchedulerCounters::spec_off_batch_steps},
    {&EngineStats::spec_seqs_turned_off, &SchedulerCounters::spec_seqs_turned_off},
    {&EngineStats::spec_draft_forwards, &SchedulerCounters::spec_draft_forwards},
    {&EngineStats::spec_draft_forward_us, &SchedulerCounters::spec_draft_forward_us},
    {&EngineStats::spec_draft_fed_tokens, &SchedulerCounters::spec_draft_fed_tokens},
    {&EngineStats::pd_transfers_out, &SchedulerCounters::pd_transfers_out},
    {&EngineStats::pd_bytes_out, &SchedulerCounters::pd_bytes_out},
    {&EngineStats::pd_transfers_in, &SchedulerCounters::pd_transfers_in},
    {&EngineStats::pd_bytes_in, &SchedulerCounters::pd_bytes_in},
    {&EngineStats::pd_shm_transfers_in, &SchedulerCounters::pd_shm_transfers_in},
    {&EngineStats::pd_transfer_us, &SchedulerCounters::pd_transfer_us},
    {&EngineStats::pd_import_failures, &SchedulerCounters::pd_import_failures},
};
constexpr CounterField<int> kCounterGauges[] = {
    {&EngineStats::n_running, &SchedulerCounters::n_running},
    {&EngineStats::n_waiting, &SchedulerCounters::n_waiting},
    {&EngineStats::kv_pages_used, &SchedulerCounters::kv_pages_used},
    {&EngineStats::cache_pages, &SchedulerCounters::cache_pages},
    {&EngineStats::cache_idle_pages, &SchedulerCounters::cache_idle_pages},
    {&EngineStats::cache_state_snapshots, &SchedulerCounters::cache_state_snapshots},
};
// Per bound, memory then compute (SchedulerCounters::bound_*).
constexpr std::pair<uint64_t EngineStats::*, uint64_t EngineStats::*> kBoundFields[] = {
    {&EngineStats::memory_bound_steps, &EngineStats::compute_bound_steps},
    {&EngineStats::memory_bound_executor_us, &EngineStats::compute_bound_executor_us},
};
constexpr std::atomic<uint64_t> (SchedulerCounters::*kBoundCounters[])[2] = {&SchedulerCounters::bound_steps,
                                                                               &SchedulerCounters::bound_executor_us};
using TierReader = schema::TierStats::Reader;
constexpr std::pair<uint64_t EngineStats::*, uint64_t (TierReader::*)() const> kTierFields[] = {
    {&EngineStats::tier_host_bytes_in, &TierReader::getHostBytesIn},
    {&EngineStats::tier_host_bytes_out, &TierReader::getHostBytesOut},
    {&EngineStats::tier_host_bytes_used, &TierReader::getHostBytesUsed},
    {&EngineStats::tier_disk_bytes_in, &TierReader::getDiskBytesIn},
    {&EngineStats::tier_disk_bytes_out, &TierReader::getDiskBytesOut},
    {&EngineStats::tier_disk_bytes_used, &TierReader::getDiskBytesUsed},
    {&EngineStats::tier_disk_corrupt, &TierReader::getDiskCorrupt},
};

template <class T, size_t N>
bool assign_by_name(const Field<T> (&fields)[N], std::string_view name, T value, EngineStats& s) {
  for (const auto& f : fields) {
    if (name == f.name) {
      s.*f.member = value;
      return true;
    }
  }
  return false;
}

}  // namespace

EngineStats counter_stats(const SpawnedInstance& inst) {
  const SchedulerCounters& c = *inst.counters;
  EngineStats s;
  for (const auto& [to, from] : kCounterTotals) s.*to = (c.*from).load();
  for (const auto& [to, from] : kCounterGauges) s.*to = (c.*from).load();
  for (size_t i = 0; i < std::size(kBoundFields); ++i) {
    s.*kBoundFields[i].first = (c.*kBoundCounters[i])[0].load();
    s.*kBoundFields[i].second = (c.*kBoundCounters[i])[1].load();
  }
  s.memory_bound_roofline_us = static_cast<double>(c.bound_roofline_ns[0].load()) / 1e3;
  s.compute_bound_roofline_us = static_cast<double>(c.bound_roofline_ns[1].load()) / 1e3;
  s.peak_bytes_per_s = inst.ceilings.bytes_per_s;
  s.peak_flops_per_s = inst.ceilings.flops_per_s;
  s.kv_pages_total = inst.n_pages;
  s.tiers = inst.tiers != nullptr;
  return s;
}

void add_tier_stats(schema::TierStats::Reader r, EngineStats& s) {
  s.tiers = true;
  for (const auto& [to, from] : kTierFields) s.*to = (r.*from)();
  s.tier_disk_degraded = r.getDiskDegraded();
}

void accumulate(EngineStats& to, const EngineStats& from) {
  for (const auto& f : kCounts) to.*f.member += from.*f.member;
  for (const auto& f : kGauges) to.*f.member += from.*f.member;
  for (const auto& f : kReals) to.*f.member += from.*f.member;
  for (const auto& f : kFlags) to.*f.member = to.*f.member || from.*f.member;
}

node_stats_msg encode_node_stats(const EngineStats& s) {
  return node_stats_msg::build([&](schema::NodeStats::Builder b) {
    auto counts = b.initCounts(static_cast<unsigned>(std::size(kCounts) + std::size(kGauges) + std::size(kFlags)));
    unsigned i = 0;
    auto put = [&](const char* name, uint64_t value) {
      counts[i].setName(name);
      counts[i++].setValue(value);
    };
    for (const auto& f : kCounts) put(f.name, s.*f.member);
    // Gauges are never negative (counts of sequences and pages).
    for (const auto& f : kGauges) put(f.name, static_cast<uint64_t>(std::max(0, s.*f.member)));
    for (const auto& f : kFlags) put(f.name, s.*f.member ? 1 : 0);
    auto reals = b.initReals(static_cast<unsigned>(std::size(kReals)));
    for (unsigned j = 0; j < std::size(kReals); ++j) {
      reals[j].setName(kReals[j].name);
      reals[j].setValue(s.*kReals[j].member);
    }
  });
}

EngineStats decode_node_stats(schema::NodeStats::Reader r) {
  EngineStats s;
  for (auto c : r.getCounts()) {
    const std::string_view name(c.getName().cStr(), c.getName().size());
    const uint64_t v = c.getValue();
    if (assign_by_name(kCounts, name, v, s)) continue;
    if (assign_by_name(kGauges, name, static_cast<int>(std::min<uint64_t>(v, INT32_MAX)), s)) continue;
    assign_by_name(kFlags, name, v != 0, s);
  }
  for (auto x : r.getReals())
    assign_by_name(kReals, std::string_view(x.getName().cStr(), x.getName().size()), x.getValue(), s);
  return s;
}

cache_reset_done_msg with_tiers_cleared(const cache_reset_done_msg& done, schema::TierCleared::Reader tiers) {
  return done.edited([&](schema::CacheResetDone::Builder b) {
    b.setHostEntries(tiers.getHostEntries());
    b.setDiskEntries(tiers.getDiskEntries());
    if (tiers.getError().size() > 0) b.setError(tiers.getError());
  });
}

}  // namespace brigade
