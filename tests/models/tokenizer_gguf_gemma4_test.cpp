// The `gemma4` GGUF tokenizer (tokenizer.ggml.model "gemma4": SentencePiece-style BPE by merge rank,
// byte fallback, newline runs apart; models/tokenizer_gguf.h) against llama.cpp's own tokenization
// of the same file and Hugging Face `tokenizers` on the tokenizer.json it was converted from:
// tests/fixtures/tokenizers/gemma4_gguf/ holds a vocabulary-only GGUF of a Gemma-style BPE of 2,800
// pieces (2,340 merges, Gemma 4's special tokens, newline runs of 9 to 12 as pieces without
// merges) written by llama.cpp's converter, and
// vectors.json the two references' ids, llama.cpp's pieces, end-of-generation ids and BOS
// (scripts/make_gguf_gemma4_tokenizer_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/gguf.h"
#include "models/gguf_eog.h"
#include "models/tokenizer.h"
#include "models/tokenizer_gguf.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/gemma4_gguf/";

const json& vectors() {
  static const json v = read_json(kDir + "vectors.json");
  return v;
}

class Gemma4GgufTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::load(kDir + "vocab.gguf");
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    tok_ = std::move(*tok);
    ASSERT_GT(vectors()["cases"].size(), 50u);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Gemma4GgufTokenizer, FixtureIsARealisticGemma4Vocabulary) {
  auto g = GgufFile::open(kDir + "vocab.gguf");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto model = (*g)->get_string("tokenizer.ggml.model");
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(*model, "gemma4");
  const GgufValue* merges = (*g)->find("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_GT(merges->strs.size(), 2000u);
  EXPECT_GT(tok_->vocab_size(), 2500);
  // The references agree on every text but the four whose newline run of 9 to 12 is a piece no
  // merge makes: llama.cpp takes such a run whole, `tokenizers` merges what the merges make.
  int differ = 0;
  for (const json& c : vectors()["cases"]) {
    if (c["hf"] == c["llamacpp"]) continue;
    ++differ;
    const std::string text = c["text"].get<std::string>();
    EXPECT_NE(text.find(std::string(9, '\n')), std::string::npos) << escaped(text);
  }
  EXPECT_EQ(differ, 4);
}

// Ids of each text (spaces, newline runs, unicode, emoji through byte fallback, digits, special
// tokens written in the text) as llama.cpp's tokenize with parse_special, and as `tokenizers`
// where the two agree (a newline run that is a piece: llama.cpp's).
TEST_F(Gemma4GgufTokenizer, EncodesAsLlamaCppAndHuggingFace) {
  for (const json& c : vectors()["cases"]) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE(escaped(text));
    auto ids = tok_->encode(text, false);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(json(*ids), c["llamacpp"]);
    if (c["hf"] == c["llamacpp"]) {
      EXPECT_EQ(json(*ids), c["hf"]);
    }
    auto with_bos = tok_->encode(text, true);
    ASSERT_TRUE(with_bos.has_value());
    EXPECT_EQ(json(*with_bos), c["llamacpp_bos"]);  // BOS first: llama.cpp forces add_bos for gemma4
  }
}

// Each id's piece as llama.cpp's token_to_piece (special tokens rendered; a byte token is its
// byte), and the decode of the ids as `tokenizers` decodes them (the text back).
TEST_F(Gemma4GgufTokenizer, DecodesAsLlamaCppAndHuggingFace) {
  int byte_tokens = 0;
  for (const json& c : vectors()["cases"]) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE(escaped(text));
    const std::vector<int32_t> ids = c["llamacpp"].get<std::vector<int32_t>>();
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<uint8_t> want = c["llamacpp_pieces"][i].get<std::vector<uint8_t>>();
      const std::string piece = tok_->token_to_piece(ids[i]);
      EXPECT_EQ(std::vector<uint8_t>(piece.begin(), piece.end()), want) << "id " << ids[i];
      byte_tokens += tok_->token_string(ids[i]).rfind("<0x", 0) == 0;
    }
    auto decoded = tok_->decode(ids);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, c["hf_decoded"].get<std::string>());
    // The text back, but for a U+2581 written in it, which decodes as the space it stands for.
    if (text.find("\u2581") == std::string::npos) {
      EXPECT_EQ(*decoded, text);
    } else {
      EXPECT_NE(*decoded, text);
    }
  }
  EXPECT_GT(byte_tokens, 10);  // emoji and rare letters go through byte fallback
}

