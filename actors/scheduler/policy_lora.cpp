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
  if ((s.req.lora == 0 && s.images.empty() && s.req.cache_salt.empty()) || s.tokens.empty()) return s.tokens;
  buf = s.tokens;
  if (s.req.lora != 0) {
    const int64_t salted = -1 - ((static_cast<int64_t>(s.req.lora) - 1) * limits_.vocab_size + buf[0]);
    BRIGADE_CHECK(salted >= INT32_MIN / 2, "LoRA adapter ids times the vocabulary fit in half of int32");
    buf[0] = static_cast<int32_t>(salted);
  }
  key_images(s, buf);
  if (!s.req.cache_salt.empty()) salt_key(s.req.cache_salt, buf);
  return buf;
}

// vLLM's cache_salt. Token t at position p in [1, kSaltedPositions] becomes
// -2^30 + b(p) * vocab + t, where b(p) in [0, 2^30 / vocab) is drawn from the salt's 128-bit hash
// by position: negative like the LoRA and image keys, but in its own range ([-2^30, 0) at p >= 1,
// where neither real ids nor image keys, below -2^30, fall), and one-to-one in t for a given salt,
// so two prompts under one salt share exactly the pages they would share unsalted. Two salts share
// a page only if all of its salted positions draw the same b(p): about 12 bits each for a 256k
// vocabulary, 31 positions, so never in practice. Position 0 keeps the LoRA adapter's key
// (drop_lora finds an adapter's pages by it); the page keys of the lower tiers chain over the
// salted tokens, so the host and disk tiers keep salts apart too, and the same salt finds its pages
// again after a restart. Image keys at those positions stay (the salt keys the positions around).
void SchedulerPolicy::salt_key(const std::string& salt, std::vector<int32_t>& key) const {
  constexpr int64_t kRange = int64_t{1} << 30;
  const int64_t vocab = limits_.vocab_size > 0 ? limits_.vocab_size : int64_t{1} << 24;
  const uint64_t buckets = static_cast<uint64_t>(kRange / vocab);
  const PageKey h = root_key("cache_salt|" + salt);
  const size_t end = std::min(key.size(), kSaltedPositions + 1);
  for (size_t p = 1; p < end; ++p) {
    if (key[p] < 0 || key[p] >= vocab) continue;  // an image key
    // splitmix64's finalizer over the salt's hash and the position: a draw per position.
    uint64_t x = h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull * (p + 1)) ^ (0xD1B54A32D192ED03ull * p);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    key[p] = static_cast<int32_t>(-kRange + static_cast<int64_t>(x % buckets) * vocab + key[p]);
  }
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
  forget_states(gone);
  if (kept > 0)
    return out_of_resources("LoRA slot " + std::to_string(slot) + ": " + std::to_string(kept) +
                            " cached prefix(es) are still in use by running requests");
  return Status::ok();
}

}  // namespace brigade
