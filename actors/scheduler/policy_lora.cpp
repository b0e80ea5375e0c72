// SchedulerPolicy under LoRA adapters: the prefix cache's key (docs/architecture.md "LoRA adapters").
#include "actors/scheduler/policy.h"

namespace brigade {

// Under adapter k >= 1 the first token t becomes -1 - ((k - 1) * vocab + t): negative, which no
// real id is, and distinct for each (adapter, token). So an adapter's first page differs from
// every base or other-adapter page: its prefixes live in their own subtree below the root, and
// their PageKeys (hash chains that start from the first page) differ too, so the HiCache host
// and disk tiers keep them apart as well. Adapter ids stay below 2^31 / vocab (EngineOptions'
// max_loras is far below that for any vocabulary).
std::span<const int32_t> SchedulerPolicy::cache_key(const Seq& s, std::vector<int32_t>& buf) const {
  if (s.req.lora == 0 || s.tokens.empty()) return s.tokens;
  buf = s.tokens;
  const int64_t salted = -1 - ((static_cast<int64_t>(s.req.lora) - 1) * limits_.vocab_size + buf[0]);
  BRIGADE_CHECK(salted >= INT32_MIN, "LoRA adapter ids times the vocabulary fit in int32");
  buf[0] = static_cast<int32_t>(salted);
  return buf;
}

}  // namespace brigade
