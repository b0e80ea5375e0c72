// OutputConstraints: masks per constrained sequence, each distinct schema compiled once, at most
// kMaxSchemas kept (a sequence keeps its own alive), and a schema (or regex, grammar) it cannot compile leaves the
// sequence unconstrained instead of failing the executor.
#include "actors/executor/output_constraints.h"

#include <gtest/gtest.h>

namespace brigade {
namespace {

// Ids: 0 "" (special), then one token per character of kChars.
constexpr std::string_view kChars = "{}\":,0123456789abn ";

// ...then the reasoning tags.
std::shared_ptr<const TokenTrie> vocab() {
  std::vector<std::string> pieces = {""};
  for (char c : kChars) pieces.emplace_back(1, c);
  pieces.emplace_back("<think>");
  pieces.emplace_back("</think>");
  for (const char* harmony : {"<|channel|>", "final", "<|message|>"}) pieces.emplace_back(harmony);
  return std::make_shared<const TokenTrie>(pieces);
}

int32_t id(char c) { return 1 + static_cast<int32_t>(kChars.find(c)); }
constexpr int32_t kOpen = 1 + static_cast<int32_t>(kChars.size());
constexpr int32_t kClose = kOpen + 1;
constexpr int32_t kChannel = kClose + 1, kFinal = kClose + 2, kMessage = kClose + 3;

SamplingConfig schema_config(int max) {
  SamplingConfig cfg;
  cfg.json_schema = R"({"type": "integer", "minimum": 0, "maximum": )" + std::to_string(max) + "}";
  return cfg;
}

TEST(OutputConstraints, MasksFollowEachSequencesSchema) {
  OutputConstraints c(vocab());
  bool complete = true;
  const SamplingConfig small = schema_config(5);
  const std::vector<uint8_t>* mask = c.allowed(1, small, complete);
  ASSERT_NE(mask, nullptr);
  EXPECT_FALSE(complete);
  for (char ch : std::string("012345")) EXPECT_EQ((*mask)[static_cast<size_t>(id(ch))], 1) << ch;
  EXPECT_EQ((*mask)[static_cast<size_t>(id('6'))], 0);
  EXPECT_EQ((*mask)[0], 0) << "special tokens never";
  c.feed(1, small, id('3'));
  mask = c.allowed(1, small, complete);
  EXPECT_TRUE(complete);
  EXPECT_EQ(std::count(mask->begin(), mask->end(), 1), 0) << "3 is complete and nothing extends it";

  SamplingConfig choice;
  choice.guided_choice = {"ab", "an"};
  c.feed(2, choice, id('a'));
  mask = c.allowed(2, choice, complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('b'))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('a'))], 0);
  EXPECT_EQ(c.n_compiled(), 2u);
  c.allowed(3, small, complete);  // the same text: compiled once
  EXPECT_EQ(c.n_compiled(), 2u);

  SamplingConfig regex;  // guided_regex: a RegexMatcher over the same vocabulary
  regex.regex = "(ab|n)[0-9]{2}";
  mask = c.allowed(4, regex, complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('a'))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('n'))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('b'))], 0);
  for (char ch : std::string("n42")) c.feed(4, regex, id(ch));
  mask = c.allowed(4, regex, complete);
  EXPECT_TRUE(complete);
  EXPECT_EQ(std::count(mask->begin(), mask->end(), 1), 0) << "n42 is complete and nothing extends it";
  EXPECT_EQ(c.n_compiled(), 3u);

  SamplingConfig grammar;  // guided_grammar: a GrammarMatcher over the same vocabulary
  grammar.grammar = "root ::= \"{\" item (\",\" item)* \"}\"\nitem ::= [0-9] | root";
  mask = c.allowed(5, grammar, complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ(std::count(mask->begin(), mask->end(), 1), 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('{'))], 1);
  for (char ch : std::string("{1,{2")) c.feed(5, grammar, id(ch));
  mask = c.allowed(5, grammar, complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ((*mask)[static_cast<size_t>(id(','))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('}'))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('3'))], 0);
  for (char ch : std::string("}}")) c.feed(5, grammar, id(ch));
  mask = c.allowed(5, grammar, complete);
  EXPECT_TRUE(complete);
  EXPECT_EQ(std::count(mask->begin(), mask->end(), 1), 0) << "{1,{2}} is complete and nothing extends it";
  EXPECT_EQ(c.n_compiled(), 4u);
}