// BOS and the ids generation stops on, as llama.cpp's llama_vocab_bos and llama_vocab_is_eog
// (<eos>, <turn|>, <|tool_response>).
TEST_F(Gemma4GgufTokenizer, BosAndEndsOfGenerationAreLlamaCpps) {
  EXPECT_EQ(tok_->bos_id(), vectors()["bos"].get<int32_t>());
  std::vector<int32_t> eos = tok_->eos_ids();
  std::sort(eos.begin(), eos.end());
  EXPECT_EQ(json(eos), vectors()["eog"]);
  auto g = GgufFile::open(kDir + "vocab.gguf");
  ASSERT_TRUE(g.has_value());
  auto eog = gguf_end_of_generation_ids(**g);
  ASSERT_TRUE(eog.has_value());
  std::sort(eog->begin(), eog->end());
  EXPECT_EQ(json(*eog), vectors()["eog"]);
  ASSERT_EQ(vectors()["eog"].size(), 3u);
  for (int32_t id : vectors()["eog"].get<std::vector<int32_t>>()) {
    const std::string s = tok_->token_string(id);
    EXPECT_TRUE(s == "<eos>" || s == "<turn|>" || s == "<|tool_response>") << s;
  }
}

// Control tokens are special (skipped by skip_special); the chat tokens the converter marks
// user-defined (<|channel>, <|tool_call>, <|"|>, ...) stay in the text, as llama.cpp renders them.
TEST_F(Gemma4GgufTokenizer, SkipsControlTokensOnly) {
  auto ids = tok_->encode("<|turn>model\n<|channel>x<channel|>hi<turn|>", true);
  ASSERT_TRUE(ids.has_value());
  auto text = tok_->decode(*ids, /*skip_special=*/true);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text, "model\n<|channel>x<channel|>hi");
}

// A gemma4 vocabulary without merges, or with a merge that is not two pieces, is refused by name.
TEST(Gemma4GgufTokenizerErrors, MissingOrMalformedMergesAreCorrupt) {
  const testing::TempDir dir("gemma4_tok_bad");
  auto load = [&](const std::string& name, std::vector<testing::GgufKv> extra) {
    std::vector<testing::GgufKv> kvs = {testing::gguf_str("general.architecture", "gemma4"),
                                        testing::gguf_str("tokenizer.ggml.model", "gemma4"),
                                        testing::gguf_strs("tokenizer.ggml.tokens", {"<bos>", "a", "b", "ab"}),
                                        testing::gguf_f32s("tokenizer.ggml.scores", {0, 0, 0, 0}),
                                        testing::gguf_i32s("tokenizer.ggml.token_type", {3, 1, 1, 1}),
                                        testing::gguf_u32("tokenizer.ggml.bos_token_id", 0)};
    kvs.insert(kvs.end(), extra.begin(), extra.end());
    testing::write_gguf_zeros(dir.file(name), kvs, {});
    return Tokenizer::load(dir.file(name));
  };
  auto none = load("none.gguf", {});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.status().code(), StatusCode::corrupt);
  EXPECT_NE(none.status().message().find("tokenizer.ggml.merges"), std::string::npos) << none.status().to_string();
  auto bad = load("bad.gguf", {testing::gguf_strs("tokenizer.ggml.merges", {"ab"})});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), StatusCode::corrupt);
  EXPECT_NE(bad.status().message().find("merge #0"), std::string::npos) << bad.status().to_string();
  auto good = load("good.gguf", {testing::gguf_strs("tokenizer.ggml.merges", {"a b"})});
  ASSERT_TRUE(good.has_value()) << good.status().to_string();
  auto ids = (*good)->encode("ab", true);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 3}));
}

}  // namespace
}  // namespace brigade
