// RouterPolicy: which instance of a data-parallel engine serves each request (DESIGN.md §3, the
// router station), as a plain class the router actor owns and the tests drive directly.
//
// Load is what the router itself counts, with no round trip to the instances: per instance the
// requests it sent that have not ended, and the prompt tokens of those whose prefill has not
// produced a first token yet. Cache affinity is an approximate PrefixTree per instance of the
// prompts sent there. Policies (RouterConfig::policy):
//   cache_aware: when the load is balanced and some instance's tree shares more than
//     cache_threshold of the prompt, the instance with the longest match (reason cache);
//     otherwise the least loaded (reason load);
//   least_load: the least loaded; round_robin: the next instance that is up, in turn.
// "Least loaded" orders instances by requests in flight, then pending prompt tokens, then the
// size of their tree (an idle engine spreads distinct prompts instead of piling them on the
// first instance), then index.
//
// PD separation (roles): requests are routed by the policy above over the instances that take
// prompts (prefill, or both); decode instances receive sequences only by hand-off, each to the
// decode instance with the fewest requests in flight at that moment (choose_decode), and the
// request then counts there.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actors/router/prefix_tree.h"
#include "brigade/topology.h"
#include "core/status.h"

namespace brigade {

enum class RouteReason { cache, load, round_robin };
const char* route_reason_name(RouteReason r);  // "cache", "load", "round_robin"

struct RouteDecision {
  int instance = -1;
  RouteReason reason = RouteReason::load;
  int matched_tokens = 0;  // the chosen instance's tree match (cache_aware only)
};

struct InstanceLoad {
  int n_requests = 0;                   // routed there and not ended
  int64_t n_pending_prompt_tokens = 0;  // prompts of those whose first token has not come back
};

class RouterPolicy {
 public:
  // config must be valid (TopologyConfig::validate); n_instances >= 1, all up at first. roles:
  // one per instance, or empty (all both).
  RouterPolicy(const RouterConfig& config, int n_instances, std::vector<PdRole> roles = {});

  // Where a prompt would go now, and why; changes nothing. internal when every instance is down.
  // `lora` (0 = the base model) is the request's LoRA adapter: each instance caches an adapter's
  // pages apart from the base model's and the other adapters', so the trees match a prompt only
  // against prompts of the same adapter. `cache_salt` (vLLM's; empty: none) likewise: a salted
  // prompt matches only prompts of the same salt, as the instances' caches do.
  Expected<RouteDecision> choose(std::span<const int32_t> prompt, uint32_t lora = 0,
                                 std::string_view cache_salt = {}) const;
  // choose, then commit: the request counts as in flight there and its prompt enters that
  // instance's tree. invalid_argument for an id already in flight. A member of an admit group
  // (GenerateRequest.admitGroup, `group` of `group_size` requests: a beam search's step) goes
  // where the group's first member went while that instance is routable, so its scheduler can
  // admit them together.
  Expected<RouteDecision> route(uint64_t request_id, std::span<const int32_t> prompt, uint32_t lora = 0,
                                std::string_view cache_salt = {}, uint64_t group = 0, int group_size = 0);
  // The request's first token came back: its prompt no longer counts as pending prefill.
  // Unknown ids are ignored (as are repeats).
  void prefilled(uint64_t request_id);
  // The request ended (any reason): it leaves its instance's load. Unknown ids are ignored.
  void finished(uint64_t request_id);
  // The instance stopped: nothing more goes there. Returns the requests in flight there, which
  // leave the books (their owner must end them).
  std::vector<uint64_t> instance_down(int instance);
  // The instance serves again (a remote node came back): prompts may go there; its prefix tree
  // starts empty (the node's cache is cold).
  void instance_up(int instance);
  // The instances' caches were reset (Engine::reset_prefix_cache): every prefix tree starts empty.
  void forget_prefixes();

  // PD: the decode instance for a hand-off now: the one with the fewest requests in flight (then
  // the lowest index) that is up; internal when none is.
  Expected<int> choose_decode() const;
  // PD: the request (in flight) moved to decode instance `decode`; it counts there from now on.
  void handed_off(uint64_t request_id, int decode);
  PdRole role(int instance) const { return roles_[static_cast<size_t>(instance)]; }

  // The instance a request in flight was sent to.
  std::optional<int> owner(uint64_t request_id) const;
  int n_instances() const { return static_cast<int>(loads_.size()); }
  bool up(int instance) const { return up_[static_cast<size_t>(instance)]; }
  const InstanceLoad& load(int instance) const { return loads_[static_cast<size_t>(instance)]; }
  const PrefixTree& tree(int instance) const { return trees_[static_cast<size_t>(instance)]; }

 private:
  struct InFlight {
    int instance = 0;
    int64_t pending_tokens = 0;  // 0 once prefilled
  };

  // Up and taking prompts (not a decode instance).
  bool routable(int instance) const { return up(instance) && role(instance) != PdRole::decode; }
  // The least loaded routable instance (-1 when none is).
  int least_loaded() const;
  bool less_loaded(int a, int b) const;
  // busiest - idlest > balance_abs_threshold and busiest > balance_rel_threshold x idlest
  // (requests in flight, over the instances that are up).
  bool imbalanced() const;
  RouteDecision cache_aware(std::span<const int32_t> prompt, int least) const;
  int next_round_robin() const;

  enum class Kind { cache_aware, least_load, round_robin };

  RouterConfig config_;
  Kind kind_;  // config_.policy, parsed once
  std::vector<InstanceLoad> loads_;
  std::vector<PrefixTree> trees_;
  std::vector<bool> up_;
  std::vector<PdRole> roles_;
  std::unordered_map<uint64_t, InFlight> inflight_;
  int next_rr_ = 0;  // round_robin: the instance to try first
  struct GroupRoute {
    RouteDecision decision;  // the first member's
    int remaining = 0;       // members still to come
  };
  std::unordered_map<uint64_t, GroupRoute> groups_;
  std::deque<uint64_t> group_order_;  // oldest first: a group whose members never all come is forgotten
};

}  // namespace brigade
