// guided_regex through a whole engine: every output that ends fullmatches the pattern, checked
// with std::regex (an independent ECMAScript engine) on the synthetic byte-level model over every
// executor path and with Llama 2's real SentencePiece vocabulary, greedy and sampled; the output
// stops where no byte can extend the match.
#include <gtest/gtest.h>


#include <filesystem>
#include <regex>
#include <string>

#include "brigade/engine.h"
#include "core/regex_dfa.h"
#include "core/regex_matcher.h"
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

class RegexOutput : public testing::SyntheticByteModelTest {};

bool is_prefix(const std::string& pattern, const std::string& text) {
  auto re = CompiledRegex::compile(pattern);
  return re.has_value() && RegexMatcher(**re).feed(text);
}

// Sampled over the whole vocabulary with EOS at +100 (it comes as soon as the mask lets it):
// every output that ends fullmatches, one cut by max_tokens is a prefix of a match, and the same
// seeds give the same tokens on every path.
TEST_F(RegexOutput, OutputFullmatchesOnEveryPath) {
  const std::string pattern = R"((\d{3}-[a-z]{2,6}|none)( [A-Z]\w*)?)";
  const std::regex reference(pattern);
  testing::expect_constrained_on_every_path(
      options(), {[&](GenerateOptions& r) {
                    r.response_format = ResponseFormat::regex;
                    r.regex = pattern;
                  },
                  24, {byte_id(' '), 3.0f},
                  [&](const std::string& text) { return std::regex_match(text, reference); },
                  [&](const std::string& text) { return is_prefix(pattern, text); }});
}

// EOS held at -100 never ends the output early, yet once no byte can extend the match the end
// ids are all that is left: the output stops there.
TEST_F(RegexOutput, StopsWhereNothingCanExtendTheMatch) {
  auto engine = testing::create_engine(options());
  ASSERT_NE(engine, nullptr);
  for (uint64_t seed = 0; seed < 6; ++seed) {
    GenerateOptions r = testing::greedy_ids({5, 6, 7}, 40);
    r.ignore_eos = false;
    r.response_format = ResponseFormat::regex;
    r.regex = "(yes|no|maybe)(, really)?!";
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.sampling.logit_bias = {{kSyntheticEosId, -100.0f}};
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value());
    EXPECT_EQ(out->finish, FinishReason::stop) << out->text;
    EXPECT_TRUE(std::regex_match(out->text, std::regex(r.regex))) << out->text;
  }
}

TEST_F(RegexOutput, BadPatternsAreRefusedAtSubmit) {
  auto engine = testing::create_engine(options());
  ASSERT_NE(engine, nullptr);
  GenerateOptions r = testing::greedy_ids({5, 6}, 4);
  r.response_format = ResponseFormat::regex;
  for (const auto& [pattern, says] : std::vector<std::pair<std::string, std::string>>{
           {"a(?=b)", "lookaround"}, {"(a)\\1", "backreference"}, {"(a{1000}){1000}", "too large"},
           {"(ab", "missing ')'"}, {"", "empty"}}) {
    r.regex = pattern;
    auto id = engine->submit(r, [](const Event&) {});
    ASSERT_FALSE(id.has_value()) << pattern;
    EXPECT_EQ(id.status().code(), StatusCode::invalid_argument) << pattern;
    EXPECT_NE(id.status().message().find(says), std::string::npos) << pattern << " -> " << id.status().message();
  }
}

// A thinking model's reasoning comes before the constraint (GenerateOptions::reasoning_end_id):
// with '#' standing in for `</think>` and pushed to +100, the output is '#' and then a whole match,
// on every executor path (the prefill/decode hand-off replays the block to the decode instance).
// Without the '#', the output stays free: greedy bytes that are no prefix of the pattern.
// With a header before the end id (reasoning_header_ids, harmony's `<|channel|>final` before
// `<|message|>`) of '#' too, the first '#' is the header and the second ends the block; with '@'
// as the header, never generated, the '#'s never end it.
TEST_F(RegexOutput, TheRegexAppliesAfterTheReasoningEnds) {
  const std::string pattern = "(yes|no|maybe)!";
  for (const std::vector<int32_t>& header : {std::vector<int32_t>{}, std::vector<int32_t>{byte_id('#')}}) {
    const std::string block(header.size() + 1, '#');
    SCOPED_TRACE(block);
    std::vector<int32_t> first;
    for (auto& [name, o] : testing::variants(options())) {
      auto engine = testing::create_engine(o);
      ASSERT_NE(engine, nullptr);
      GenerateOptions r = testing::greedy_ids({5, 6, 7}, 24);
      r.ignore_eos = false;
      r.response_format = ResponseFormat::regex;
      r.regex = pattern;
      r.reasoning_end_id = byte_id('#');
      r.reasoning_header_ids = header;
      r.sampling.logit_bias = {{byte_id('#'), 100.0f}};
      auto out = engine->generate(r);
      ASSERT_TRUE(out.has_value()) << name << ": " << out.status().to_string();
      EXPECT_TRUE(out->text.starts_with(block)) << name << ": free inside the block, so the +100 wins";
      EXPECT_EQ(out->finish, FinishReason::stop) << name;
      EXPECT_TRUE(std::regex_match(out->text.substr(std::min(block.size(), out->text.size())), std::regex(pattern)))
          << name << ": '" << out->text << "'";
      if (first.empty()) first = out->token_ids;
      EXPECT_EQ(out->token_ids, first) << name << ": the same tokens on every path";

      if (header.empty()) {
        r.sampling.logit_bias = {{byte_id('#'), -100.0f}, {kSyntheticEosId, -100.0f}};
        out = engine->generate(r);
        ASSERT_TRUE(out.has_value()) << name;
        EXPECT_EQ(out->finish, FinishReason::length) << name;
        EXPECT_FALSE(is_prefix(pattern, out->text)) << name << ": the block never ended, so nothing was masked: '"
                                                    << out->text << "'";
      } else {
        r.reasoning_header_ids = {byte_id('@')};
        out = engine->generate(r);
        ASSERT_TRUE(out.has_value()) << name;
        EXPECT_EQ(out->finish, FinishReason::length) << name;
        EXPECT_EQ(out->text, std::string(24, '#')) << name << ": no header, so the block never ended";
      }
    }
  }
}

