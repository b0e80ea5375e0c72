// logit_bias and min_tokens through a whole engine: every executor path (host sampler, device
// path, speculative verification) applies them, and the scheduler and tokenizer hold stops off.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/tokenizer/tokenizer_actor.h"
#include "brigade/engine.h"
#include "core/json_matcher.h"
#include "core/json_schema.h"
#include "core/schema_matcher.h"
#include "tests/engine_test_util.h"
#include "models/mapped_file.h"
#include "models/synthetic_tokenizer.h"
#include "models/tokenizer_bpe.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

class LogitRules : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("brigade_logit_rules_" + std::to_string(::getpid()));
    Status st = write_synthetic_model(testing::tiny_llama(512, 256, 11), dir_.string());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static EngineOptions options() { return testing::test_engine_options(dir_.string(), 1); }
  static fs::path dir_;
};
fs::path LogitRules::dir_;

std::unique_ptr<Engine> make(const EngineOptions& o) {
  auto e = Engine::create(o);
  EXPECT_TRUE(e.has_value()) << e.status().to_string();
  return e ? std::move(*e) : nullptr;
}

using testing::variants;

TEST_F(LogitRules, BiasSteersGreedyDecodingOnEveryPath) {
  const GenerateOptions plain = testing::greedy_ids({5, 6, 7, 5, 6}, 12);
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    auto base = engine->generate(plain);
    ASSERT_TRUE(base.has_value()) << name;
    ASSERT_EQ(base->token_ids.size(), 12u);
    // +100 on a token greedy decoding never picks: it is all that comes out.
    int32_t forced = 300;
    while (std::find(base->token_ids.begin(), base->token_ids.end(), forced) != base->token_ids.end()) ++forced;
    GenerateOptions r = plain;
    r.sampling.logit_bias = {{forced, 100.0f}};
    r.logprobs = 0;
    auto all = engine->generate(r);
    ASSERT_TRUE(all.has_value()) << name;
    EXPECT_EQ(all->token_ids, std::vector<int32_t>(12, forced)) << name;
    // Logprobs are those of the raw logits: the forced token was not the argmax there, so its
    // probability was below 1/2 (biased, it would be ~1).
    ASSERT_EQ(all->logprobs.size(), 12u) << name;
    EXPECT_LT(all->logprobs[0], std::log(0.5f)) << name;
    // -100 on the first greedy token: it never comes.
    r = plain;
    r.sampling.logit_bias = {{base->token_ids[0], -100.0f}};
    auto banned = engine->generate(r);
    ASSERT_TRUE(banned.has_value()) << name;
    EXPECT_EQ(std::count(banned->token_ids.begin(), banned->token_ids.end(), base->token_ids[0]), 0) << name;
  }
}

TEST_F(LogitRules, SeededSamplingWithABiasRepeats) {
  GenerateOptions r = testing::greedy_ids({9, 8, 7}, 16);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 77;
  r.sampling.logit_bias = {{40, 8.0f}, {41, 8.0f}, {42, -100.0f}};
  std::vector<int32_t> first;
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << name;
    EXPECT_EQ(std::count(out->token_ids.begin(), out->token_ids.end(), 42), 0) << name;
    EXPECT_GT(std::count_if(out->token_ids.begin(), out->token_ids.end(), [](int32_t t) { return t == 40 || t == 41; }),
              8)
        << name;
    if (first.empty()) first = out->token_ids;
    EXPECT_EQ(out->token_ids, first) << name << ": the same seed gives the same tokens on every path";
  }
}

// A stop id biased to +100 would end the output at once; min_tokens holds it off for exactly
// that many tokens, on every path; the same for the model's EOS.
TEST_F(LogitRules, MinTokensHoldsStopIdsAndEosOff) {
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    GenerateOptions r = testing::greedy_ids({5, 6, 7}, 20);
    r.stop_ids = {300};
    r.sampling.logit_bias = {{300, 100.0f}};
    r.min_tokens = 6;
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << name;
    EXPECT_EQ(out->finish, FinishReason::stop) << name;
    ASSERT_EQ(out->token_ids.size(), 7u) << name;
    EXPECT_EQ(std::count(out->token_ids.begin(), out->token_ids.end(), 300), 1) << name;
    EXPECT_EQ(out->token_ids.back(), 300) << name;

    r = testing::greedy_ids({5, 6, 7}, 20);
    r.ignore_eos = false;
    r.sampling.logit_bias = {{kSyntheticEosId, 100.0f}};
    r.min_tokens = 4;
    out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << name;
    EXPECT_EQ(out->finish, FinishReason::stop) << name;
    ASSERT_EQ(out->token_ids.size(), 5u) << name;
    EXPECT_EQ(out->token_ids.back(), kSyntheticEosId) << name;
    // With ignore_eos the masked ids are only the stop ids: EOS flows, nothing stops.
    r.ignore_eos = true;
    out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << name;
    EXPECT_EQ(out->finish, FinishReason::length) << name;
    EXPECT_EQ(out->token_ids, std::vector<int32_t>(20, kSyntheticEosId)) << name;
  }
}

