// An engine on a single .gguf file that carries its vocabulary (tokenizer.ggml.*) and chat
// template: the engine tokenizes and detokenizes exactly as the same vocabulary loaded the normal
// way and as the references say (llama.cpp's vectors for Llama 2's SentencePiece vocabulary, Hugging
// Face tokenizers' vectors for the Llama 3 / Qwen2 BPE fixtures), generates from a text prompt,
// and renders the real chat template in tokenizer.chat_template as transformers does. Corrupt
// vocabulary arrays are refused by Engine::create with a message naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "models/detokenizer.h"
#include "models/mapped_file.h"
#include "models/tokenizer.h"
#include "tests/models/chat_test_util.h"
#include "tests/models/gguf_vocab.h"
#include "tests/models/model_test_util.h"
#include "tests/models/vocab_vectors.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::GgufKv;
using testing::TempDir;
using testing::VocabCase;

const std::string kTokenizers = std::string(BRIGADE_TESTDATA) + "/tokenizers/";
const std::string kFixtures = std::string(BRIGADE_FIXTURES) + "/tokenizers/";

std::string write_gguf_model(const TempDir& dir, int vocab_size, const std::vector<GgufKv>& vocab) {
  const std::string path = dir.file("model.gguf");
  const Status st = testing::write_tiny_llama_gguf(dir.file("hf"), path, vocab_size, vocab);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return path;
}

Expected<std::unique_ptr<Engine>> make_engine(const std::string& model) {
  EngineOptions o;
  o.model_path = model;
  o.progress = false;
  o.topology.instances.front().kv.memory_mb = 16;
  o.topology.instances.front().executors.front().threads = 1;
  return Engine::create(o);
}

// The engine tokenizes every case to the reference ids, exactly as `normal` (the same vocabulary
// from its usual file) does, and detokenizes them back to `normal`'s text.
void expect_same_tokenization(const Engine& engine, const Tokenizer& normal, const std::vector<VocabCase>& cases) {
  for (const auto& c : cases) {
    auto ids = engine.tokenize(c.text, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c.ids) << "input " << json(c.text).dump();
    EXPECT_EQ(*ids, *normal.encode(c.text, false)) << "input " << json(c.text).dump();
    auto with_bos = engine.tokenize(c.text, /*add_bos=*/true);
    ASSERT_TRUE(with_bos.has_value());
    EXPECT_EQ(*with_bos, *normal.encode(c.text, true));
    auto text = engine.detokenize(*ids);
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    EXPECT_EQ(*text, *normal.decode(*ids)) << "input " << json(c.text).dump();
  }
}

// generate() on a text prompt: the prompt is the engine's tokenization (its greedy tokens equal
// those of the same ids sent as ids), and the completion's text is what `normal` streams for its
// ids (special tokens skipped, invalid UTF-8 as U+FFFD).
void expect_text_generation(Engine& engine, const Tokenizer& normal, const std::string& prompt) {
  GenerateOptions r;
  r.prompt = prompt;
  r.max_tokens = 6;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  auto by_text = engine.generate(r);
  ASSERT_TRUE(by_text.has_value()) << by_text.status().to_string();
  auto ids = engine.tokenize(prompt, /*add_bos=*/true);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(by_text->prompt_tokens, static_cast<int>(ids->size()));
  ASSERT_EQ(by_text->token_ids.size(), 6u);
  EXPECT_EQ(by_text->finish, FinishReason::length);
  IncrementalDetokenizer stream(normal);
  std::string text;
  for (int32_t id : by_text->token_ids) text += stream.push(id);
  EXPECT_EQ(by_text->text, text + stream.flush());
  r.prompt_ids = *ids;
  auto by_ids = engine.generate(r);
  ASSERT_TRUE(by_ids.has_value()) << by_ids.status().to_string();
  EXPECT_EQ(by_ids->token_ids, by_text->token_ids);
}

