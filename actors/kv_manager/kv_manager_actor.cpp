#include "actors/kv_manager/kv_manager_actor.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "kvstore/page_pool.h"
#include "messages/convert.h"

namespace brigade {

namespace {

struct KvManagerState {
  std::unique_ptr<PagePool> pool;
  static inline const char* name = "brigade.kv_manager";
};

kv_manager_actor::behavior_type kv_manager_fun(kv_manager_actor::stateful_pointer<KvManagerState> self,
                                               int n_pages) {
  self->state.pool = std::make_unique<PagePool>(n_pages);
  return {
      [self](const page_lease_request_msg& req) -> page_lease_grant_msg {
        PagePool& pool = *self->state.pool;
        auto r = req.reader();
        const int want = std::max(0, r.getNPages());
        const int grant = std::min(want, pool.n_free());
        std::vector<int32_t> pages;
        if (grant > 0 && grant >= r.getMinPages()) pages = std::move(*pool.allocate(grant));
        return page_lease_grant_msg::build([&](schema::PageLeaseGrant::Builder b) {
          b.setRequestId(r.getRequestId());
          fill_list(b.initPages(static_cast<unsigned>(pages.size())), pages);
          b.setNFree(pool.n_free());
          b.setNTotal(pool.n_pages());
        });
      },
      [self](const page_free_msg& msg) {
        // Pages come from peers that may be buggy or remote: free only ids that are in use.
        PagePool& pool = *self->state.pool;
        std::vector<int32_t> valid;
        for (int32_t p : to_vector(msg.reader().getPages())) {
          if (p >= 0 && p < pool.n_pages() && pool.ref_count(p) > 0) {
            valid.push_back(p);
          } else {
            spdlog::warn("kv manager: ignoring free of page {} (not in use)", p);
          }
        }
        pool.unref(valid);
      },
  };
}

}  // namespace

kv_manager_actor spawn_kv_manager(caf::actor_system& system, int n_pages) {
  return system.spawn(kv_manager_fun, n_pages);
}

}  // namespace brigade
