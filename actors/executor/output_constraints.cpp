#include "actors/executor/output_constraints.h"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace brigade {

namespace {

std::string key_of(const SamplingConfig& cfg) {
  if (!cfg.json_schema.empty()) return "s" + cfg.json_schema;
  if (!cfg.regex.empty()) return "r" + cfg.regex;
  if (!cfg.grammar.empty()) return "g" + cfg.grammar;
  std::string key = "c";
  for (const std::string& c : cfg.guided_choice) {
    key += c;
    key += '\0';
  }
  return key;
}

}  // namespace

std::shared_ptr<OutputConstraints::Schema> OutputConstraints::schema(const SamplingConfig& cfg) {
  const std::string key = key_of(cfg);
  if (auto it = schemas_.find(key); it != schemas_.end()) {
    lru_.splice(lru_.begin(), lru_, std::find(lru_.begin(), lru_.end(), key));
    return it->second;
  }
  auto entry = std::make_shared<Schema>();
  Status st;
  if (!cfg.grammar.empty() && cfg.regex.empty() && cfg.json_schema.empty()) {
    auto compiled = CompiledGrammar::compile(cfg.grammar);
    st = compiled.status();
    if (st.is_ok()) {
      entry->grammar = *compiled;
      entry->grammar_masks = std::make_unique<MaskCache<GrammarMatcher>>(vocab_);
    }
  } else if (!cfg.regex.empty() && cfg.json_schema.empty()) {
    auto compiled = CompiledRegex::compile(cfg.regex);
    st = compiled.status();
    if (st.is_ok()) {
      entry->regex = *compiled;
      entry->regex_masks = std::make_unique<MaskCache<RegexMatcher>>(vocab_);
    }
  } else {
    auto compiled = cfg.json_schema.empty() ? CompiledSchema::choice(cfg.guided_choice) : CompiledSchema::compile(cfg.json_schema);
    st = compiled.status();
    if (st.is_ok()) {
      entry->schema = *compiled;
      entry->masks = std::make_unique<MaskCache<SchemaMatcher>>(vocab_);
    }
  }
  if (!st.is_ok()) {
    spdlog::error("executor: a plan carries a schema, regex or grammar the engine should have refused ({}): output left "
                  "unconstrained", st.to_string());
    return nullptr;
  }
  ++compiled_;
  schemas_.emplace(key, entry);
  lru_.push_front(key);
  if (lru_.size() > kMaxSchemas) {  // sequences still using the oldest keep it alive
    schemas_.erase(lru_.back());
    lru_.pop_back();
  }
  return entry;
}

OutputConstraints::State* OutputConstraints::state(uint64_t seq_id, const SamplingConfig& cfg) {
  if (!vocab_ || !cfg.constrained()) return nullptr;
  if (auto it = seqs_.find(seq_id); it != seqs_.end()) return &it->second;
  if (cfg.json_object) return &seqs_.emplace(seq_id, JsonMatcher()).first->second;
  std::shared_ptr<Schema> s = schema(cfg);
  if (!s) return nullptr;
  seq_schema_[seq_id] = s;
  if (s->regex) return &seqs_.emplace(seq_id, RegexMatcher(*s->regex)).first->second;
  if (s->grammar) return &seqs_.emplace(seq_id, GrammarMatcher(*s->grammar)).first->second;
  return &seqs_.emplace(seq_id, SchemaMatcher(*s->schema)).first->second;
}

OutputConstraints::Reasoning* OutputConstraints::reasoning(uint64_t seq_id, const SamplingConfig& cfg) {
  if (cfg.reasoning_end < 0) return nullptr;
  auto it = phases_.find(seq_id);
  if (it == phases_.end())
    it = phases_.emplace(seq_id, Reasoning{.phase = cfg.reasoning_start >= 0 ? Phase::may_open : Phase::reasoning}).first;
  return &it->second;
}

