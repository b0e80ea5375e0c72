// The cost of the json_object mask per sampled row (TokenTrie::allowed over a JsonMatcher), over
// the synthetic byte-level BPE vocabulary that `brigade make-model` writes, at 32k and 128k ids,
// in three matcher states: inside a string (nearly every token continues it: the worst case),
// right after '{' (few do) and inside a number; and the json_schema mask (SchemaMatcher) over
// kSchema in the same kinds of states, plus inside a length-bounded string (its state changes
// with every character, so the cache cannot help) and inside an anyOf whose two alternatives
// are both still alive (two matcher threads); and the guided_regex mask (RegexMatcher) for a few
// patterns and states, a schema string with a `pattern`/`format`, and a regex's compile time;
// and the guided_grammar mask (GrammarMatcher) for llama.cpp's json.gbnf in the json_object
// states and a one-line grammar, and a grammar's compile time.
//   build/bench/kernels/bench_json_mask
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/grammar.h"
#include "core/grammar_matcher.h"
#include "core/json_matcher.h"
#include "core/json_schema.h"
#include "core/regex_dfa.h"
#include "core/regex_matcher.h"
#include "core/schema_matcher.h"
#include "core/token_trie.h"
#include "models/synthetic_tokenizer.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

const TokenTrie& trie(int vocab) {
  static std::map<int, std::unique_ptr<TokenTrie>> cache;
  auto& t = cache[vocab];
  if (!t) {
    const auto dir = std::filesystem::temp_directory_path() / ("brigade_bench_vocab_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << *synthetic_tokenizer_json(vocab);
    auto tok = Tokenizer::load((dir / "tokenizer.json").string());
    std::filesystem::remove_all(dir);
    t = std::make_unique<TokenTrie>(token_pieces(**tok));
  }
  return *t;
}

// TokenTrie::allowed from the state m, uncached.
template <class Matcher>
void measure_mask(benchmark::State& state, const Matcher& m) {
  const TokenTrie& t = trie(static_cast<int>(state.range(0)));
  std::vector<uint8_t> allowed;
  for (auto _ : state) {
    t.allowed(m, allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
  size_t n = 0;
  for (uint8_t a : allowed) n += a;
  state.counters["allowed"] = static_cast<double>(n);
  state.counters["trie_nodes"] = t.n_nodes();
}

void BM_JsonMask(benchmark::State& state, const char* prefix) {
  JsonMatcher m;
  m.feed(std::string_view(prefix));
  measure_mask(state, m);
}

// Through JsonMaskCache, as the executor asks: a string's content repeats the matcher state, so
// after the first token of a string the mask is a lookup.
void BM_JsonMaskCached(benchmark::State& state) {
  JsonMaskCache cache(std::shared_ptr<const TokenTrie>(&trie(static_cast<int>(state.range(0))), [](const TokenTrie*) {}));
  JsonMatcher m;
  m.feed(std::string_view(R"({"name": "ab)"));
  for (auto _ : state) benchmark::DoNotOptimize(cache.allowed(m).data());
  state.counters["hit_rate"] = static_cast<double>(cache.hits()) / static_cast<double>(cache.hits() + cache.misses());
}

// A typical structured-output schema: required and optional properties, bounds, an enum, an
// array, a union of two objects sharing a key.
constexpr const char* kSchema = R"({"type": "object", "properties": {
    "title": {"type": "string"},
    "summary": {"type": "string", "maxLength": 200},
    "year": {"type": "integer", "minimum": 1900, "maximum": 2100},
    "genre": {"enum": ["drama", "comedy", "horror", "documentary"]},
    "cast": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "rating": {"anyOf": [
      {"type": "object", "properties": {"score": {"type": "number"}, "by": {"type": "string"}}, "required": ["score", "by"]},
      {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}]}},
  "required": ["title", "year", "rating"], "additionalProperties": false})";

const CompiledSchema& schema() {
  static const std::shared_ptr<const CompiledSchema> s = *CompiledSchema::compile(kSchema);
  return *s;
}

void BM_SchemaMask(benchmark::State& state, const char* prefix) {
  SchemaMatcher m(schema());
  if (!m.feed(std::string_view(prefix))) state.SkipWithError("the prefix is not an instance's beginning");
  measure_mask(state, m);
}

void BM_SchemaMaskCached(benchmark::State& state) {
  MaskCache<SchemaMatcher> cache(std::shared_ptr<const TokenTrie>(&trie(static_cast<int>(state.range(0))), [](const TokenTrie*) {}));
  SchemaMatcher m(schema());
  m.feed(std::string_view(R"({"title": "ab)"));
  for (auto _ : state) benchmark::DoNotOptimize(cache.allowed(m).data());
  state.counters["hit_rate"] = static_cast<double>(cache.hits()) / static_cast<double>(cache.hits() + cache.misses());
}

const CompiledRegex& regex(const char* pattern) {
  static std::map<std::string, std::shared_ptr<const CompiledRegex>> cache;
  auto& r = cache[pattern];
  if (!r) r = *CompiledRegex::compile(pattern);
  return *r;
}

// guided_regex: TokenTrie::allowed from the state after `prefix`, uncached.
void BM_RegexMask(benchmark::State& state, const char* pattern, const char* prefix) {
  RegexMatcher m(regex(pattern));
  if (!m.feed(std::string_view(prefix))) state.SkipWithError("the prefix is not a match's beginning");
  measure_mask(state, m);
  state.counters["dfa_states"] = static_cast<double>(regex(pattern).n_states());
}

void BM_RegexMaskCached(benchmark::State& state) {
  MaskCache<RegexMatcher> cache(std::shared_ptr<const TokenTrie>(&trie(static_cast<int>(state.range(0))), [](const TokenTrie*) {}));
  RegexMatcher m(regex("[^\\n]*"));
  m.feed(std::string_view("Some text"));
  for (auto _ : state) benchmark::DoNotOptimize(cache.allowed(m).data());
  state.counters["hit_rate"] = static_cast<double>(cache.hits()) / static_cast<double>(cache.hits() + cache.misses());
}

void BM_RegexCompile(benchmark::State& state, const char* pattern) {
  for (auto _ : state) benchmark::DoNotOptimize(CompiledRegex::compile(pattern));
  state.counters["dfa_states"] = static_cast<double>(regex(pattern).n_states());
}

// llama.cpp's grammars/json.gbnf.
constexpr const char* kJsonGbnf = R"gbnf(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf";

const CompiledGrammar& grammar(const char* text) {
  static std::map<std::string, std::shared_ptr<const CompiledGrammar>> cache;
  auto& g = cache[text];
  if (!g) g = *CompiledGrammar::compile(text);
  return *g;
}

// guided_grammar: TokenTrie::allowed from the state after `prefix`, uncached.
void BM_GrammarMask(benchmark::State& state, const char* text, const char* prefix) {
  GrammarMatcher m(grammar(text));
  if (!m.feed(std::string_view(prefix))) state.SkipWithError("the prefix is not a derivation's beginning");
  measure_mask(state, m);
  state.counters["stacks"] = static_cast<double>(m.n_stacks());
}

void BM_GrammarMaskCached(benchmark::State& state) {
  MaskCache<GrammarMatcher> cache(std::shared_ptr<const TokenTrie>(&trie(static_cast<int>(state.range(0))), [](const TokenTrie*) {}));
  GrammarMatcher m(grammar(kJsonGbnf));
  m.feed(std::string_view(R"({"name": "ab)"));
  for (auto _ : state) benchmark::DoNotOptimize(cache.allowed(m).data());
  state.counters["hit_rate"] = static_cast<double>(cache.hits()) / static_cast<double>(cache.hits() + cache.misses());
}

void BM_GrammarCompile(benchmark::State& state, const char* text) {
  for (auto _ : state) benchmark::DoNotOptimize(CompiledGrammar::compile(text));
  state.counters["positions"] = static_cast<double>(grammar(text).n_positions());
}

constexpr const char* kFree = "[^\\n]*";  // one line of anything: nearly every token continues it
constexpr const char* kPhone = "\\(\\d{3}\\) \\d{3}-\\d{4}";
constexpr const char* kWords = "[A-Z][a-z]+( [a-z]+){0,20}\\.";
constexpr const char* kEmail = "[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,4}";

// A schema string with a pattern, and one with format: email (a product with the JSON escapes).
constexpr const char* kPatternSchema = R"({"type": "object", "properties": {
    "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}, "contact": {"type": "string", "format": "email"},
    "note": {"type": "string", "pattern": "[^\\n]*"}}, "required": ["sku", "contact", "note"]})";