// Stop strings cut the text (or end it, included) and match only the text after the first
// min_tokens tokens.
TEST_F(LogitRules, MinTokensHoldsStopStringsOff) {
  auto engine = make(options());
  ASSERT_NE(engine, nullptr);
  GenerateOptions r;
  r.prompt = "abc";
  r.max_tokens = 24;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  auto full = engine->generate(r);
  ASSERT_TRUE(full.has_value());
  ASSERT_GE(full->text.size(), 6u);
  const std::string stop = full->text.substr(2, 3);
  r.stop = {stop};
  auto cut = engine->generate(r);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->finish, FinishReason::stop);
  EXPECT_EQ(cut->text, full->text.substr(0, full->text.find(stop)));
  r.include_stop_str_in_output = true;  // vLLM's: the stop that ended the output stays
  auto kept = engine->generate(r);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->finish, FinishReason::stop);
  EXPECT_EQ(kept->text, full->text.substr(0, full->text.find(stop) + stop.size()));
  r.include_stop_str_in_output = false;
  r.min_tokens = r.max_tokens;  // every token is held: the stop never matches
  auto held = engine->generate(r);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->finish, FinishReason::length);
  EXPECT_EQ(held->text, full->text);
}

// Synthetic byte tokens: byte b is id 3 + b.
constexpr int32_t byte_id(char c) { return 3 + static_cast<uint8_t>(c); }

// response_format json_object: a +100 EOS would end the output at once; the mask holds it off
// until the object is complete, and lets through only tokens that keep the JSON valid.
TEST_F(LogitRules, JsonObjectOutputIsAnObjectOnEveryPath) {
  GenerateOptions forced = testing::greedy_ids({5, 6, 7}, 10);
  forced.ignore_eos = false;
  forced.sampling.logit_bias = {{kSyntheticEosId, 100.0f}, {byte_id('{'), 50.0f}, {byte_id('}'), 40.0f}};
  GenerateOptions free_text = forced;
  forced.response_format = ResponseFormat::json_object;
  std::vector<std::vector<int32_t>> first;
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    auto plain = engine->generate(free_text);
    ASSERT_TRUE(plain.has_value()) << name;
    EXPECT_EQ(plain->token_ids, std::vector<int32_t>{kSyntheticEosId}) << name << ": without the mask EOS wins";
    auto obj = engine->generate(forced);
    ASSERT_TRUE(obj.has_value()) << name;
    EXPECT_EQ(obj->token_ids, (std::vector<int32_t>{byte_id('{'), byte_id('}'), kSyntheticEosId})) << name;
    EXPECT_EQ(obj->text, "{}") << name;
    EXPECT_EQ(obj->finish, FinishReason::stop) << name;
    // Seeded sampling over the whole vocabulary (merged tokens too): every output is a JSON
    // object when it ends, or a valid beginning of one when max_tokens cut it.
    std::vector<std::vector<int32_t>> outs;
    int n_closed = 0;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      GenerateOptions r = testing::greedy_ids({9, 10, 11}, 48);
      r.ignore_eos = false;
      r.response_format = ResponseFormat::json_object;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = seed;
      r.sampling.logit_bias = {{kSyntheticEosId, 100.0f}, {byte_id('}'), 2.0f}, {byte_id('"'), 3.0f}};
      auto out = engine->generate(r);
      ASSERT_TRUE(out.has_value()) << name;
      if (out->finish == FinishReason::stop) {
        ++n_closed;
        const auto doc = nlohmann::json::parse(out->text, nullptr, false);
        EXPECT_TRUE(!doc.is_discarded() && doc.is_object()) << name << ": " << out->text;
      } else {
        EXPECT_EQ(out->finish, FinishReason::length) << name;
        JsonMatcher m;
        EXPECT_TRUE(m.feed(out->text)) << name << ": " << out->text;
      }
      outs.push_back(out->token_ids);
    }
    EXPECT_GE(n_closed, 6) << name;
    if (first.empty()) first = outs;
    EXPECT_EQ(outs, first) << name << ": the same seeds give the same tokens on every path";
  }
}

