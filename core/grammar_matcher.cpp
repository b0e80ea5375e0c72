#include "core/grammar_matcher.h"

#include <algorithm>
#include <set>

namespace brigade {

GrammarMatcher::GrammarMatcher(const CompiledGrammar& grammar) : grammar_(&grammar) {
  std::vector<Stack> stacks;
  for (int32_t first : grammar.alternatives(grammar.root()))
    expand(grammar.is_end(first) ? Stack{} : Stack{first}, stacks);
  store(stacks);
}

bool GrammarMatcher::fail() {
  stacks_.clear();
  partial_ = 0;
  n_remain_ = 0;
  return false;
}

bool GrammarMatcher::feed(uint8_t byte) {
  if (stacks_.empty()) return false;
  GrammarStepCache& cache = grammar_->step_cache();
  const uint64_t key = (hash() ^ byte) * 0x9E3779B97F4A7C15ull;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (auto it = cache.entries.find(key); it != cache.entries.end()) {
      for (const GrammarStepCache::Entry& e : it->second) {
        if (e.byte != byte || e.from.partial != partial_ || e.from.n_remain != n_remain_ || e.from.stacks != stacks_) continue;
        stacks_ = e.to.stacks;
        partial_ = e.to.partial;
        n_remain_ = e.to.n_remain;
        overflowed_ = overflowed_ || e.overflowed;
        return !stacks_.empty();
      }
    }
  }
  GrammarStepCache::Entry e{.from = {stacks_, partial_, n_remain_}, .byte = byte};
  const bool overflowed_before = overflowed_;
  overflowed_ = false;
  const bool ok = step(byte);
  e.to = {stacks_, partial_, n_remain_};
  e.overflowed = overflowed_;
  overflowed_ = overflowed_ || overflowed_before;
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.n_entries >= GrammarStepCache::kMaxEntries) {
    cache.entries.clear();
    cache.n_entries = 0;
  }
  cache.entries[key].push_back(std::move(e));
  ++cache.n_entries;
  return ok;
}

bool GrammarMatcher::step(uint8_t byte) {
  if (n_remain_ > 0) {
    if ((byte & 0xC0) != 0x80) return fail();
    partial_ = (partial_ << 6) | (byte & 0x3Fu);
    if (--n_remain_ == 0) return advance(partial_);
    return keep_partial();
  }
  if (byte == 0) return fail();  // llama.cpp reads token text as a C string
  if (byte < 0x80) return advance(byte);
  if (byte < 0xC0) return fail();  // a continuation byte with no lead
  n_remain_ = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : 1;
  partial_ = byte & ((1u << (7 - n_remain_)) - 1);
  return keep_partial();
}

bool GrammarMatcher::keep_partial() {
  std::vector<int32_t> kept;
  kept.reserve(stacks_.size());
  for (size_t i = 0; i < stacks_.size();) {
    const size_t n = static_cast<size_t>(stacks_[i]);
    if (n > 0 && grammar_->may_match_partial(stacks_[i + n], partial_, n_remain_))
      kept.insert(kept.end(), stacks_.begin() + static_cast<std::ptrdiff_t>(i),
                  stacks_.begin() + static_cast<std::ptrdiff_t>(i + n + 1));
    i += n + 1;
  }
  if (kept.empty()) return fail();
  stacks_ = std::move(kept);  // still in order
  return true;
}

bool GrammarMatcher::advance(uint32_t cp) {
  partial_ = 0;
  n_remain_ = 0;
  std::vector<Stack> next;
  for (size_t i = 0; i < stacks_.size();) {
    const size_t n = static_cast<size_t>(stacks_[i]);
    const int32_t top = n > 0 ? stacks_[i + n] : 0;
    if (n > 0 && grammar_->matches(top, cp)) {
      Stack s(stacks_.begin() + static_cast<std::ptrdiff_t>(i + 1), stacks_.begin() + static_cast<std::ptrdiff_t>(i + n));
      if (!grammar_->is_end(top + 1)) s.push_back(top + 1);
      expand(std::move(s), next);
    }
    i += n + 1;
  }
  store(next);
  return !stacks_.empty() || fail();
}

void GrammarMatcher::expand(Stack stack, std::vector<Stack>& out) {
  const CompiledGrammar& g = *grammar_;
  if (stack.empty() || g.is_terminal(stack.back())) {  // the common case: no reference to open
    out.push_back(std::move(stack));
    return;
  }
  std::vector<Stack> todo = {std::move(stack)};
  std::set<Stack> seen;
  size_t n_visited = 0;
  while (!todo.empty()) {
    Stack s = std::move(todo.back());
    todo.pop_back();
    if (s.empty() || g.is_terminal(s.back())) {
      out.push_back(std::move(s));
      continue;
    }
    if (++n_visited > kMaxExpansions || s.size() > kMaxDepth) {
      overflowed_ = true;
      if (n_visited > kMaxExpansions) return;
      continue;
    }
    if (!seen.insert(s).second) continue;
    const int32_t ref = s.back();
    s.pop_back();
    if (!g.is_end(ref + 1)) s.push_back(ref + 1);  // what follows the reference, once the rule is done
    for (int32_t first : g.alternatives(g.ref_rule(ref))) {
      Stack t = s;
      if (!g.is_end(first)) t.push_back(first);
      todo.push_back(std::move(t));
    }
  }
}

void GrammarMatcher::store(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end(), [](const Stack& a, const Stack& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacks) {
    overflowed_ = true;
    stacks.resize(kMaxStacks);  // the shallowest parses are kept
  }
  stacks_.clear();
  for (const Stack& s : stacks) {
    stacks_.push_back(static_cast<int32_t>(s.size()));
    stacks_.insert(stacks_.end(), s.begin(), s.end());
  }
}

size_t GrammarMatcher::n_stacks() const {
  size_t n = 0;
  for (size_t i = 0; i < stacks_.size(); i += static_cast<size_t>(stacks_[i]) + 1) ++n;
  return n;
}

uint64_t GrammarMatcher::hash() const {
  uint64_t h = 0xcbf29ce484222325ull ^ reinterpret_cast<uintptr_t>(grammar_);
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  for (int32_t v : stacks_) mix(static_cast<uint32_t>(v));
  mix(partial_);
  mix(static_cast<uint64_t>(n_remain_));
  return h;
}

}  // namespace brigade
