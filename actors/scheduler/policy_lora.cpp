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
  if ((s.req.lora == 0 && s.images.empty()) || s.tokens.empty()) return s.tokens;
  buf = s.tokens;
  if (s.req.lora != 0) {
    const int64_t salted = -1 - ((static_cast<int64_t>(s.req.lora) - 1) * limits_.vocab_size + buf[0]);
    BRIGADE_CHECK(salted >= INT32_MIN / 2, "LoRA adapter ids times the vocabulary fit in half of int32");
    buf[0] = static_cast<int32_t>(salted);
  }
  key_images(s, buf);
  return buf;
}

int SchedulerPolicy::lora_slot_of(int32_t first_token) const {
  if (first_token >= 0 || limits_.vocab_size <= 0) return 0;
  const int64_t x = -1 - static_cast<int64_t>(first_token);  // (k - 1) * vocab + t
  return static_cast<int>(x / limits_.vocab_size) + 1;
}

// An adapter's root hashes the model's root with the adapter's identity (PageKey::hex of the
// model root keeps the model, weights and KV layout in it).
void SchedulerPolicy::set_lora_identity(int slot, const std::string& identity) {
  BRIGADE_CHECK(slot >= 1, "LoRA slots start at 1");
  if (!cache_) return;
  const size_t i = static_cast<size_t>(slot - 1);
  if (lora_roots_.size() <= i) {
    lora_roots_.resize(i + 1);
    lora_rooted_.resize(i + 1, false);
  }
  lora_rooted_[i] = !identity.empty();
  lora_roots_[i] = identity.empty() ? cache_root_ : root_key(cache_root_.hex() + "|lora=" + identity);
  cache_->set_root_key_of([this](int32_t first) {
    const int k = lora_slot_of(first);
    if (k >= 1 && static_cast<size_t>(k) <= lora_rooted_.size() && lora_rooted_[static_cast<size_t>(k - 1)])
      return lora_roots_[static_cast<size_t>(k - 1)];
    return cache_root_;
  });
}

Status SchedulerPolicy::drop_lora(int slot, PageSource& pages) {
  BRIGADE_CHECK(slot >= 1, "LoRA slots start at 1");
  // A sequence of the slot still here (one the tokenizer ended at a stop string runs until its
  // abort arrives; a finished one stays until its steps in flight return) could still put pages
  // computed under the slot's old adapter into the cache: the slot cannot change yet.
  int users = 0;
  for (const Seq& s : waiting_) users += s.req.lora == static_cast<uint32_t>(slot);
  for (const auto& [id, s] : running_) users += s.req.lora == static_cast<uint32_t>(slot);
  if (users > 0)
    return out_of_resources("LoRA slot " + std::to_string(slot) + " still has " + std::to_string(users) +
                            " request(s) here");
  if (static_cast<size_t>(slot) <= lora_rooted_.size()) lora_rooted_[static_cast<size_t>(slot - 1)] = false;
  if (!cache_) return Status::ok();
  int kept = 0;
  auto gone = cache_->erase_first_token_if([&](int32_t first) { return lora_slot_of(first) == slot; }, &kept);
  std::vector<int32_t> freed;
  freed.reserve(gone.size());
  for (const auto& e : gone) freed.push_back(e.page);
  pages.give_back(freed);
  if (kept > 0)
    return out_of_resources("LoRA slot " + std::to_string(slot) + ": " + std::to_string(kept) +
                            " cached prefix(es) are still in use by running requests");
  return Status::ok();
}

}  // namespace brigade