// Eight seeded requests (shape sets the output format) run alone on a roomy pool and together
// on one too small for all (preemption, recompute): the same tokens; `fits` checks each text.
void expect_preemption_keeps_outputs(const EngineOptions& base, const std::function<void(GenerateOptions&)>& shape,
                                     const std::function<bool(const std::string&)>& fits) {
  std::vector<GenerateOptions> reqs;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    GenerateOptions r = testing::greedy_ids({9, 10, 11, static_cast<int32_t>(12 + seed % 2)}, 40);
    r.ignore_eos = true;  // outputs run to max_tokens
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    shape(r);
    reqs.push_back(r);
  }
  auto roomy = make(base);
  ASSERT_NE(roomy, nullptr);
  std::vector<Completion> alone;
  for (const auto& r : reqs) alone.push_back(*roomy->generate(r));
  EngineOptions o = base;
  o.topology.instances.front().kv.pages = 10;  // 160 token slots for 8 sequences of 44
  auto tight = make(o);
  ASSERT_NE(tight, nullptr);
  const auto together = testing::run_concurrently(*tight, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(together[i].token_ids, alone[i].token_ids) << "request " << i;
    EXPECT_TRUE(fits(together[i].text)) << together[i].text;
  }
  EXPECT_GT(tight->stats().preemptions, 0u) << "the pool was too small for every sequence at once";
}

// JSON sequences preempted under a tight pool (recomputed from prompt + output) rebuild their
// matcher from the tokens they are fed: the outputs of a roomy pool. (A start from a cached
// prefix of the sequence's own output: StepRunnerPaths.JsonAndSchemaMatchersAreRebuiltFromTheHistory.)
TEST_F(LogitRules, JsonObjectSurvivesPreemption) {
  // ignore_eos: outputs run inside strings and past the object's end.
  expect_preemption_keeps_outputs(
      options(),
      [](GenerateOptions& r) {
        r.response_format = ResponseFormat::json_object;
        r.sampling.logit_bias = {{byte_id('}'), 2.0f}, {byte_id('"'), 3.0f}};
      },
      [](const std::string& text) { return JsonMatcher().feed(text); });
}

// A schema with every kind of constraint the matcher enforces; `valid` checks an output
// against it independently of SchemaMatcher (nlohmann's parser + the rules by hand).
constexpr const char* kRecordSchema = R"({"type": "object", "properties": {
    "id": {"type": "integer", "minimum": 0, "maximum": 999},
    "name": {"type": "string", "maxLength": 6},
    "tags": {"type": "array", "items": {"enum": ["a", "bc", 7]}, "maxItems": 2},
    "ok": {"type": ["boolean", "null"]}},
  "required": ["id", "name", "ok"], "additionalProperties": false})";

// Code points of UTF-8 text (JSON Schema lengths count them).
size_t utf8_length(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
}

bool valid_record(const std::string& text) {
  const auto doc = nlohmann::ordered_json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("id") || !doc.contains("name") || !doc.contains("ok"))
    return false;
  for (const auto& [k, v] : doc.items()) {
    if (k == "id" && !(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 999)) return false;
    if (k == "name" && !(v.is_string() && utf8_length(v.get<std::string>()) <= 6)) return false;
    if (k == "tags") {
      if (!v.is_array() || v.size() > 2) return false;
      for (const auto& t : v)
        if (t != "a" && t != "bc" && t != 7) return false;
    }
    if (k == "ok" && !(v.is_boolean() || v.is_null())) return false;
    if (k != "id" && k != "name" && k != "tags" && k != "ok") return false;
  }
  return true;
}

