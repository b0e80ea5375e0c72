#include "actors/hicache/hicache_actor.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <memory>

namespace brigade {

std::vector<PageKey> to_page_keys(capnp::List<schema::PageKey>::Reader list) {
  std::vector<PageKey> keys;
  keys.reserve(list.size());
  for (auto k : list) keys.push_back(PageKey{k.getHi(), k.getLo()});
  return keys;
}

void fill_page_keys(capnp::List<schema::PageKey>::Builder list, std::span<const PageKey> keys) {
  BRIGADE_CHECK(list.size() == keys.size(), "fill_page_keys: the list must be initialised with keys.size()");
  for (unsigned i = 0; i < list.size(); ++i) {
    list[i].setHi(keys[i].hi);
    list[i].setLo(keys[i].lo);
  }
}

namespace {

struct HiCacheState {
  std::unique_ptr<TierStack> tiers;
  static inline const char* name = "brigade.hicache";
};

std::unique_ptr<DiskTier> open_disk(const HiCacheSetup& setup) {
  if (setup.disk_path.empty()) return nullptr;
  auto disk = DiskTier::open(setup.disk_path, setup.disk_bytes, setup.model_fingerprint);
  if (!disk) {
    spdlog::warn("hicache: running without the disk tier: {}", disk.status().to_string());
    return nullptr;
  }
  const DiskTierStats s = (*disk)->stats();
  spdlog::info("hicache: disk tier {} holds {} pages ({} MiB of {} MiB)", setup.disk_path, s.n_entries,
               s.bytes_used >> 20, setup.disk_bytes >> 20);
  return std::move(*disk);
}

void warn_if_degraded(const Status& s) {
  if (!s.is_ok()) spdlog::warn("hicache: {}; KV pages will be recomputed instead", s.to_string());
}

tier_stats_msg encode_stats(const TierStackStats& s) {
  return tier_stats_msg::build([&](schema::TierStats::Builder b) {
    b.setHostHits(s.host.n_hits);
    b.setHostMisses(s.host.n_misses);
    b.setHostBytesIn(s.host.bytes_in);
    b.setHostBytesOut(s.host.bytes_out);
    b.setHostEvictions(s.host.n_evictions);
    b.setHostEntries(s.host.n_entries);
    b.setHostBytesUsed(s.host.bytes_used);
    b.setDiskHits(s.disk.n_hits);
    b.setDiskMisses(s.disk.n_misses);
    b.setDiskBytesIn(s.disk.bytes_in);
    b.setDiskBytesOut(s.disk.bytes_out);
    b.setDiskEvictions(s.disk.n_evictions);
    b.setDiskEntries(s.disk.n_entries);
    b.setDiskBytesUsed(s.disk.bytes_used);
    b.setDiskCorrupt(s.disk.n_corrupt);
    b.setHasDisk(s.has_disk);
    b.setDiskDegraded(s.disk.degraded);
  });
}

hicache_actor::behavior_type hicache_fun(hicache_actor::stateful_pointer<HiCacheState> self, HiCacheSetup setup) {
  self->state.tiers = std::make_unique<TierStack>(setup.host_bytes, open_disk(setup), setup.policy);
  return {
      [self](const tier_put_msg& m) {
        auto keys = m->getKeys();
        auto data = m->getData();
        if (keys.size() != data.size()) {
          spdlog::error("hicache: dropping a TierPut with {} keys but {} pages", keys.size(), data.size());
          return;
        }
        for (unsigned i = 0; i < keys.size(); ++i) {
          const auto bytes = data[i];
          PageBytes page(bytes.size());
          std::memcpy(page.data(), bytes.begin(), bytes.size());
          warn_if_degraded(self->state.tiers->put(PageKey{keys[i].getHi(), keys[i].getLo()}, std::move(page)));
        }
      },
      [self](const tier_get_msg& m) -> tier_pages_msg {
        const std::vector<PageKey> keys = to_page_keys(m->getKeys());
        const TierRun run = self->state.tiers->get_run(keys);
        warn_if_degraded(self->state.tiers->take_error());
        return tier_pages_msg::build([&](schema::TierPages::Builder b) {
          auto data = b.initData(static_cast<unsigned>(run.pages.size()));
          auto from = b.initFrom(static_cast<unsigned>(run.from.size()));
          for (unsigned i = 0; i < run.pages.size(); ++i) {
            data.set(i, capnp::Data::Reader(reinterpret_cast<const kj::byte*>(run.pages[i].data()), run.pages[i].size()));
            from.set(i, run.from[i] == Tier::host ? schema::Tier::HOST : schema::Tier::DISK);
          }
        });
      },
      [self](const tier_stats_request_msg&) -> tier_stats_msg { return encode_stats(self->state.tiers->stats()); },
      [self](const tier_clear_msg& m) -> tier_cleared_msg {
        const TierClearResult r = self->state.tiers->clear(m->getDisk());
        warn_if_degraded(r.disk_status);
        spdlog::info("hicache: cleared {} host page(s){}", r.host_entries,
                     m->getDisk() ? " and " + std::to_string(r.disk_entries) + " disk page(s)" : std::string());
        return tier_cleared_msg::build([&](schema::TierCleared::Builder b) {
          b.setHostEntries(r.host_entries);
          b.setDiskEntries(r.disk_entries);
          b.setError(r.disk_status.is_ok() ? "" : r.disk_status.to_string());
        });
      },
  };
}

}  // namespace

hicache_actor spawn_hicache(caf::actor_system& system, HiCacheSetup setup) {
  return system.spawn<caf::detached>(hicache_fun, std::move(setup));
}

}  // namespace brigade