// The engine renders a real template from tokenizer.chat_template as transformers does
// (tests/fixtures/chat_templates/models.json, scripts/make_chat_template_fixtures.py).
void expect_real_chat_template(const Engine& engine, const std::string& name) {
  const auto c = testing::chat_template_case(name, "system_multi_turn", true);
  ASSERT_TRUE(c.is_object()) << "tests/fixtures/chat_templates/models.json: run scripts/make_chat_template_fixtures.py";
  auto tmpl = engine.chat_template();
  ASSERT_TRUE(tmpl.has_value()) << tmpl.status().to_string();
  EXPECT_EQ(tmpl->describe(), "Jinja (GGUF tokenizer.chat_template)");
  auto rendered = engine.format_chat(testing::case_messages(c), true);
  ASSERT_TRUE(rendered.has_value()) << rendered.status().to_string();
  EXPECT_EQ(*rendered, c["expected"].get<std::string>());
}

TEST(EngineGguf, SentencePieceVocabularyTokenizesLikeTokenizerModelAndLlamaCpp) {
  const std::string model = kTokenizers + "llama2-tokenizer.model";
  if (!fs::exists(model) || !fs::exists(kTokenizers + "ggml-vocab-llama-spm.gguf.inp"))
    GTEST_SKIP() << "test data absent: " << kTokenizers;
  std::vector<GgufKv> vocab = testing::gguf_vocab_from_sentencepiece(model);
  ASSERT_FALSE(vocab.empty());
  vocab.push_back(testing::gguf_str("tokenizer.chat_template", testing::real_chat_template("llama-2")));
  const TempDir dir("engine_gguf_spm");
  auto engine = make_engine(write_gguf_model(dir, 32000, vocab));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  EXPECT_TRUE((*engine)->model().has_tokenizer);
  auto normal = Tokenizer::load(model);
  ASSERT_TRUE(normal.has_value()) << normal.status().to_string();
  const auto cases = testing::read_llama_cpp_vectors(kTokenizers, "ggml-vocab-llama-spm.gguf");
  ASSERT_GT(cases.size(), 30u);
  expect_same_tokenization(**engine, **normal, cases);
  expect_text_generation(**engine, **normal, "Once upon a time, there was a llama");

  expect_real_chat_template(**engine, "llama-2");
}

// Hugging Face tokenizers' vectors for a fixture (tests/fixtures/tokenizers/<family>).
std::vector<VocabCase> hf_vectors(const std::string& family) {
  auto text = read_text_file(kFixtures + family + "/vectors.json");
  EXPECT_TRUE(text.has_value());
  std::vector<VocabCase> cases;
  if (!text) return cases;
  const json doc = json::parse(*text);  // named: a range-for over a temporary's member dangles
  for (const json& c : doc["cases"]) cases.push_back({c["text"].get<std::string>(), c["ids"].get<std::vector<int32_t>>()});
  return cases;
}

// A fixture as llama.cpp's converter writes the real family's GGUF: Qwen2 names <|endoftext|> as
// BOS but never adds it (its tokenizer_config.json has no bos_token, as the fixture directory).
struct BpeCase {
  std::string family;  // fixture folder
  std::string pre;     // tokenizer.ggml.pre llama.cpp writes for it
  std::string bos, eos;
  bool add_bos;
  std::string chat_template;  // the real template's name in models.json
};

// gtest's name for a case (else it prints the struct's bytes, padding included: uninitialised reads
// under valgrind).
void PrintTo(const BpeCase& c, std::ostream* os) { *os << c.family; }

class EngineGgufBpe : public ::testing::TestWithParam<BpeCase> {};