// response_format json_schema: seeded sampling over the whole vocabulary with EOS at +100 (it
// comes as soon as the mask lets it): every output that ends is an instance, one cut by
// max_tokens the beginning of one, and the same seeds give the same tokens on every path.
TEST_F(LogitRules, JsonSchemaOutputIsAnInstanceOnEveryPath) {
  std::vector<std::vector<int32_t>> first;
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    std::vector<std::vector<int32_t>> outs;
    int n_closed = 0;
    for (uint64_t seed = 0; seed < 10; ++seed) {
      GenerateOptions r = testing::greedy_ids({9, 10, 11}, 64);
      r.ignore_eos = false;
      r.response_format = ResponseFormat::json_schema;
      r.json_schema = kRecordSchema;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = seed;
      r.sampling.logit_bias = {{kSyntheticEosId, 100.0f}, {byte_id('"'), 4.0f}, {byte_id(','), 3.0f}, {byte_id('}'), 3.0f}};
      auto out = engine->generate(r);
      ASSERT_TRUE(out.has_value()) << name;
      if (out->finish == FinishReason::stop) {
        ++n_closed;
        EXPECT_TRUE(valid_record(out->text)) << name << ": " << out->text;
      } else {
        EXPECT_EQ(out->finish, FinishReason::length) << name;
        auto schema = CompiledSchema::compile(kRecordSchema);
        ASSERT_TRUE(schema.has_value());
        SchemaMatcher m(**schema);
        EXPECT_TRUE(m.feed(out->text)) << name << ": " << out->text;
      }
      outs.push_back(out->token_ids);
    }
    EXPECT_GE(n_closed, 5) << name;
    if (first.empty()) first = outs;
    EXPECT_EQ(outs, first) << name << ": the same seeds give the same tokens on every path";
  }
}

// guided_choice: the output is exactly one of the strings, greedy or sampled, on every path.
TEST_F(LogitRules, GuidedChoiceIsOneOfTheChoicesOnEveryPath) {
  const std::vector<std::string> choices = {"yes", "no", "yes, but", "maybe"};
  std::vector<std::vector<int32_t>> first;
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    std::vector<std::vector<int32_t>> outs;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      GenerateOptions r = testing::greedy_ids({9, 10, 11}, 16);
      r.ignore_eos = false;
      r.response_format = ResponseFormat::choice;
      r.guided_choice = choices;
      r.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
      r.sampling.seed = seed;
      auto out = engine->generate(r);
      ASSERT_TRUE(out.has_value()) << name;
      EXPECT_EQ(out->finish, FinishReason::stop) << name << ": " << out->text;
      EXPECT_NE(std::find(choices.begin(), choices.end(), out->text), choices.end()) << name << ": " << out->text;
      outs.push_back(out->token_ids);
    }
    if (first.empty()) first = outs;
    EXPECT_EQ(outs, first) << name;
  }
}

// Schema sequences preempted under a tight pool rebuild their matchers from the tokens they are
// fed: the outputs of a roomy pool. With ignore_eos a complete instance continues with EOS only.
TEST_F(LogitRules, JsonSchemaSurvivesPreemption) {
  const char* schema = R"({"type": "array", "items": {"type": "string", "minLength": 4}, "minItems": 3})";
  auto compiled = CompiledSchema::compile(schema);
  ASSERT_TRUE(compiled.has_value());
  expect_preemption_keeps_outputs(
      options(),
      [&](GenerateOptions& r) {
        r.response_format = ResponseFormat::json_schema;
        r.json_schema = schema;
        r.sampling.logit_bias = {{byte_id(']'), 3.0f}, {byte_id('"'), 3.0f}};
      },
      [&](const std::string& text) { return SchemaMatcher(**compiled).feed(text); });
}

TEST_F(LogitRules, BadSchemasAreRefusedAtSubmit) {
  auto engine = make(options());
  ASSERT_NE(engine, nullptr);
  GenerateOptions r = testing::greedy_ids({5, 6}, 4);
  r.response_format = ResponseFormat::json_schema;
  r.json_schema = R"x({"type": "string", "pattern": "^a+(?=b)"})x";
  auto id = engine->submit(r, [](const Event&) {});
  ASSERT_FALSE(id.has_value());
  EXPECT_NE(id.status().message().find("lookaround"), std::string::npos) << id.status().message();
  r.response_format = ResponseFormat::choice;
  r.guided_choice = {};
  EXPECT_FALSE(engine->submit(r, [](const Event&) {}).has_value());
}

