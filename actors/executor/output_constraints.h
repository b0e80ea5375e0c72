// OutputConstraints: the structured-output state of an executor's sequences — a JsonMatcher per
// json_object sequence, a SchemaMatcher per json_schema / guided_choice one, a RegexMatcher per
// guided_regex one, a GrammarMatcher per guided_grammar one — and the masks they allow
// (docs/architecture.md "Logit rules", "Schema output", "Regex output", "Grammar output").
// StepRunner owns one; it feeds each generated token and asks for a row's mask; a plain class,
// tested directly and through StepRunner.
//
// A sequence with SamplingConfig::reasoning_end runs a reasoning block first (the output is free
// until that token), or, with reasoning_start, may open one with its first token; the matcher
// sees only the tokens after the block. With SamplingConfig::reasoning_header (harmony) the block
// ends at reasoning_end only shortly after the header's tokens in a row (docs/architecture.md
// "Structured output after the reasoning").
//
// Each distinct schema (or choice list, regex, grammar) is compiled once and kept, with its mask cache, in a
// bounded cache keyed by its text; the engine compiled it before accepting the request, so a
// compile error here is an invariant broken (a plan from elsewhere), and the sequence is then
// left unconstrained rather than the executor failing.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "core/grammar.h"
#include "core/grammar_matcher.h"
#include "core/json_matcher.h"
#include "core/json_schema.h"
#include "core/regex_matcher.h"
#include "core/sampling.h"
#include "core/schema_matcher.h"
#include "core/token_trie.h"

namespace brigade {

class OutputConstraints {
 public:
  static constexpr size_t kMaxSchemas = 16;  // compiled schemas kept (least recently used goes)

  // vocab: the tokenizer's token bytes; null when the model has none (the engine then refuses
  // constrained requests).
  explicit OutputConstraints(std::shared_ptr<const TokenTrie> vocab) : vocab_(std::move(vocab)) {}

  // Token `token` was generated for seq_id (cfg.constrained()): its bytes move the matcher.
  void feed(uint64_t seq_id, const SamplingConfig& cfg, int32_t token);
  // The tokens allowed next for seq_id (allowed[id] = 1), valid until the next call; complete:
  // the output may end here. Null when nothing constrains it (no vocabulary, or inside the
  // reasoning block).
  const std::vector<uint8_t>* allowed(uint64_t seq_id, const SamplingConfig& cfg, bool& complete);
  void release(uint64_t seq_id);

  size_t n_compiled() const { return compiled_; }  // schemas compiled so far (cache misses)

 private:
  // A compiled schema, regex or grammar with its masks (one of the three pairs is set).
  struct Schema {
    std::shared_ptr<const CompiledSchema> schema;
    std::unique_ptr<MaskCache<SchemaMatcher>> masks;
    std::shared_ptr<const CompiledRegex> regex;
    std::unique_ptr<MaskCache<RegexMatcher>> regex_masks;
    std::shared_ptr<const CompiledGrammar> grammar;
    std::unique_ptr<MaskCache<GrammarMatcher>> grammar_masks;
  };
  using State = std::variant<JsonMatcher, SchemaMatcher, RegexMatcher, GrammarMatcher>;
  // Where a sequence with a reasoning block stands (cfg.reasoning_end >= 0).
  enum class Phase {
    may_open,   // no token yet: reasoning_start opens the block, anything else is the answer
    reasoning,  // inside the block: free until reasoning_end
    answer,     // the constraint applies
  };
  struct Reasoning {
    Phase phase = Phase::reasoning;
    std::vector<int32_t> recent;  // with a header: the last header.size() tokens
    int since_header = -1;        // tokens since the header last came in a row; -1: not within the gap
  };
  Reasoning* reasoning(uint64_t seq_id, const SamplingConfig& cfg);  // null: no block (the answer throughout)
  Phase phase(uint64_t seq_id, const SamplingConfig& cfg);
  // Whether token, generated inside the block, ends it (advancing the header's watch).
  static bool ends_reasoning(Reasoning& r, const SamplingConfig& cfg, int32_t token);
  // The constraint's own mask (what allowed() gives in the answer).
  const std::vector<uint8_t>* answer_mask(uint64_t seq_id, const SamplingConfig& cfg, bool& complete);

  // The sequence's matcher, made on first use (with the schema it needs).
  State* state(uint64_t seq_id, const SamplingConfig& cfg);
  std::shared_ptr<Schema> schema(const SamplingConfig& cfg);

  std::shared_ptr<const TokenTrie> vocab_;
  std::unique_ptr<JsonMaskCache> json_masks_;
  std::unordered_map<uint64_t, State> seqs_;
  // key: "s" + schema text, "c" + the choices joined by NUL, "r" + regex or "g" + grammar; lru_ front = most recent. A
  // matcher points into its Schema, so entries are shared_ptrs that sequences keep alive.
  std::unordered_map<std::string, std::shared_ptr<Schema>> schemas_;
  std::unordered_map<uint64_t, std::shared_ptr<Schema>> seq_schema_;
  std::list<std::string> lru_;
  std::unordered_set<uint64_t> warned_;  // sequences whose grammar overflowed (warned once)
  std::unordered_map<uint64_t, Reasoning> phases_;  // sequences with a reasoning block
  std::vector<uint8_t> opened_;                 // may_open: the answer's mask plus reasoning_start
  size_t compiled_ = 0;
};

}  // namespace brigade
