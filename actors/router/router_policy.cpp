#include "actors/router/router_policy.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "kvstore/page_key.h"

namespace brigade {

const char* route_reason_name(RouteReason r) {
  switch (r) {
    case RouteReason::cache: return "cache";
    case RouteReason::load: return "load";
    case RouteReason::round_robin: return "round_robin";
  }
  return "?";
}

RouterPolicy::RouterPolicy(const RouterConfig& config, int n_instances, std::vector<PdRole> roles)
    : config_(config),
      kind_(config.policy == "round_robin"  ? Kind::round_robin
            : config.policy == "least_load" ? Kind::least_load
                                            : Kind::cache_aware),
      loads_(static_cast<size_t>(n_instances)), up_(static_cast<size_t>(n_instances), true), roles_(std::move(roles)) {
  BRIGADE_CHECK(n_instances >= 1, "a router needs an instance");
  if (roles_.empty()) roles_.assign(static_cast<size_t>(n_instances), PdRole::both);
  BRIGADE_CHECK(roles_.size() == static_cast<size_t>(n_instances), "one role per instance");
  BRIGADE_CHECK(kind_ != Kind::cache_aware || config.policy == "cache_aware", "router.policy is validated by the topology");
  trees_.reserve(static_cast<size_t>(n_instances));
  for (int i = 0; i < n_instances; ++i) trees_.emplace_back(config.max_tree_tokens);
}

bool RouterPolicy::less_loaded(int a, int b) const {
  const auto key = [this](int i) {
    const InstanceLoad& l = load(i);
    return std::make_tuple(l.n_requests, l.n_pending_prompt_tokens, tree(i).n_tokens(), i);
  };
  return key(a) < key(b);
}

int RouterPolicy::least_loaded() const {
  int best = -1;
  for (int i = 0; i < n_instances(); ++i)
    if (routable(i) && (best < 0 || less_loaded(i, best))) best = i;
  return best;
}

bool RouterPolicy::imbalanced() const {
  int lo = -1, hi = -1;
  for (int i = 0; i < n_instances(); ++i) {
    if (!routable(i)) continue;
    const int n = load(i).n_requests;
    lo = lo < 0 ? n : std::min(lo, n);
    hi = std::max(hi, n);
  }
  return hi - lo > config_.balance_abs_threshold && hi > config_.balance_rel_threshold * lo;
}

RouteDecision RouterPolicy::cache_aware(std::span<const int32_t> prompt, int least) const {
  if (imbalanced()) return {least, RouteReason::load, tree(least).match(prompt)};
  int best = -1, best_match = 0;
  for (int i = 0; i < n_instances(); ++i) {
    if (!routable(i)) continue;
    const int m = tree(i).match(prompt);
    if (best < 0 || m > best_match || (m == best_match && less_loaded(i, best))) {
      best = i;
      best_match = m;
    }
  }
  const double ratio = prompt.empty() ? 0.0 : static_cast<double>(best_match) / static_cast<double>(prompt.size());
  if (ratio > config_.cache_threshold) return {best, RouteReason::cache, best_match};
  return {least, RouteReason::load, tree(least).match(prompt)};
}

int RouterPolicy::next_round_robin() const {
  for (int k = 0; k < n_instances(); ++k) {
    const int i = (next_rr_ + k) % n_instances();
    if (routable(i)) return i;
  }
  return -1;
}

namespace {
// The tree key of a prompt: an adapter's prompts start with a token no vocabulary has (-adapter),
// so they share tree paths only with the same adapter's; a salted prompt's next (or first) marker
// is one of 2^30 values below any adapter's, from the salt's hash (a collision only costs a
// misplaced affinity: the instances' caches keep salts apart exactly).
std::span<const int32_t> tree_key(std::span<const int32_t> prompt, uint32_t lora, std::string_view salt,
                                  std::vector<int32_t>& storage) {
  if (lora == 0 && salt.empty()) return prompt;
  storage.clear();
  if (lora != 0) storage.push_back(-static_cast<int32_t>(std::min<uint32_t>(lora, INT32_MAX / 2)));
  if (!salt.empty())
    storage.push_back(static_cast<int32_t>(INT32_MIN + static_cast<int64_t>(root_key(salt).lo & 0x3FFFFFFF)));
  storage.insert(storage.end(), prompt.begin(), prompt.end());
  return storage;
}

int n_markers(uint32_t lora, std::string_view salt) { return (lora != 0) + !salt.empty(); }
}  // namespace

Expected<RouteDecision> RouterPolicy::choose(std::span<const int32_t> prompt, uint32_t lora,
                                             std::string_view cache_salt) const {
  std::vector<int32_t> storage;
  const std::span<const int32_t> key = tree_key(prompt, lora, cache_salt, storage);
  const int least = least_loaded();
  if (least < 0) {
    if (std::any_of(roles_.begin(), roles_.end(), [](PdRole r) { return r == PdRole::prefill; }))
      return internal_error("no prefill instance is serving: every prefill instance of this engine has stopped");
    return internal_error("no instance is serving: every instance of this engine has stopped");
  }
  if (kind_ == Kind::round_robin) return RouteDecision{next_round_robin(), RouteReason::round_robin, 0};
  if (kind_ == Kind::least_load) return RouteDecision{least, RouteReason::load, 0};
  RouteDecision d = cache_aware(key, least);
  d.matched_tokens = std::max(0, d.matched_tokens - n_markers(lora, cache_salt));  // the markers are no prompt tokens
  return d;
}

Expected<RouteDecision> RouterPolicy::route(uint64_t request_id, std::span<const int32_t> prompt, uint32_t lora,
                                            std::string_view cache_salt, uint64_t group, int group_size) {
  if (inflight_.count(request_id))
    return invalid_argument("request " + std::to_string(request_id) + " is already in flight");
  RouteDecision d;
  auto g = group != 0 ? groups_.find(group) : groups_.end();
  if (g != groups_.end() && routable(g->second.decision.instance)) {
    d = g->second.decision;
  } else {
    BRIGADE_ASSIGN_OR_RETURN(d, choose(prompt, lora, cache_salt));
    if (group != 0 && group_size > 1 && g == groups_.end()) {
      g = groups_.emplace(group, GroupRoute{d, group_size}).first;
      group_order_.push_back(group);
      constexpr size_t kKeepGroups = 1024;
      while (group_order_.size() > kKeepGroups) {
        groups_.erase(group_order_.front());
        group_order_.pop_front();
      }
    }
  }
  if (g != groups_.end() && --g->second.remaining <= 0) groups_.erase(g);  // its last member
  InstanceLoad& l = loads_[static_cast<size_t>(d.instance)];
  l.n_requests++;
  l.n_pending_prompt_tokens += static_cast<int64_t>(prompt.size());
  inflight_[request_id] = {d.instance, static_cast<int64_t>(prompt.size())};
  std::vector<int32_t> storage;
  trees_[static_cast<size_t>(d.instance)].insert(tree_key(prompt, lora, cache_salt, storage));
  if (kind_ == Kind::round_robin) next_rr_ = (d.instance + 1) % n_instances();
  return d;
}

void RouterPolicy::prefilled(uint64_t request_id) {
  auto it = inflight_.find(request_id);
  if (it == inflight_.end()) return;
  loads_[static_cast<size_t>(it->second.instance)].n_pending_prompt_tokens -= it->second.pending_tokens;
  it->second.pending_tokens = 0;
}

void RouterPolicy::finished(uint64_t request_id) {
  prefilled(request_id);
  auto it = inflight_.find(request_id);
  if (it == inflight_.end()) return;
  loads_[static_cast<size_t>(it->second.instance)].n_requests--;
  inflight_.erase(it);
}

std::vector<uint64_t> RouterPolicy::instance_down(int instance) {
  up_[static_cast<size_t>(instance)] = false;
  std::vector<uint64_t> lost;
  for (const auto& [id, f] : inflight_)
    if (f.instance == instance) lost.push_back(id);
  std::sort(lost.begin(), lost.end());
  for (uint64_t id : lost) finished(id);
  return lost;
}

void RouterPolicy::instance_up(int instance) {
  const auto i = static_cast<size_t>(instance);
  if (up_[i]) return;
  up_[i] = true;
  trees_[i] = PrefixTree(config_.max_tree_tokens);
}

void RouterPolicy::forget_prefixes() {
  for (auto& t : trees_) t = PrefixTree(config_.max_tree_tokens);
}

Expected<int> RouterPolicy::choose_decode() const {
  int best = -1;
  for (int i = 0; i < n_instances(); ++i) {
    if (!up(i) || role(i) != PdRole::decode) continue;
    if (best < 0 || load(i).n_requests < load(best).n_requests) best = i;
  }
  if (best < 0) return internal_error("no decode instance is serving: every decode instance of this engine has stopped");
  return best;
}

void RouterPolicy::handed_off(uint64_t request_id, int decode) {
  auto it = inflight_.find(request_id);
  BRIGADE_CHECK(it != inflight_.end(), "a hand-off moves a request in flight");
  prefilled(request_id);
  loads_[static_cast<size_t>(it->second.instance)].n_requests--;
  loads_[static_cast<size_t>(decode)].n_requests++;
  it->second.instance = decode;
}

std::optional<int> RouterPolicy::owner(uint64_t request_id) const {
  auto it = inflight_.find(request_id);
  if (it == inflight_.end()) return std::nullopt;
  return it->second.instance;
}

}  // namespace brigade