TEST(LogitRulesNoTokenizer, JsonObjectNeedsTheTokenizer) {
  const fs::path dir = fs::temp_directory_path() / ("brigade_json_no_tok_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(300, 64, 5), dir.string()).is_ok());
  fs::remove(dir / "tokenizer.json");
  fs::remove(dir / "tokenizer_config.json");
  auto engine = Engine::create(testing::test_engine_options(dir.string(), 1));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  GenerateOptions r = testing::greedy_ids({5, 6}, 4);
  r.response_format = ResponseFormat::json_object;
  auto id = (*engine)->submit(r, [](const Event&) {});
  ASSERT_FALSE(id.has_value());
  EXPECT_NE(id.status().message().find("tokenizer"), std::string::npos) << id.status().message();
  engine->reset();
  fs::remove_all(dir);
}

// vLLM's request extras: allowed_token_ids (only these are sampled, on every path) and
// truncate_prompt_tokens (the prompt's last k tokens); include_stop_str_in_output above.
TEST_F(LogitRules, AllowedTokenIdsAreAllThatIsSampledOnEveryPath) {
  GenerateOptions r = testing::greedy_ids({5, 6, 7}, 16);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 3;
  r.sampling.allowed_token_ids = {300, 41, 77};  // any order
  std::vector<int32_t> first;
  for (auto& [name, o] : variants(options())) {
    auto engine = make(o);
    ASSERT_NE(engine, nullptr);
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << name << ": " << out.status().to_string();
    ASSERT_EQ(out->token_ids.size(), 16u) << name;
    for (int32_t t : out->token_ids) EXPECT_TRUE(t == 300 || t == 41 || t == 77) << name << ": " << t;
    if (first.empty()) first = out->token_ids;
    EXPECT_EQ(out->token_ids, first) << name << ": the same seed, the same tokens";
  }
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 1u) << "sampled among them, not one forced";
}

// vLLM's bad_words on every path: the word's tokens (as bad_word_ids spells them with the model's
// tokenizer) never appear in a row in the output; greedy decoding is untouched until the baseline
// would complete a word, and takes another token there.
TEST_F(LogitRules, BadWordsAreNeverGeneratedOnEveryPath) {
  auto json = read_text_file((dir_ / "tokenizer.json").string());
  auto config = read_text_file((dir_ / "tokenizer_config.json").string());
  ASSERT_TRUE(json.has_value() && config.has_value());
  auto tok = load_bpe_tokenizer(*json, *config, "tokenizer.json");
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  GenerateOptions r = testing::greedy_ids({5, 6, 7}, 32);
  std::vector<int32_t> base;
  {
    auto engine = make(options());
    ASSERT_NE(engine, nullptr);
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value());
    base = out->token_ids;
  }
  const auto printable = [](const std::string& t) {
    return !t.empty() && t.find_first_not_of(' ') != std::string::npos &&
           std::all_of(t.begin(), t.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  };
  // A word of n tokens of the baseline's output (from position 1 on, so the banned token has a
  // tokens before it in the output), as the tokenizer spells it.
  const auto word_at = [&](size_t n, std::string& word, std::vector<std::vector<int32_t>>& seqs) {
    for (size_t i = 1; i + n <= base.size(); ++i) {
      const std::vector<int32_t> run(base.begin() + static_cast<std::ptrdiff_t>(i),
                                     base.begin() + static_cast<std::ptrdiff_t>(i + n));
      auto text = (*tok)->decode(run);
      if (!text || !printable(*text)) continue;
      auto ids = bad_word_ids(**tok, {*text});
      if (ids && std::find(ids->begin(), ids->end(), run) != ids->end()) {
        word = *text;
        seqs = *ids;
        return true;
      }
    }
    return false;
  };
  // Where a word's sequence ends in out (its last index), the first such place; npos when none.
  const auto first_hit = [](const std::vector<int32_t>& out, const std::vector<std::vector<int32_t>>& seqs) {
    for (size_t k = 0; k < out.size(); ++k)
      for (const auto& q : seqs)
        if (q.size() <= k + 1 && std::equal(q.begin(), q.end(), out.begin() + static_cast<std::ptrdiff_t>(k + 1 - q.size())))
          return k;
    return std::string::npos;
  };
  for (size_t n : {2u, 1u}) {
    std::string word;
    std::vector<std::vector<int32_t>> seqs;
    ASSERT_TRUE(word_at(n, word, seqs)) << "no " << n << "-token word in the baseline output";
    const size_t k = first_hit(base, seqs);
    ASSERT_NE(k, std::string::npos);
    GenerateOptions banned = r;
    banned.sampling.bad_words = {"  " + word};  // leading spaces are stripped, as vLLM does
    std::vector<int32_t> first;
    for (auto& [name, o] : variants(options())) {
      auto engine = make(o);
      ASSERT_NE(engine, nullptr);
      auto out = engine->generate(banned);
      ASSERT_TRUE(out.has_value()) << name << ": " << out.status().to_string();
      const std::vector<int32_t>& got = out->token_ids;
      ASSERT_EQ(got.size(), base.size()) << name;
      EXPECT_EQ(first_hit(got, seqs), std::string::npos) << name << ": '" << word << "' was generated";
      EXPECT_TRUE(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(k), base.begin())) << name;
      EXPECT_NE(got[k], base[k]) << name;
      if (first.empty()) first = got;
      EXPECT_EQ(got, first) << name << ": greedy, the same tokens";
    }
  }
}