TEST_P(EngineGgufBpe, TokenizesLikeTokenizerJsonAndHfTokenizers) {
  const BpeCase& p = GetParam();
  auto tokenizer_json = read_text_file(kFixtures + p.family + "/tokenizer.json");
  ASSERT_TRUE(tokenizer_json.has_value()) << tokenizer_json.status().to_string();
  std::vector<GgufKv> vocab = testing::gguf_vocab_from_tokenizer_json(*tokenizer_json, p.pre, p.bos, p.eos, p.add_bos);
  ASSERT_FALSE(vocab.empty());
  vocab.push_back(testing::gguf_str("tokenizer.chat_template", testing::real_chat_template(p.chat_template)));
  auto normal = Tokenizer::load(kFixtures + p.family);
  ASSERT_TRUE(normal.has_value()) << normal.status().to_string();
  const TempDir dir("engine_gguf_bpe");
  auto engine = make_engine(write_gguf_model(dir, (*normal)->vocab_size(), vocab));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  expect_same_tokenization(**engine, **normal, hf_vectors(p.family));
  expect_text_generation(**engine, **normal, "Hello world, 12345 llamas 🦙 and 你好");

  expect_real_chat_template(**engine, p.chat_template);
  // The rendered markers are special tokens of this vocabulary.
  auto rendered = (*engine)->format_chat(std::vector<ChatTurn>{{"user", "Hi there"}}, true);
  ASSERT_TRUE(rendered.has_value()) << rendered.status().to_string();
  auto ids = (*engine)->tokenize(*rendered, false);
  ASSERT_TRUE(ids.has_value());
  EXPECT_TRUE((*normal)->is_special(ids->front())) << *rendered;
}

INSTANTIATE_TEST_SUITE_P(
    Families, EngineGgufBpe,
    ::testing::Values(
        BpeCase{"llama3", "llama-bpe", "<|begin_of_text|>", "<|end_of_text|>", true, "llama-3.1"},
        BpeCase{"qwen2", "qwen2", "<|endoftext|>", "<|endoftext|>", false, "qwen2.5"}),
    [](const ::testing::TestParamInfo<BpeCase>& i) { return i.param.family; });

// Corrupt vocabulary arrays: Engine::create fails with corrupt naming the key; never a crash.
class EngineGgufCorruptVocab : public ::testing::Test {
 protected:
  // The llama3 fixture's vocabulary with `edit` applied to it.
  template <typename Edit>
  Status create_with(Edit edit) {
    auto tokenizer_json = read_text_file(kFixtures + "llama3/tokenizer.json");
    EXPECT_TRUE(tokenizer_json.has_value());
    std::vector<GgufKv> vocab =
        testing::gguf_vocab_from_tokenizer_json(*tokenizer_json, "llama-bpe", "<|begin_of_text|>", "<|end_of_text|>", true);
    edit(vocab);
    const TempDir dir("engine_gguf_corrupt");
    auto engine = make_engine(write_gguf_model(dir, 705, vocab));
    return engine ? Status::ok() : engine.status();
  }
  static GgufKv& entry(std::vector<GgufKv>& vocab, const std::string& key) {
    for (auto& kv : vocab)
      if (kv.key == key) return kv;
    ADD_FAILURE() << "no " << key;
    return vocab.front();
  }
  static void expect_corrupt(const Status& st, const std::string& key) {
    EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
    EXPECT_NE(st.message().find(key), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find("model.gguf"), std::string::npos) << st.to_string();
  }
};

TEST_F(EngineGgufCorruptVocab, TheUneditedVocabularyLoads) {
  const Status st = create_with([](std::vector<GgufKv>&) {});
  EXPECT_TRUE(st.is_ok()) << st.to_string();
}

TEST_F(EngineGgufCorruptVocab, TokensThatAreNotStrings) {
  expect_corrupt(create_with([](auto& v) {
                   GgufKv& t = entry(v, "tokenizer.ggml.tokens");
                   t = testing::gguf_i32s(t.key, std::vector<int32_t>(t.strs.size(), 7));
                 }),
                 "tokenizer.ggml.tokens");
}

TEST_F(EngineGgufCorruptVocab, TokenTypesOfTheWrongLength) {
  expect_corrupt(create_with([](auto& v) { entry(v, "tokenizer.ggml.token_type").i32s.pop_back(); }),
                 "tokenizer.ggml.token_type");
}