// vLLM's structured output with a reasoning parser: free until `</think>`, then the constraint
// from its start, whatever the reasoning held.
TEST(OutputConstraints, TheConstraintStartsAfterTheReasoning) {
  OutputConstraints c(vocab());
  bool complete = true;
  SamplingConfig cfg = schema_config(5);
  cfg.reasoning_end = kClose;
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr) << "inside the block: no mask";
  for (char ch : std::string("{9}ab 7")) c.feed(1, cfg, id(ch));  // what the constraint would refuse
  c.feed(1, cfg, kOpen);
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr) << "a second <think> does not end the block";
  c.feed(1, cfg, kClose);
  const std::vector<uint8_t>* mask = c.allowed(1, cfg, complete);
  ASSERT_NE(mask, nullptr);
  EXPECT_FALSE(complete);
  for (char ch : std::string("012345")) EXPECT_EQ((*mask)[static_cast<size_t>(id(ch))], 1) << ch;
  EXPECT_EQ((*mask)[static_cast<size_t>(id('7'))], 0) << "the reasoning's 7 was not fed to the schema";
  EXPECT_EQ((*mask)[static_cast<size_t>(kOpen)], 0);
  EXPECT_EQ((*mask)[static_cast<size_t>(kClose)], 0);
  c.feed(1, cfg, id('4'));
  c.allowed(1, cfg, complete);
  EXPECT_TRUE(complete);
  c.feed(1, cfg, kClose);  // a second </think> in the answer is answer text, which breaks it
  mask = c.allowed(1, cfg, complete);
  EXPECT_EQ(std::count(mask->begin(), mask->end(), 1), 0);

  c.release(1);
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr) << "a released sequence id starts over, in the block";
}

TEST(OutputConstraints, TheFirstTokenMayOpenTheReasoning) {
  OutputConstraints c(vocab());
  bool complete = true;
  SamplingConfig cfg = schema_config(5);
  cfg.reasoning_end = kClose;
  cfg.reasoning_start = kOpen;
  const std::vector<uint8_t>* mask = c.allowed(1, cfg, complete);
  ASSERT_NE(mask, nullptr);
  EXPECT_FALSE(complete);
  EXPECT_EQ((*mask)[static_cast<size_t>(kOpen)], 1) << "the answer, or <think>";
  EXPECT_EQ((*mask)[static_cast<size_t>(id('3'))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('7'))], 0);
  EXPECT_EQ((*mask)[static_cast<size_t>(kClose)], 0);
  std::vector<uint8_t> opened = *mask;
  opened[static_cast<size_t>(kOpen)] = 0;
  EXPECT_EQ(opened, *c.allowed(9, schema_config(5), complete)) << "else the schema's own mask";

  c.feed(1, cfg, kOpen);  // opened: free until </think>
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr);
  c.feed(1, cfg, id('9'));
  c.feed(1, cfg, kClose);
  mask = c.allowed(1, cfg, complete);
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ((*mask)[static_cast<size_t>(kOpen)], 0) << "the block is over";
  EXPECT_EQ((*mask)[static_cast<size_t>(id('3'))], 1);

  c.feed(2, cfg, id('3'));  // the answer at once: <think> is no longer possible
  mask = c.allowed(2, cfg, complete);
  ASSERT_NE(mask, nullptr);
  EXPECT_TRUE(complete);
  EXPECT_EQ(std::count(mask->begin(), mask->end(), 1), 0) << "3 was the schema's, and complete";
}

