// guided_grammar through a whole engine: every output that ends is a whole derivation of the
// grammar, checked by independent parsers (nlohmann::json for a recursive JSON-array grammar,
// std::regex for a regular one), on the synthetic byte-level model over every executor path and
// with Llama 2's real SentencePiece vocabulary, greedy and sampled; the output stops where
// nothing can extend it; bad grammars are refused at submit with their line and column.
#include <gtest/gtest.h>


#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "brigade/engine.h"
#include "core/grammar.h"
#include "core/grammar_matcher.h"
#include "models/synthetic_tokenizer.h"
#include "tests/actors/constrained_output_util.h"
#include "tests/engine_test_util.h"
#include "tests/models/gguf_vocab.h"
#include "tests/models/gguf_writer.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

using testing::byte_id;

// Nested arrays of integers, JSON's syntax: nlohmann::json is the reference.
const char* kArrays = R"(root ::= array
array ::= "[" ( item ("," " "? item)* )? "]"
item ::= array | "-"? [1-9] [0-9]{0,2} | "0"
)";

class GrammarOutput : public testing::SyntheticByteModelTest {};

bool is_prefix(const std::string& grammar, const std::string& text) {
  auto g = CompiledGrammar::compile(grammar);
  return g.has_value() && GrammarMatcher(**g).feed(text);
}

// Sampled over the whole vocabulary with EOS at +100 (it comes as soon as the mask lets it):
// every output that ends parses as JSON arrays of integers, one cut by max_tokens is a prefix of
// a derivation, and the same seeds give the same tokens on every path.
TEST_F(GrammarOutput, OutputParsesOnEveryPath) {
  testing::expect_constrained_on_every_path(
      options(), {[](GenerateOptions& r) {
                    r.response_format = ResponseFormat::grammar;
                    r.grammar = kArrays;
                  },
                  32, {byte_id(']'), 4.0f},
                  [](const std::string& text) {
                    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_array();
                  },
                  [](const std::string& text) { return is_prefix(kArrays, text); }});
}

// EOS held at -100 never ends the output early, yet once nothing can extend the derivation the
// end ids are all that is left: the output stops there.
TEST_F(GrammarOutput, StopsWhereNothingCanExtendTheText) {
  auto engine = testing::create_engine(options());
  ASSERT_NE(engine, nullptr);
  for (uint64_t seed = 0; seed < 6; ++seed) {
    GenerateOptions r = testing::greedy_ids({5, 6, 7}, 40);
    r.ignore_eos = false;
    r.response_format = ResponseFormat::grammar;
    r.grammar = "root ::= answer (\", really\")? \"!\"\nanswer ::= \"yes\" | \"no\" | \"maybe\"";
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.sampling.logit_bias = {{kSyntheticEosId, -100.0f}};
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->finish, FinishReason::stop) << out->text;
    EXPECT_TRUE(std::regex_match(out->text, std::regex("(yes|no|maybe)(, really)?!"))) << out->text;
  }
}

TEST_F(GrammarOutput, BadGrammarsAreRefusedAtSubmit) {
  auto engine = testing::create_engine(options());
  ASSERT_NE(engine, nullptr);
  GenerateOptions r = testing::greedy_ids({5, 6}, 4);
  r.response_format = ResponseFormat::grammar;
  for (const auto& [grammar, says] : std::vector<std::pair<std::string, std::string>>{
           {"root ::= \"a\" b", "grammar line 1, column 14: rule 'b' is used but never defined"},
           {"item ::= \"a\"", "no 'root' rule"},
           {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "grammar line 2, column 1: left recursion"},
           {"root ::= [a-", "unterminated character class"},
           {"", "empty"}}) {
    r.grammar = grammar;
    auto id = engine->submit(r, [](const Event&) {});
    ASSERT_FALSE(id.has_value()) << grammar;
    EXPECT_EQ(id.status().code(), StatusCode::invalid_argument) << grammar;
    EXPECT_NE(id.status().message().find(says), std::string::npos) << grammar << " -> " << id.status().message();
  }
}

// A real vocabulary: Llama 2's 32000 SentencePiece pieces (words with their leading space, byte
// fallback) in a GGUF with tiny synthetic weights. Greedy and sampled; std::regex checks the
// (regular) language.
TEST(GrammarOutputSentencePiece, TextFollowsTheGrammar) {
  const std::string spm = std::string(BRIGADE_TESTDATA) + "/tokenizers/llama2-tokenizer.model";
  if (!fs::exists(spm)) GTEST_SKIP() << "shared testdata not found at " << spm;
  const testing::TempDir dir("engine_grammar_spm");
  const std::string model = dir.file("model.gguf");
  ASSERT_TRUE(testing::write_tiny_llama_gguf(dir.file("hf"), model, 32000, testing::gguf_vocab_from_sentencepiece(spm)).is_ok());
  EngineOptions o = testing::test_engine_options(model, 2);
  o.topology.instances.front().kv.memory_mb = 32;
  auto engine = testing::create_engine(o);
  ASSERT_NE(engine, nullptr);
  const std::string grammar = R"(root ::= name " " verb " " article " " word (" " word){0,4} "."
name ::= "Tom" | "Lily" | "Ben"
verb ::= "was" | "saw" | "had"
article ::= "a" | "the"
word ::= [a-z]+
)";
  const std::regex reference(R"((Tom|Lily|Ben) (was|saw|had) (a|the) [a-z]+( [a-z]+){0,4}\.)");
  int n_closed = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    GenerateOptions r;
    r.prompt = "Once upon a time,";
    r.max_tokens = 64;
    r.response_format = ResponseFormat::grammar;
    r.grammar = grammar;
    r.sampling.temperature = seed == 0 ? 0.0f : 0.9f;
    r.sampling.seed = seed;
    r.sampling.logit_bias = {{2, 100.0f}, {29889, 6.0f}};  // </s> once the sentence may end; '.' helps it end
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    if (out->finish == FinishReason::stop) {
      ++n_closed;
      EXPECT_TRUE(std::regex_match(out->text, reference)) << "seed " << seed << ": '" << out->text << "'";
    } else {
      EXPECT_TRUE(is_prefix(grammar, out->text)) << "seed " << seed << ": '" << out->text << "'";
    }
  }
  EXPECT_GE(n_closed, 3);
}

}  // namespace
}  // namespace brigade
