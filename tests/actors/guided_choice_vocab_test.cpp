// guided_choice over real vocabularies: Llama 2's SentencePiece pieces ("▁functools", byte
// fallback), GPT-2's byte-level BPE ("Ġfunctools", from llama.cpp's vocabulary GGUF), Kimi-K2's
// tiktoken ranks and Mistral's tekken. A choice that begins with a space, a newline or a
// multi-byte character is produced byte for byte, whichever allowed token a model picks at each
// step (the longest piece, as a model that prefers whole words; the shortest, one byte at a time):
// the tokens' bytes, as the server streams them (token_to_piece; SentencePiece's whole-text decode
// would drop the first token's leading space, vLLM's incremental detokenizer does not), are the
// choice. The tokenizer's own encoding of the choice (where it spells exactly the choice) is
// allowed token by token. The reference is the choice's own bytes, as vLLM's choice_as_grammar makes each choice a
// literal of an EBNF alternation that xgrammar matches against the tokens' decoded bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "actors/executor/output_constraints.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

struct Vocabulary {
  const char* name;
  std::string path;
};

std::vector<Vocabulary> vocabularies() {
  const std::string shared = std::string(BRIGADE_TESTDATA) + "/tokenizers/";
  const std::string fixtures = std::string(BRIGADE_FIXTURES) + "/tokenizers/";
  return {{"llama2 sentencepiece", shared + "llama2-tokenizer.model"},
          {"gpt-2 byte-level (gguf)", shared + "ggml-vocab-gpt-2.gguf"},
          {"kimi tiktoken", fixtures + "tiktoken/kimi"},
          {"tekken", fixtures + "tekken_json/tekken.json"}};
}

const std::vector<std::string> kChoices = {" functools[]", "\n\nx = 1", "\xc3\xbc" "ber", " \xc3\xbc" "ber",
                                           "\xe6\x97\xa5\xe6\x9c\xac", "\tTab", " "};

enum class Pick { longest, shortest };

std::string joined(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += tok.token_to_piece(id);
  return out;
}

// Drives the constraint with one choice, picking per `pick` among the allowed tokens until the
// output is complete; the ids picked (empty, with a failure, when a step allows nothing).
std::vector<int32_t> drive(const TokenTrie& trie, const std::string& choice, Pick pick) {
  OutputConstraints c(std::shared_ptr<const TokenTrie>(&trie, [](const TokenTrie*) {}));
  SamplingConfig cfg;
  cfg.guided_choice = {choice};
  std::vector<int32_t> ids;
  for (int step = 0; step < 64; ++step) {
    bool complete = false;
    const std::vector<uint8_t>* mask = c.allowed(1, cfg, complete);
    if (!mask) {
      ADD_FAILURE() << "no mask";
      return {};
    }
    if (complete) return ids;
    int32_t best = -1;
    for (int32_t id = 0; id < trie.vocab_size(); ++id) {
      if (!(*mask)[static_cast<size_t>(id)]) continue;
      const size_t n = trie.piece(id).size();
      if (best < 0 || (pick == Pick::longest ? n > trie.piece(best).size() : n < trie.piece(best).size())) best = id;
    }
    if (best < 0) {
      ADD_FAILURE() << "step " << step << ": no token allowed after " << ids.size() << " tokens";
      return {};
    }
    ids.push_back(best);
    c.feed(1, cfg, best);
  }
  ADD_FAILURE() << "not complete after 64 tokens";
  return {};
}

TEST(GuidedChoiceVocabulary, ChoicesBeginningWithBlanksOrMultibyteAreProducedExactly) {
  int n_checked = 0;
  for (const Vocabulary& v : vocabularies()) {
    SCOPED_TRACE(v.name);
    if (!fs::exists(v.path)) {
      std::cerr << "skipping " << v.name << ": " << v.path << " not found\n";
      continue;
    }
    auto tok = Tokenizer::load(v.path);
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    const TokenTrie trie(token_pieces(**tok));
    for (const std::string& choice : kChoices) {
      SCOPED_TRACE("choice '" + choice + "'");
      ASSERT_TRUE(trie.spells(choice));
      for (Pick pick : {Pick::longest, Pick::shortest}) {
        const std::vector<int32_t> ids = drive(trie, choice, pick);
        EXPECT_EQ(joined(**tok, ids), choice) << (pick == Pick::longest ? "longest" : "shortest") << " pieces";
      }
      // The tokenizer's own ids for the choice, where they spell it exactly (SentencePiece adds
      // its dummy-prefix space, so " x" encodes as "  x" there).
      auto own = (*tok)->encode(choice, /*add_bos=*/false);
      ASSERT_TRUE(own.has_value());
      if (joined(**tok, *own) != choice) continue;
      OutputConstraints c(std::shared_ptr<const TokenTrie>(&trie, [](const TokenTrie*) {}));
      SamplingConfig cfg;
      cfg.guided_choice = {choice};
      bool complete = false;
      for (int32_t id : *own) {
        const std::vector<uint8_t>* mask = c.allowed(1, cfg, complete);
        ASSERT_NE(mask, nullptr);
        EXPECT_EQ((*mask)[static_cast<size_t>(id)], 1) << "token " << id << " '" << trie.piece(id) << "'";
        c.feed(1, cfg, id);
      }
      c.allowed(1, cfg, complete);
      EXPECT_TRUE(complete);
      ++n_checked;
    }
  }
  if (n_checked == 0) GTEST_SKIP() << "no vocabulary found (shared testdata and fixtures)";
}

// A choice no sequence of tokens spells (a character the vocabulary lacks, no byte fallback):
// spells() says so, which the engine turns into a refusal (tests/server/http_guided_choice_test.cpp).
TEST(GuidedChoiceVocabulary, TextWithoutTokensIsNotSpelled) {
  const std::string xlmr = std::string(BRIGADE_FIXTURES) + "/tokenizers/unigram/xlmr/tokenizer.json";
  auto tok = Tokenizer::load(xlmr);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const TokenTrie trie(token_pieces(**tok));
  EXPECT_TRUE(trie.spells(" token"));  // "▁token"
  EXPECT_TRUE(trie.spells(" Stra\xc3\x9f"));  // "▁Straß"
  EXPECT_FALSE(trie.spells("\nyes")) << "XLM-R has no newline piece";
  EXPECT_FALSE(trie.spells("Q"));
}

}  // namespace
}  // namespace brigade