// gpt-oss's harmony (vLLM's gpt-oss reasoning end): the answer is the message after
// `<|channel|>` `final`; `<|message|>` ends the block only when it comes at most 20 tokens after
// that header in a row, and the latest header counts.
TEST(OutputConstraints, AHeaderMustComeShortlyBeforeTheReasoningEnd) {
  OutputConstraints c(vocab());
  bool complete = true;
  SamplingConfig cfg = schema_config(5);
  cfg.reasoning_end = kMessage;
  cfg.reasoning_header = {kChannel, kFinal};
  auto feed = [&](uint64_t seq, const std::vector<int32_t>& tokens) {
    for (int32_t t : tokens) c.feed(seq, cfg, t);
  };
  auto spaces = [](int n) { return std::vector<int32_t>(static_cast<size_t>(n), id(' ')); };

  feed(1, {kChannel, id('a'), id('n'), kMessage, id('7')});  // <|channel|>an<|message|>7: another channel
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr);
  feed(1, {kFinal, kMessage});  // "final" without <|channel|> right before it
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr);
  feed(1, {kChannel, id(' '), kFinal, kMessage});  // the header's tokens not in a row
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr);
  feed(1, {kChannel, kFinal});
  feed(1, spaces(21));
  feed(1, {kMessage});  // 21 tokens after the header: too far
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr);
  feed(1, {kChannel, kFinal});
  feed(1, spaces(20));
  EXPECT_EQ(c.allowed(1, cfg, complete), nullptr) << "the header alone does not end the block";
  feed(1, {kMessage});  // 20 tokens after it: the final message starts
  const std::vector<uint8_t>* mask = c.allowed(1, cfg, complete);
  ASSERT_NE(mask, nullptr);
  EXPECT_FALSE(complete);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('3'))], 1);
  EXPECT_EQ((*mask)[static_cast<size_t>(id('7'))], 0) << "the reasoning's 7 was not fed to the schema";
  EXPECT_EQ((*mask)[static_cast<size_t>(kMessage)], 0);
  c.feed(1, cfg, id('4'));
  c.allowed(1, cfg, complete);
  EXPECT_TRUE(complete);

  feed(2, {kChannel, kFinal});  // a second header 15 tokens on restarts the count
  feed(2, spaces(15));
  feed(2, {kChannel, kFinal});
  feed(2, spaces(15));
  feed(2, {kMessage});
  EXPECT_NE(c.allowed(2, cfg, complete), nullptr) << "15 tokens after the latest header";

  SamplingConfig open_first = cfg;  // a header together with reasoning_start: <think> opens the block
  open_first.reasoning_start = kOpen;
  c.feed(3, open_first, kOpen);
  feed(3, {kChannel, kFinal});
  EXPECT_EQ(c.allowed(3, open_first, complete), nullptr);
  c.feed(3, open_first, kMessage);
  EXPECT_NE(c.allowed(3, open_first, complete), nullptr);
}

TEST(OutputConstraints, KeepsABoundedNumberOfSchemas) {
  OutputConstraints c(vocab());
  bool complete = false;
  const SamplingConfig first = schema_config(1);
  c.feed(100, first, id('1'));  // sequence 100 holds the first schema
  for (int i = 2; i < 2 + static_cast<int>(OutputConstraints::kMaxSchemas) + 4; ++i) c.allowed(static_cast<uint64_t>(i), schema_config(i), complete);
  const size_t compiled = c.n_compiled();
  c.allowed(100, first, complete);  // evicted from the cache, alive in its sequence
  EXPECT_TRUE(complete);
  EXPECT_EQ(c.n_compiled(), compiled);
  c.release(100);
  c.allowed(101, first, complete);  // a new sequence compiles it again
  EXPECT_EQ(c.n_compiled(), compiled + 1);
}

TEST(OutputConstraints, AnUncompilableSchemaLeavesTheSequenceUnconstrained) {
  OutputConstraints c(vocab());
  SamplingConfig bad;
  bad.json_schema = R"({"type": "string", "not": {}})";
  bool complete = false;
  EXPECT_EQ(c.allowed(1, bad, complete), nullptr);
  SamplingConfig bad_regex;
  bad_regex.regex = "a(?=b)";
  EXPECT_EQ(c.allowed(2, bad_regex, complete), nullptr);
  SamplingConfig bad_grammar;
  bad_grammar.grammar = "root ::= root \"a\"";
  EXPECT_EQ(c.allowed(3, bad_grammar, complete), nullptr);
  EXPECT_EQ(OutputConstraints(nullptr).allowed(1, schema_config(3), complete), nullptr) << "no vocabulary";
}

}  // namespace
}  // namespace brigade
