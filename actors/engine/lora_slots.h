// LoraSlots: the engine's book of LoRA adapter slots while serving (docs/architecture.md "LoRA
// adapters"). Slot k (1..n) is the adapter id requests carry to the scheduler and executor. A slot
// is free, loading (a load_lora reserved it and is reading the files), live (requests may name
// it), draining (unloaded while requests under it still run: its name is gone; its weights and
// cached prefixes stay until a later load takes the slot, which it may once they have all ended:
// the load replaces what the slot held), or being freed (unloaded with nothing running: the
// unload frees the slot's weights and prefixes, then abandon()s it).
//
// Thread-safe: submit (any client thread), the requests' last events (engine threads) and
// load/unload (a client thread) meet here.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/lora_adapter.h"

namespace brigade {

class LoraSlots {
 public:
  // n slots (0: LoRA off), the first at_start.size() live with those adapters.
  void init(int n, const std::vector<LoraModule>& at_start);
  int n_slots() const;

  // The slot a request's adapter name selects (0 for "" = the base model), counted as running
  // under it until release(slot). invalid_argument naming the live adapters for another name.
  Expected<int32_t> acquire(const std::string& name);
  // A request acquire() counted has ended (its last event). 0 is ignored.
  void release(int32_t slot);

  // Reserves a slot for a new adapter: a free one, else a draining one with no request left
  // (lowest first). unsupported with no slots; invalid_argument for an empty name or one that
  // is loading, or live unless `replace`; out_of_resources when every slot is live, loading or
  // still draining.
  Expected<int> reserve(const LoraModule& m, bool replace = false);
  // The reserved slot's adapter is loaded: it goes live. A live slot of the same name (a replace)
  // stops being live in the same step: it drains, or, with no request running under it, it is
  // held for the caller to free and abandon(): that slot is returned (0: none).
  int commit(int slot);
  // The load failed (or an idle retire's resources are freed): the slot is free again.
  void abandon(int slot);

  // Takes a live adapter's name away; returns its slot. *idle: no request runs under it now, and
  // the slot is held for the caller to free what it holds, then abandon() it; otherwise it
  // drains. not_found when no live adapter has that name.
  Expected<int> retire(const std::string& name, bool* idle);

  std::vector<LoraModule> live() const;  // in slot order

 private:
  enum class State : uint8_t { free, loading, live, draining, freeing };
  struct Slot {
    State state = State::free;
    LoraModule module;
    int running = 0;  // requests acquired under it and not released
  };
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // [k - 1]
};

}  // namespace brigade