void BM_SchemaPatternMask(benchmark::State& state, const char* prefix) {
  static const std::shared_ptr<const CompiledSchema> s = *CompiledSchema::compile(kPatternSchema);
  SchemaMatcher m(*s);
  if (!m.feed(std::string_view(prefix))) state.SkipWithError("the prefix is not an instance's beginning");
  measure_mask(state, m);
}

BENCHMARK(BM_GrammarMaskCached)->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_in_string, kJsonGbnf, R"({"name": "ab)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_after_open, kJsonGbnf, R"({)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_in_number, kJsonGbnf, R"({"n": 12)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_nested_value, kJsonGbnf, R"({"a": [{"b": [1, {"c": )")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, free_line, "root ::= [^\n]*", "Some text")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarCompile, json, kJsonGbnf)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RegexMaskCached)->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, free_line, kFree, "Some text")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, words, kWords, "The cat sat")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, phone_start, kPhone, "")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, email_local, kEmail, "alice.b")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaPatternMask, in_sku, R"({"sku": "AB)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaPatternMask, in_email, R"({"sku": "ABC-1234", "contact": "alice)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaPatternMask, in_free_pattern, R"({"sku": "ABC-1234", "contact": "a@b.co", "note": "some)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexCompile, phone, kPhone)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexCompile, email, kEmail)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexCompile, words, kWords)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SchemaMaskCached)->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, in_string, R"({"title": "ab)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, in_bounded_string, R"({"title": "a", "summary": "ab)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, after_open, R"({)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, next_key, R"({"title": "a", "year": 2000,)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, in_bounded_int, R"({"title": "a", "year": 19)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, in_union_string, R"({"title": "a", "year": 2000, "rating": {"score": 1, "by": "x)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SchemaMask, in_union_number, R"({"title": "a", "year": 2000, "rating": {"score": 1)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JsonMaskCached)->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_JsonMask, in_string, R"({"name": "ab)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_JsonMask, after_open, R"({)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_JsonMask, in_number, R"({"n": 12)")->Arg(32000)->Arg(128000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
