// GrammarMatcher + TokenTrie against llama.cpp's own grammar sampler:
// tests/fixtures/grammar/llamacpp.json (scripts/make_grammar_fixtures.py) holds, for two real
// vocabularies (Llama 2 SentencePiece, GPT-2 byte-level BPE; the GGUF files in
// shared/testdata/tokenizers, loaded by brigade's own tokenizer) and ~25 grammars, walks of
// token choices with llama.cpp's allowed set and EOS verdict at every step; strings it labels
// match / prefix / neither; grammars it refuses. The masks must be the same sets, except where
// brigade documents otherwise (core/grammar.h, core/grammar_matcher.h):
//  - control tokens (<s>: llama.cpp matches its text "<s>") are never allowed;
//  - a token that ends mid-character under a negated class that excludes non-ASCII characters
//    is allowed when some completion is (llama.cpp refuses it when any completion is excluded);
//  - EOS is not allowed while a character is unfinished.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/grammar.h"
#include "core/grammar_matcher.h"
#include "core/token_trie.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

const std::string kVocabDir = std::string(BRIGADE_TESTDATA) + "/tokenizers/";

nlohmann::json load_fixture() {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/grammar/llamacpp.json");
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::string fnv(const std::vector<int32_t>& sorted_ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : sorted_ids)
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<uint32_t>(id) >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Continuation bytes still due after `bytes`, counted as llama.cpp's decoder counts them.
int remaining(const std::string& bytes, int need = 0) {
  for (char c : bytes) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (need > 0) {
      --need;
    } else if (b >= 0xC0) {
      need = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
    }
  }
  return need;
}

std::vector<int32_t> ids_of(const nlohmann::json& a) { return a.get<std::vector<int32_t>>(); }

std::string diff(const std::vector<int32_t>& ours, const nlohmann::json& theirs, const TokenTrie& trie) {
  if (!theirs.contains("ids")) return " (llama.cpp's ids not stored; rerun the script to see them)";
  const std::vector<int32_t> ref = ids_of(theirs["ids"]);
  std::string out;
  std::set<int32_t> a(ours.begin(), ours.end()), b(ref.begin(), ref.end());
  for (int32_t id : a)
    if (!b.count(id)) out += " +" + std::to_string(id) + "'" + trie.piece(id) + "'";
  for (int32_t id : b)
    if (!a.count(id)) out += " -" + std::to_string(id) + "'" + trie.piece(id) + "'";
  return out.substr(0, 600);
}

class GrammarVsLlamaCpp : public ::testing::Test {
 protected:
  void SetUp() override {
    doc_ = load_fixture();
    ASSERT_TRUE(doc_.is_object() && doc_.contains("vocabs")) << "tests/fixtures/grammar/llamacpp.json (scripts/make_grammar_fixtures.py)";
    for (const auto& g : doc_["grammars"]) texts_[g["name"]] = g["text"];
  }
  std::shared_ptr<const CompiledGrammar> grammar(const std::string& name) {
    auto g = CompiledGrammar::compile(texts_.at(name));
    EXPECT_TRUE(g.has_value()) << name << ": " << g.status().to_string();
    return g.has_value() ? *g : nullptr;
  }
  nlohmann::json doc_;
  std::map<std::string, std::string> texts_;
};

TEST_F(GrammarVsLlamaCpp, SameMasksOnEveryWalkStep) {
  size_t n_steps = 0;
  for (const auto& vocab : doc_["vocabs"]) {
    const std::string path = kVocabDir + vocab["file"].get<std::string>();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "test data absent: " << path;
    auto tok = Tokenizer::load(path);
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    ASSERT_EQ((*tok)->vocab_size(), vocab["n_vocab"].get<int>());
    const std::vector<std::string> pieces = token_pieces(**tok);
    // The tokens brigade gives no text are exactly the ones llama.cpp calls control/unknown.
    std::vector<int32_t> empty;
    for (size_t id = 0; id < pieces.size(); ++id)
      if (pieces[id].empty()) empty.push_back(static_cast<int32_t>(id));
    ASSERT_EQ(empty, ids_of(vocab["special"])) << vocab["file"];
    const auto trie = std::make_shared<const TokenTrie>(pieces);
    for (const auto& entry : vocab["grammars"]) {
      const std::string name = entry["name"];
      auto g = grammar(name);
      if (!g) continue;
      const bool partial_superset = entry["partial_ids"];
      for (const auto& walk : entry["walks"]) {
        GrammarMatcher m(*g);
        std::string text;
        std::vector<uint8_t> mask;
        int step_no = 0;
        for (const auto& step : walk["steps"]) {
          const std::string at = vocab["file"].get<std::string>() + " " + name + " step " + std::to_string(step_no++) + " after '" + text + "'";
          trie->allowed(m, mask);
          std::vector<int32_t> whole, partial;
          const int need = remaining(text);
          for (int32_t id = 0; id < trie->vocab_size(); ++id)
            if (mask[static_cast<size_t>(id)]) (remaining(trie->piece(id), need) > 0 ? partial : whole).push_back(id);
          EXPECT_EQ(whole.size(), step["whole"]["n"].get<size_t>()) << at << diff(whole, step["whole"], *trie);
          EXPECT_EQ(fnv(whole), step["whole"]["hash"].get<std::string>()) << at << diff(whole, step["whole"], *trie);
          if (partial_superset) {
            const std::set<int32_t> ours(partial.begin(), partial.end());
            for (int32_t id : ids_of(step["partial"]["ids"])) EXPECT_TRUE(ours.count(id)) << at << ": llama.cpp allows " << id;
          } else {
            EXPECT_EQ(fnv(partial), step["partial"]["hash"].get<std::string>()) << at << diff(partial, step["partial"], *trie);
          }
          for (int32_t id : ids_of(step["special"])) EXPECT_FALSE(mask[static_cast<size_t>(id)]) << at;
          EXPECT_EQ(m.complete(), step["eos"].get<bool>() && !step["mid"].get<bool>()) << at;
          ++n_steps;
          const int32_t token = step["token"];
          if (token < 0) break;
          ASSERT_TRUE(mask[static_cast<size_t>(token)]) << at << ": llama.cpp's pick " << token << " is masked";
          ASSERT_TRUE(m.feed(trie->piece(token))) << at;
          text += trie->piece(token);
        }
      }
    }
  }
  EXPECT_GT(n_steps, 500u);
}

TEST_F(GrammarVsLlamaCpp, SameVerdictOnStrings) {
  for (const auto& c : doc_["strings"]) {
    auto g = grammar(c["grammar"]);
    if (!g) continue;
    const std::string text = c["text"], label = c["label"];
    GrammarMatcher m(*g);
    const bool fed = m.feed(text);
    const std::string ours = !fed ? "neither" : m.complete() ? "match" : "prefix";
    EXPECT_EQ(ours, label) << c["grammar"] << ": '" << text << "'";
  }
}

TEST_F(GrammarVsLlamaCpp, RefusesWhatLlamaCppRefuses) {
  for (const auto& c : doc_["parse"]) {
    const std::string text = c["grammar"];
    auto g = CompiledGrammar::compile(text);
    EXPECT_EQ(g.has_value(), c["llama_cpp_accepts"].get<bool>()) << text << "\n" << (g.has_value() ? "" : g.status().to_string());
  }
}

}  // namespace
}  // namespace brigade