TEST_F(LogitRules, TruncatePromptTokensKeepsTheLastOnes) {
  auto engine = make(options());
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  GenerateOptions tail = testing::greedy_ids({11, 12, 13, 14}, 8);
  auto want = engine->generate(tail);
  ASSERT_TRUE(want.has_value());
  GenerateOptions r = testing::greedy_ids(prompt, 8);
  r.truncate_prompt_tokens = 4;
  auto got = engine->generate(r);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  EXPECT_EQ(got->token_ids, want->token_ids);
  EXPECT_EQ(got->prompt_tokens, 4);
  r.truncate_prompt_tokens = 40;  // longer than the prompt: all of it
  got = engine->generate(r);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->prompt_tokens, 10);
  GenerateOptions text;  // a text prompt is cut after tokenizing
  text.prompt = "hello world";
  text.max_tokens = 4;
  text.sampling.temperature = 0.0f;
  text.truncate_prompt_tokens = 3;
  got = engine->generate(text);
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  EXPECT_EQ(got->prompt_tokens, 3);
}

TEST_F(LogitRules, ImpossibleValuesAreRefused) {
  auto engine = make(options());
  ASSERT_NE(engine, nullptr);
  auto nop = [](const Event&) {};
  struct Bad {
    std::vector<std::pair<int32_t, float>> bias;
    int min_tokens;
    std::string says;
  };
  for (const Bad& b : {Bad{{{512, 1.0f}}, 0, "outside the vocabulary"}, Bad{{{-1, 1.0f}}, 0, "outside the vocabulary"},
                       Bad{{{3, 100.5f}}, 0, "[-100, 100]"}, Bad{{{3, std::nanf("")}}, 0, "[-100, 100]"},
                       Bad{{{3, 1.0f}, {3, 2.0f}}, 0, "twice"}, Bad{{}, 9, "min_tokens"}, Bad{{}, -1, "min_tokens"}}) {
    GenerateOptions r = testing::greedy_ids({5, 6}, 8);
    r.sampling.logit_bias = b.bias;
    r.min_tokens = b.min_tokens;
    auto id = engine->submit(r, nop);
    ASSERT_FALSE(id.has_value()) << b.says;
    EXPECT_EQ(id.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(id.status().message().find(b.says), std::string::npos) << id.status().message();
  }
  EXPECT_TRUE(engine->generate(testing::greedy_ids({5, 6}, 3)).has_value());
  auto refused = [&](const GenerateOptions& r, const std::string& says) {
    auto id = engine->submit(r, nop);
    ASSERT_FALSE(id.has_value()) << says;
    EXPECT_NE(id.status().message().find(says), std::string::npos) << id.status().message();
  };
  GenerateOptions r = testing::greedy_ids({5, 6}, 8);
  r.sampling.allowed_token_ids = {3, 512};
  refused(r, "allowed_token_ids: token id 512 is outside the vocabulary");
  r.sampling.allowed_token_ids = {3, 4, 3};
  refused(r, "names token 3 twice");
  r.sampling.allowed_token_ids = std::vector<int32_t>(4097, 3);
  refused(r, "at most 4096");
  r.sampling.allowed_token_ids.clear();
  r.truncate_prompt_tokens = -2;
  refused(r, "truncate_prompt_tokens");
  r.truncate_prompt_tokens = 0;
  r.sampling.bad_words = {"fine", " \t"};
  refused(r, "bad_words holds an empty word");
  r.sampling.bad_words = std::vector<std::string>(129, "x");
  refused(r, "at most 128");
  r.sampling.bad_words = {std::string(1025, 'x')};
  refused(r, "at most 1024");
  r.sampling.bad_words = {std::string(200, 'x')};  // passes the engine, too many tokens for the tokenizer
  auto out = engine->generate(r);
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.status().message().find("tokens; at most 64"), std::string::npos) << out.status().message();
  EXPECT_TRUE(engine->generate(testing::greedy_ids({5, 6}, 3)).has_value()) << "the engine goes on";
}

}  // namespace
}  // namespace brigade