TEST_F(EngineGgufCorruptVocab, TokenTypesThatAreStrings) {
  expect_corrupt(create_with([](auto& v) {
                   GgufKv& t = entry(v, "tokenizer.ggml.token_type");
                   t = testing::gguf_strs(t.key, std::vector<std::string>(t.i32s.size(), "1"));
                 }),
                 "tokenizer.ggml.token_type");
}

TEST_F(EngineGgufCorruptVocab, MergesThatAreNotStrings) {
  expect_corrupt(create_with([](auto& v) {
                   GgufKv& m = entry(v, "tokenizer.ggml.merges");
                   m = testing::gguf_f32s(m.key, std::vector<float>(m.strs.size(), 1.0f));
                 }),
                 "tokenizer.ggml.merges");
}

TEST_F(EngineGgufCorruptVocab, MergeOfUnknownTokens) {
  const Status st = create_with([](auto& v) { entry(v, "tokenizer.ggml.merges").strs.push_back("nosuch token"); });
  EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
  EXPECT_NE(st.message().find("nosuch token"), std::string::npos) << st.to_string();
}

// The model's config takes BOS from the same key and refuses it first.
TEST_F(EngineGgufCorruptVocab, BosOutsideTheVocabulary) {
  const Status st = create_with([](auto& v) { entry(v, "tokenizer.ggml.bos_token_id").u = 1u << 30; });
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("bos_token_id is outside the vocabulary"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("model.gguf"), std::string::npos) << st.to_string();
}

TEST_F(EngineGgufCorruptVocab, MoreTokensThanTheModelHasRows) {
  const Status st = create_with([](auto& v) {
    GgufKv& t = entry(v, "tokenizer.ggml.tokens");
    for (int i = 0; i < 50; ++i) t.strs.push_back("extra" + std::to_string(i));
    entry(v, "tokenizer.ggml.token_type").i32s.resize(t.strs.size(), 1);
  });
  EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
  EXPECT_NE(st.message().find("755"), std::string::npos) << st.to_string();
}

// The SentencePiece path: scores and token types must hold one entry per token.
TEST(EngineGgufCorruptSpm, ScoresOrTypesOfTheWrongLengthOrType) {
  const std::string model = kTokenizers + "llama2-tokenizer.model";
  if (!fs::exists(model)) GTEST_SKIP() << "test data absent: " << model;
  const std::vector<GgufKv> good = testing::gguf_vocab_from_sentencepiece(model);
  ASSERT_FALSE(good.empty());
  auto with = [&](const std::string& key, auto edit) {
    std::vector<GgufKv> v = good;
    for (auto& kv : v)
      if (kv.key == key) edit(kv);
    const TempDir dir("engine_gguf_spm_corrupt");
    auto engine = make_engine(write_gguf_model(dir, 32000, v));
    EXPECT_FALSE(engine.has_value()) << key;
    return engine ? Status::ok() : engine.status();
  };
  for (const Status& st : {with("tokenizer.ggml.scores", [](GgufKv& kv) { kv.f32s.resize(100); }),
                           with("tokenizer.ggml.scores", [](GgufKv& kv) { kv = testing::gguf_strs(kv.key, {"a"}); }),
                           with("tokenizer.ggml.token_type", [](GgufKv& kv) { kv.i32s.resize(31999); })}) {
    EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
    EXPECT_NE(st.message().find("model.gguf"), std::string::npos) << st.to_string();
  }
  const Status bad_type = with("tokenizer.ggml.token_type", [](GgufKv& kv) { kv.i32s[5] = 9; });
  EXPECT_EQ(bad_type.code(), StatusCode::corrupt) << bad_type.to_string();
  EXPECT_NE(bad_type.message().find("token 5"), std::string::npos) << bad_type.to_string();
}

}  // namespace
}  // namespace brigade