OutputConstraints::Phase OutputConstraints::phase(uint64_t seq_id, const SamplingConfig& cfg) {
  const Reasoning* r = reasoning(seq_id, cfg);
  return r ? r->phase : Phase::answer;
}

bool OutputConstraints::ends_reasoning(Reasoning& r, const SamplingConfig& cfg, int32_t token) {
  const std::vector<int32_t>& header = cfg.reasoning_header;
  if (header.empty()) return token == cfg.reasoning_end;
  if (r.since_header >= 0) {
    if (token == cfg.reasoning_end) return true;
    if (++r.since_header > SamplingConfig::kMaxReasoningHeaderGap) r.since_header = -1;
  }
  r.recent.push_back(token);
  if (r.recent.size() > header.size()) r.recent.erase(r.recent.begin());
  if (r.recent == header) r.since_header = 0;  // the latest header counts (vLLM searches from the end)
  return false;
}

void OutputConstraints::feed(uint64_t seq_id, const SamplingConfig& cfg, int32_t token) {
  if (Reasoning* r = reasoning(seq_id, cfg)) {
    switch (r->phase) {
      case Phase::reasoning:
        if (ends_reasoning(*r, cfg, token)) r->phase = Phase::answer;
        return;
      case Phase::may_open:
        r->phase = token == cfg.reasoning_start ? Phase::reasoning : Phase::answer;
        if (token == cfg.reasoning_start) return;
        break;  // the answer's first token
      case Phase::answer:
        break;
    }
  }
  // A token the mask allowed always feeds; one it did not (a plan from elsewhere) breaks the
  // matcher for good, and the mask then lets only the end ids through.
  State* st = state(seq_id, cfg);
  if (!st) return;
  std::visit([&](auto& m) { m.feed(vocab_->piece(token)); }, *st);
  if (auto* g = std::get_if<GrammarMatcher>(st); g && g->overflowed() && warned_.insert(seq_id).second)
    spdlog::warn("executor: seq {}: the grammar's parses passed a bound ({} stacks, {} deep, {} expansions a byte); "
                 "continuations past it are cut off", seq_id, GrammarMatcher::kMaxStacks, GrammarMatcher::kMaxDepth,
                 GrammarMatcher::kMaxExpansions);
}

const std::vector<uint8_t>* OutputConstraints::allowed(uint64_t seq_id, const SamplingConfig& cfg, bool& complete) {
  const Phase p = phase(seq_id, cfg);
  if (p == Phase::reasoning) return nullptr;
  const std::vector<uint8_t>* mask = answer_mask(seq_id, cfg, complete);
  if (!mask || p == Phase::answer) return mask;
  opened_ = *mask;
  const auto open = static_cast<size_t>(cfg.reasoning_start);
  if (open < opened_.size()) opened_[open] = 1;
  return &opened_;
}

const std::vector<uint8_t>* OutputConstraints::answer_mask(uint64_t seq_id, const SamplingConfig& cfg, bool& complete) {
  State* st = state(seq_id, cfg);
  if (!st) return nullptr;
  if (auto* json = std::get_if<JsonMatcher>(st)) {
    if (!json_masks_) json_masks_ = std::make_unique<JsonMaskCache>(vocab_);
    complete = json->complete();
    return &json_masks_->allowed(*json);
  }
  Schema& compiled = *seq_schema_.at(seq_id);
  if (const auto* re = std::get_if<RegexMatcher>(st)) {
    complete = re->complete();
    return &compiled.regex_masks->allowed(*re);
  }
  if (const auto* g = std::get_if<GrammarMatcher>(st)) {
    complete = g->complete();
    return &compiled.grammar_masks->allowed(*g);
  }
  const SchemaMatcher& m = std::get<SchemaMatcher>(*st);
  complete = m.complete();
  return &compiled.masks->allowed(m);
}

void OutputConstraints::release(uint64_t seq_id) {
  seqs_.erase(seq_id);
  seq_schema_.erase(seq_id);
  warned_.erase(seq_id);
  phases_.erase(seq_id);
}

}  // namespace brigade
