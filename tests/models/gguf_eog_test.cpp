// Where a GGUF model stops: the end-of-generation tokens of its vocabulary (models/gguf_eog.h)
// against llama.cpp's own (llama_vocab_is_eog over every id, recorded by
// scripts/make_gguf_fixtures.py --llamacpp and --eog): the GGUF fixtures, and three
// vocabulary-only files (tests/fixtures/gguf_vocab_eog) made to cover llama.cpp's texts, the keys
// that name eot, eom and the FIM tokens, and its two exceptions (<|end|> beside harmony's or
// solar-open's ends, </s> beside <|tool_response>).
#include <gtest/gtest.h>

#include <algorithm>

#include "chat_test_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/gguf.h"
#include "models/gguf_eog.h"

namespace brigade {
namespace {

using testing::fixture_dir;

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int> eog_of(const std::string& path) {
  auto g = GgufFile::open(path);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  if (!g) return {};
  auto ids = gguf_end_of_generation_ids(**g);
  EXPECT_TRUE(ids.has_value()) << ids.status().to_string();
  return ids ? *ids : std::vector<int>{};
}

TEST(GgufEog, EveryFixtureEndsWhereLlamaCppEnds) {
  for (const char* fixture : {"gguf_gemma2", "gguf_gemma3", "gguf_gpt_oss", "gguf_qwen2moe", "gguf_glm4moe"}) {
    SCOPED_TRACE(fixture);
    const auto ref = testing::load_fixture_json(std::string(fixture) + "/llamacpp.json");
    ASSERT_TRUE(ref.contains("eog")) << "run scripts/make_gguf_fixtures.py --llamacpp";
    const auto want = ref["eog"].get<std::vector<int>>();
    const std::string path = fixture_dir(fixture) + "/model.gguf";
    EXPECT_EQ(sorted(eog_of(path)), want);
    auto ck = Checkpoint::open(path);
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    EXPECT_EQ(sorted((*ck)->config().eos_ids), want) << "the model stops at them";
  }
}

TEST(GgufEog, TextsKeysAndExceptionsAsLlamaCpp) {
  const auto ref = testing::load_fixture_json("gguf_vocab_eog/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded()) << "run scripts/make_gguf_fixtures.py --eog";
  ASSERT_EQ(ref["files"].size(), 3u);
  for (const auto& [name, file] : ref["files"].items()) {
    SCOPED_TRACE(name);
    const std::vector<int> got = eog_of(fixture_dir("gguf_vocab_eog") + "/" + name + ".gguf");
    EXPECT_EQ(sorted(got), file["eog"].get<std::vector<int>>());
  }
  // The file's eos comes first (the id a server reports as eos), then its eot and eom: in c the eot
  // found by its text is <|end|>, which the exception then drops, so the eom named by key follows.
  auto g = GgufFile::open(fixture_dir("gguf_vocab_eog") + "/c.gguf");
  ASSERT_TRUE(g.has_value());
  const auto tokens = (*g)->find("tokenizer.ggml.tokens")->strs;
  const std::vector<int> c = eog_of(fixture_dir("gguf_vocab_eog") + "/c.gguf");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(tokens[static_cast<size_t>(c[0])], "[EOS]");
  EXPECT_EQ(tokens[static_cast<size_t>(c[1])], "<|observation|>") << "eom by its key";
  EXPECT_EQ(std::count_if(c.begin(), c.end(), [&](int id) { return tokens[static_cast<size_t>(id)] == "<|end|>"; }), 0);
}

TEST(GgufEog, AnIdOutsideTheVocabularyIsCorruptNamingTheKey) {
  const testing::TempDir dir("gguf_eog_bad");
  const std::string path = dir.file("bad.gguf");
  testing::write_gguf_zeros(path,
                            {testing::gguf_str("general.architecture", "llama"),
                             testing::gguf_strs("tokenizer.ggml.tokens", {"a", "b", "</s>"}),
                             testing::gguf_u32("tokenizer.ggml.eom_token_id", 7)},
                            {});
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto ids = gguf_end_of_generation_ids(**g);
  ASSERT_FALSE(ids.has_value());
  EXPECT_EQ(ids.status().code(), StatusCode::corrupt);
  EXPECT_NE(ids.status().message().find("tokenizer.ggml.eom_token_id"), std::string::npos) << ids.status().to_string();
  // Without a vocabulary there is nothing to end at but what the keys say.
  const std::string bare = dir.file("bare.gguf");
  testing::write_gguf_zeros(bare, {testing::gguf_str("general.architecture", "llama")}, {});
  EXPECT_TRUE(eog_of(bare).empty());
}

}  // namespace
}  // namespace brigade
