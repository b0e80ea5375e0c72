// The KV page manager station (DESIGN.md §3, §5): one per KV pool. Grants schedulers leases of
// free pages ahead of need and takes frees back in batches, so no step waits for a round trip.
//
// Contract: a PageLeaseRequest is answered with a grant of min(nPages, free) pages when that is
// at least minPages, else an empty grant; granted pages belong to the requester until it sends
// them back in a PageFree. nFree/nTotal report the pool after the grant.
#pragma once

#include <caf/all.hpp>

#include "messages/types.h"

namespace brigade {

using kv_manager_actor = caf::typed_actor<
    caf::replies_to<page_lease_request_msg>::with<page_lease_grant_msg>,
    caf::reacts_to<page_free_msg>>;

kv_manager_actor spawn_kv_manager(caf::actor_system& system, int n_pages);

}  // namespace brigade