TEST_F(RegexOutput, ReasoningIdsAreChecked) {
  auto engine = testing::create_engine(options());
  ASSERT_NE(engine, nullptr);
  auto refused = [&](const GenerateOptions& r, const std::string& says) {
    auto id = engine->submit(r, [](const Event&) {});
    ASSERT_FALSE(id.has_value()) << says;
    EXPECT_EQ(id.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(id.status().message().find(says), std::string::npos) << id.status().message();
  };
  GenerateOptions r = testing::greedy_ids({5, 6}, 4);
  r.reasoning_end_id = byte_id('#');
  refused(r, "has neither");  // no response_format to delay, no thinking budget
  r.response_format = ResponseFormat::regex;
  r.regex = "a+";
  r.reasoning_end_id = 512;
  refused(r, "outside the vocabulary");
  r.reasoning_end_id = -1;
  r.reasoning_start_id = byte_id('<');
  refused(r, "needs a reasoning_end_id");
  r.reasoning_end_id = byte_id('<');
  refused(r, "the same token");
  r.reasoning_end_id = byte_id('#');
  EXPECT_TRUE(engine->generate(r).has_value());
  r.reasoning_start_id = -1;
  r.reasoning_header_ids = {byte_id('@'), 512};
  refused(r, "id 512 is outside the vocabulary");
  r.reasoning_header_ids = std::vector<int32_t>(17, byte_id('@'));
  refused(r, "at most 16");
  r.reasoning_header_ids = {byte_id('@')};
  r.reasoning_end_id = -1;
  refused(r, "reasoning_header_ids needs a reasoning_end_id");
  r.reasoning_end_id = byte_id('#');
  EXPECT_TRUE(engine->generate(r).has_value());
  r.response_format = ResponseFormat::text;
  r.reasoning_end_id = -1;
  refused(r, "has neither");
}

// A real vocabulary: Llama 2's 32000 SentencePiece pieces (words with their leading space,
// byte fallback) in a GGUF with tiny synthetic weights; stories260K has no tokenizer here
// (shared/testdata/README.md), so it cannot take text constraints. Greedy and sampled.
TEST(RegexOutputSentencePiece, TextFollowsThePattern) {
  const std::string spm = std::string(BRIGADE_TESTDATA) + "/tokenizers/llama2-tokenizer.model";
  if (!fs::exists(spm)) GTEST_SKIP() << "shared testdata not found at " << spm;
  const testing::TempDir dir("engine_regex_spm");
  const std::string model = dir.file("model.gguf");
  ASSERT_TRUE(testing::write_tiny_llama_gguf(dir.file("hf"), model, 32000, testing::gguf_vocab_from_sentencepiece(spm)).is_ok());
  EngineOptions o = testing::test_engine_options(model, 2);
  o.topology.instances.front().kv.memory_mb = 32;
  auto engine = testing::create_engine(o);
  ASSERT_NE(engine, nullptr);
  const std::string pattern = R"((Tom|Lily|Ben) (was|saw|had) (a|the) [a-z]+( [a-z]+){0,4}\.)";
  int n_closed = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    GenerateOptions r;
    r.prompt = "Once upon a time,";
    r.max_tokens = 64;
    r.response_format = ResponseFormat::regex;
    r.regex = pattern;
    r.sampling.temperature = seed == 0 ? 0.0f : 0.9f;
    r.sampling.seed = seed;
    r.sampling.logit_bias = {{2, 100.0f}, {29889, 6.0f}};  // </s> once the sentence may end; '.' helps it end
    auto out = engine->generate(r);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    if (out->finish == FinishReason::stop) {
      ++n_closed;
      EXPECT_TRUE(std::regex_match(out->text, std::regex(pattern))) << "'" << out->text << "'";
    } else {
      EXPECT_TRUE(is_prefix(pattern, out->text)) << "'" << out->text << "'";
    }
  }
  EXPECT_GE(n_closed, 3);
}

}  // namespace
}  // namespace brigade
