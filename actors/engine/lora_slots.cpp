#include "actors/engine/lora_slots.h"

namespace brigade {

void LoraSlots::init(int n, const std::vector<LoraModule>& at_start) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_.assign(static_cast<size_t>(std::max(n, 0)), Slot{});
  for (size_t i = 0; i < at_start.size() && i < slots_.size(); ++i) {
    slots_[i].state = State::live;
    slots_[i].module = at_start[i];
  }
}

int LoraSlots::n_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(slots_.size());
}

Expected<int32_t> LoraSlots::acquire(const std::string& name) {
  if (name.empty()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  std::string list;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.state != State::live) continue;
    if (s.module.name == name) {
      ++s.running;
      return static_cast<int32_t>(i + 1);
    }
    list += (list.empty() ? "" : ", ") + s.module.name;
  }
  return invalid_argument("LoRA adapter '" + name + "' is not loaded; loaded: " + (list.empty() ? "none" : list));
}

void LoraSlots::release(int32_t slot) {
  if (slot <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<size_t>(slot) > slots_.size()) return;
  Slot& s = slots_[static_cast<size_t>(slot - 1)];
  if (s.running > 0) --s.running;
}

Expected<int> LoraSlots::reserve(const LoraModule& m, bool replace) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slots_.empty())
    return unsupported("LoRA adapters cannot be loaded: the engine was started without LoRA slots "
                       "(EngineOptions::enable_lora, brigade serve --enable-lora)");
  if (m.name.empty()) return invalid_argument("a LoRA adapter needs a name");
  if (m.path.empty()) return invalid_argument("LoRA adapter '" + m.name + "' needs a path");
  int pick = 0;
  bool draining_busy = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.module.name != m.name) continue;
    if (s.state == State::loading)
      return invalid_argument("LoRA adapter '" + m.name + "' is already being loaded");
    if (s.state == State::live && !replace)
      return invalid_argument("LoRA adapter '" + m.name + "' is already loaded (load it in place to replace it)");
  }
  for (size_t i = 0; i < slots_.size() && pick == 0; ++i)
    if (slots_[i].state == State::free) pick = static_cast<int>(i + 1);
  for (size_t i = 0; i < slots_.size() && pick == 0; ++i) {
    if (slots_[i].state != State::draining) continue;
    if (slots_[i].running == 0) {
      pick = static_cast<int>(i + 1);
    } else {
      draining_busy = true;
    }
  }
  if (pick == 0)
    return out_of_resources("max_loras (" + std::to_string(slots_.size()) + ") LoRA adapters are loaded" +
                            (draining_busy ? ", or unloaded with requests still running under them" : "") +
                            "; unload one first");
  Slot& s = slots_[static_cast<size_t>(pick - 1)];
  s.state = State::loading;
  s.module = m;
  s.running = 0;
  return pick;
}

int LoraSlots::commit(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot < 1 || static_cast<size_t>(slot) > slots_.size()) return 0;
  Slot& fresh = slots_[static_cast<size_t>(slot - 1)];
  int to_free = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& old = slots_[i];
    if (static_cast<int>(i + 1) == slot || old.state != State::live || old.module.name != fresh.module.name) continue;
    if (old.running == 0) {
      old.state = State::freeing;
      to_free = static_cast<int>(i + 1);
    } else {
      old.state = State::draining;
    }
  }
  fresh.state = State::live;
  return to_free;
}

void LoraSlots::abandon(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot >= 1 && static_cast<size_t>(slot) <= slots_.size()) slots_[static_cast<size_t>(slot - 1)] = Slot{};
}

Expected<int> LoraSlots::retire(const std::string& name, bool* idle) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.state != State::live || s.module.name != name) continue;
    if (s.running == 0) {
      s.state = State::freeing;  // until the caller freed what the slot held and abandon()s it
      if (idle) *idle = true;
    } else {
      s.state = State::draining;
      if (idle) *idle = false;
    }
    return static_cast<int>(i + 1);
  }
  return not_found("LoRA adapter '" + name + "' is not loaded");
}

std::vector<LoraModule> LoraSlots::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LoraModule> out;
  for (const Slot& s : slots_)
    if (s.state == State::live) out.push_back(s.module);
  return out;
}

}  // namespace brigade
