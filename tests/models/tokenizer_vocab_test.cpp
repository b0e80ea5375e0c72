// Tokenizers against their references: llama.cpp's vocabulary test vectors (GGUF vocabularies
// with inputs and expected ids, shared/testdata/tokenizers) and the Llama 2 SentencePiece model
// (libsentencepiece) against the same vocabulary in llama2.c's tokenizer.bin.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/tokenizer_gguf.h"
#include "models/mapped_file.h"
#include "models/tokenizer.h"
#include "gguf_vocab.h"
#include "model_test_util.h"
#include "models/byte_unicode.h"
#include "vocab_vectors.h"

namespace brigade {
namespace {

const std::string kDir = std::string(BRIGADE_TESTDATA) + "/tokenizers/";

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, EncodesEveryInputExactlyAndDecodesBack) {
  const std::string file = "ggml-vocab-" + GetParam() + ".gguf";
  if (!std::filesystem::exists(kDir + file)) GTEST_SKIP() << "test data absent: " << kDir + file;
  auto tok = Tokenizer::load(kDir + file);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const auto cases = testing::read_llama_cpp_vectors(kDir, file);
  ASSERT_GT(cases.size(), 30u);
  for (const auto& c : cases) {
    auto ids = (*tok)->encode(c.text, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c.ids) << "input: '" << c.text << "'";
    auto text = (*tok)->decode(*ids);
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(*text, c.text) << "decode of input '" << c.text << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Vectors, LlamaCppVocab, ::testing::Values("gpt-2", "llama-spm", "deepseek-llm"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

TEST(SentencePieceVsLlama2c, AgreeOnAVariedCorpus) {
  const std::string model = kDir + "llama2-tokenizer.model", bin = kDir + "llama2c-tokenizer.bin";
  if (!std::filesystem::exists(model) || !std::filesystem::exists(bin)) GTEST_SKIP() << "test data absent: " << kDir;
  auto sp = Tokenizer::load(model);
  auto l2c = Tokenizer::load(bin);
  ASSERT_TRUE(sp.has_value()) << sp.status().to_string();
  ASSERT_TRUE(l2c.has_value()) << l2c.status().to_string();
  EXPECT_EQ((*sp)->vocab_size(), 32000);
  EXPECT_EQ((*l2c)->vocab_size(), 32000);
  auto gguf = Tokenizer::load(kDir + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(gguf.has_value()) << gguf.status().to_string();
  const std::vector<std::string> corpus = {
      "", " ", "  ", "   leading", "trailing   ", "Hello world", "Hello, World! How are you?",
      "tabs\tand\nnewlines\n\n", "digits 0 12 345 6789 3.14159 1,000,000", "Führer café naïve résumé",
      "Привет, мир", "日本語のテキスト", "中文 测试", "한국어", "emoji 🦙🚀 ✅ 😶‍🌫️", "mixed ünï©ødé ☃ ∑ ∞",
      "a  b   c    d", "don't won't I'll we've", "<html><body>x</body></html>", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and ꙮ",
      "Once upon a time, there was a little girl named Lily."};
  for (const auto& text : corpus) {
    auto a = (*sp)->encode(text, false);
    auto b = (*l2c)->encode(text, false);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_EQ(*a, *b) << "text: '" << text << "'";
    auto back = (*l2c)->decode(*b);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, text);
    // The vocabulary's own strings (HF's convert_ids_to_tokens): libsentencepiece's pieces, the
    // llama2.c export's (its spaces mapped back to ▁) and llama.cpp's GGUF export's agree.
    for (int32_t id : *a) {
      EXPECT_EQ((*l2c)->token_string(id), (*sp)->token_string(id)) << "id " << id;
      EXPECT_EQ((*gguf)->token_string(id), (*sp)->token_string(id)) << "id " << id;
    }
  }
  const auto hello = (*sp)->encode("Hello\n", false);
  ASSERT_TRUE(hello.has_value());
  std::vector<std::string> strs;
  for (int32_t id : *hello) strs.push_back((*sp)->token_string(id));
  EXPECT_EQ(strs, (std::vector<std::string>{"\u2581Hello", "<0x0A>"})) << "▁ for the space, bytes as <0xXX>";
  EXPECT_EQ((*sp)->token_string(32000), "");
  auto with_bos = (*sp)->encode("Hi", true);
  ASSERT_TRUE(with_bos.has_value());
  EXPECT_EQ(with_bos->front(), 1);
}

// BOS is added where the file's tokenizer.ggml.add_bos_token says so (llama-spm, deepseek-llm)
// and not where the key is absent from a gpt2 vocabulary (GPT-2 never starts with BOS), as
// llama.cpp does.
TEST(TokenizerFiles, GgufAddBosTokenIsHonoured) {
  for (const auto& [vocab, adds] : {std::pair{"gpt-2", false}, {"deepseek-llm", true}, {"llama-spm", true}}) {
    const std::string file = kDir + "ggml-vocab-" + vocab + ".gguf";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << "test data absent: " << file;
    auto tok = Tokenizer::load(file);
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    auto plain = (*tok)->encode("Hi", false), with_bos = (*tok)->encode("Hi", true);
    ASSERT_TRUE(plain.has_value() && with_bos.has_value());
    EXPECT_EQ(with_bos->size(), plain->size() + (adds ? 1 : 0)) << vocab;
    if (adds) {
      EXPECT_EQ(with_bos->front(), (*tok)->bos_id()) << vocab;
    }
  }
}

// tokenizer.ggml.add_eos_token (llama.cpp appends EOS to a prompt it adds special tokens to; the
// converter writes it for Qwen3-Embedding, whose tokenizer.json post-processor ends with
// <|endoftext|>): a gpt2 vocabulary made from that tokenizer.json encodes as Hugging Face's
// add_special_tokens=True does (tests/fixtures/tokenizers/post_processor/vectors.json), and a
// llama (SentencePiece) one appends its EOS after the BOS-led prompt.
TEST(TokenizerFiles, GgufAddEosTokenAppendsEos) {
  const std::string fixtures = std::string(BRIGADE_FIXTURES) + "/tokenizers/post_processor/";
  auto text = read_text_file(fixtures + "qwen3_embedding.json");
  auto vectors_text = read_text_file(fixtures + "vectors.json");
  ASSERT_TRUE(text.has_value() && vectors_text.has_value());
  nlohmann::json j = nlohmann::json::parse(*text);
  j.erase("post_processor");  // the GGUF says it with add_eos_token instead
  const testing::TempDir dir("add_eos");
  for (const bool add_eos : {false, true}) {
    std::vector<testing::GgufKv> kvs = testing::gguf_vocab_from_tokenizer_json(j.dump(), "qwen2", "", "<|endoftext|>", false);
    ASSERT_FALSE(kvs.empty());
    kvs.push_back(testing::gguf_bool("tokenizer.ggml.add_eos_token", add_eos));
    const std::string path = dir.file(std::string("qwen_") + (add_eos ? "eos" : "plain") + ".gguf");
    const int vocab = static_cast<int>(j["model"]["vocab"].size() + j["added_tokens"].size());
    ASSERT_TRUE(testing::write_tiny_llama_gguf(dir.file("hf"), path, vocab, kvs).is_ok());
    auto tok = Tokenizer::load(path);
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    const nlohmann::json vectors = nlohmann::json::parse(*vectors_text);  // kept alive: the loop reads into it
    for (const auto& c : vectors["qwen3_embedding"]) {
      auto ids = (*tok)->encode(c["text"].get<std::string>(), /*add_bos=*/true);
      ASSERT_TRUE(ids.has_value());
      EXPECT_EQ(*ids, c[add_eos ? "special" : "plain"].get<std::vector<int32_t>>()) << c["text"];
      EXPECT_EQ(*(*tok)->encode(c["text"].get<std::string>(), false), c["plain"].get<std::vector<int32_t>>());
    }
  }
  const std::string spm = kDir + "llama2-tokenizer.model";
  if (!std::filesystem::exists(spm)) GTEST_SKIP() << "test data absent: " << spm;
  std::vector<testing::GgufKv> kvs = testing::gguf_vocab_from_sentencepiece(spm);
  kvs.push_back(testing::gguf_bool("tokenizer.ggml.add_eos_token", true));
  ASSERT_TRUE(testing::write_tiny_llama_gguf(dir.file("hf_spm"), dir.file("spm.gguf"), 32000, kvs).is_ok());
  auto tok = Tokenizer::load(dir.file("spm.gguf"));
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto plain = (*tok)->encode("Hi there", false), with = (*tok)->encode("Hi there", true);
  ASSERT_TRUE(plain.has_value() && with.has_value());
  std::vector<int32_t> want = {1};
  want.insert(want.end(), plain->begin(), plain->end());
  want.push_back(2);
  EXPECT_EQ(*with, want);
}

// A gpt2 GGUF vocabulary with `pre` whose tokens are the 256 bytes, "ab" and "abc", and whose
// only merge is "a b": no merge sequence builds "abc".
std::unique_ptr<Tokenizer> abc_vocabulary(const testing::TempDir& dir, const std::string& pre) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_to_unicode(static_cast<uint8_t>(b))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  const nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}}};
  const std::string path = dir.file(pre + ".gguf");
  const Status st = testing::write_tiny_llama_gguf(
      dir.file("hf"), path, 260, testing::gguf_vocab_from_tokenizer_json(j.dump(), pre, "", "", false));
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  auto tok = Tokenizer::load(path);
  EXPECT_TRUE(tok.has_value()) << tok.status().to_string();
  return tok ? std::move(*tok) : nullptr;
}

// llama.cpp's llama-bpe pre-tokenizer sets ignore_merges (llm_tokenizer_bpe_session), as Llama
// 3's tokenizer.json does: a word that is a whole vocabulary entry is that token, whatever the
// merges make of it. Other pre-tokenizers merge.
TEST(TokenizerFiles, GgufLlamaBpeIgnoresMergesForWholeWords) {
  const testing::TempDir dir("ignore_merges");
  auto llama3 = abc_vocabulary(dir, "llama-bpe");
  auto gpt2 = abc_vocabulary(dir, "gpt-2");
  ASSERT_TRUE(llama3 && gpt2);
  EXPECT_EQ(*llama3->encode("abc", false), std::vector<int32_t>({257}));
  EXPECT_EQ(*gpt2->encode("abc", false), std::vector<int32_t>({256, 'c'}));
}

// Mistral's tekken vocabularies (Mistral Nemo, Small 3.x, Ministral, Devstral, Magistral GGUFs)
// take whole-word tokens before merges too, and add BOS by default, as llama.cpp's TEKKEN sets
// both (the file's add_bos_token, when present, still decides).
TEST(TokenizerFiles, GgufTekkenIgnoresMergesForWholeWords) {
  const testing::TempDir dir("tekken_vocab");
  auto tekken = abc_vocabulary(dir, "tekken");
  ASSERT_NE(tekken, nullptr);
  EXPECT_EQ(*tekken->encode("abc", false), std::vector<int32_t>({257}));
}

// Decoding keeps every space as the tokens spell it: no " ." -> "." or " 's" -> "'s" cleanup,
// which is llama.cpp's clean_spaces false (command-r's and qwen2's vocabularies, among others).
TEST(TokenizerFiles, GgufCommandRDecodesWithoutCleaningSpaces) {
  const testing::TempDir dir("command_r_vocab");
  auto command_r = abc_vocabulary(dir, "command-r");
  ASSERT_NE(command_r, nullptr);
  const std::string text = "ab , it 's 2024 . ok ' x";
  auto ids = command_r->encode(text, false);
  ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
  EXPECT_EQ(*command_r->decode(*ids), text);
}

// GPT-2's vocabulary (llama.cpp's ggml-vocab-gpt-2.gguf: tokens and merges) written as the slow
// tokenizer's vocab.json and merges.txt (the header GPT-2's file has first) with `config` as
// tokenizer_config.json; false when the test data is absent.
bool write_gpt2_slow_files(const testing::TempDir& dir, const nlohmann::json& config) {
  const std::string file = kDir + "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(file)) return false;
  auto g = GgufFile::open(file);
  EXPECT_TRUE(g.has_value());
  if (!g) return false;
  const GgufValue* tokens = (*g)->find("tokenizer.ggml.tokens");
  const GgufValue* merges = (*g)->find("tokenizer.ggml.merges");
  EXPECT_TRUE(tokens != nullptr && merges != nullptr);
  if (tokens == nullptr || merges == nullptr) return false;
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < tokens->strs.size(); ++i) vocab[tokens->strs[i]] = i;
  std::string merges_text = "#version: 0.2\n";
  for (const std::string& m : merges->strs) merges_text += m + "\n";
  testing::write_text(dir.file("vocab.json"), vocab.dump());
  testing::write_text(dir.file("merges.txt"), merges_text);
  if (!config.is_null()) testing::write_text(dir.file("tokenizer_config.json"), config.dump());
  return true;
}

// A directory with the slow GPT-2 tokenizer's files and no tokenizer.json (OPT's repositories)
// encodes llama.cpp's GPT-2 vectors exactly and decodes them back; "<|endoftext|>", a special
// token the config names, is one id wherever it appears.
TEST(TokenizerFiles, VocabJsonAndMergesTxtEncodeLlamaCppsGpt2Vectors) {
  const testing::TempDir dir("gpt2_slow");
  const nlohmann::json config = {{"tokenizer_class", "GPT2Tokenizer"}, {"bos_token", "<|endoftext|>"},
                                 {"eos_token", "<|endoftext|>"}, {"unk_token", "<|endoftext|>"},
                                 {"add_prefix_space", false}, {"add_bos_token", nullptr}};
  if (!write_gpt2_slow_files(dir, config)) GTEST_SKIP() << "test data absent: " << kDir;
  auto tok = Tokenizer::load(dir.str());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const auto cases = testing::read_llama_cpp_vectors(kDir, "ggml-vocab-gpt-2.gguf");
  ASSERT_GT(cases.size(), 30u);
  for (const auto& c : cases) {
    auto ids = (*tok)->encode(c.text, /*add_bos=*/true);  // add_bos_token null: nothing added
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c.ids) << "input: '" << c.text << "'";
    auto text = (*tok)->decode(*ids);
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(*text, c.text);
  }
  auto hello = (*tok)->encode("Hello", false);
  auto special = (*tok)->encode("Hello<|endoftext|>Hello", false);
  ASSERT_TRUE(hello.has_value() && special.has_value());
  std::vector<int32_t> want = *hello;
  want.push_back(50256);
  want.insert(want.end(), hello->begin(), hello->end());
  EXPECT_EQ(*special, want) << "the special token whole, not split into pieces";
  EXPECT_EQ((*tok)->eos_ids(), std::vector<int32_t>{50256});
}

// OPT's tokenizer_config.json says add_bos_token true (its bos "</s>" here as "<|endoftext|>"):
// prompts start with it; add_prefix_space true puts a space before the first word; without any
// tokenizer_config.json, special_tokens_map.json names the special tokens.
TEST(TokenizerFiles, VocabJsonAndMergesTxtHonourTheConfig) {
  const testing::TempDir dir("gpt2_slow_bos");
  if (!write_gpt2_slow_files(dir, {{"bos_token", {{"content", "<|endoftext|>"}, {"special", true}}},
                                   {"add_bos_token", true}, {"add_prefix_space", true}}))
    GTEST_SKIP() << "test data absent: " << kDir;
  auto tok = Tokenizer::load(dir.str());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto ids = (*tok)->encode("Hello world", true);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, (std::vector<int32_t>{50256, 18435, 995})) << "BOS, then ' Hello' (a prefix space) and ' world'";
  auto no_bos = (*tok)->encode("Hello world", false);
  ASSERT_TRUE(no_bos.has_value());
  EXPECT_EQ(*no_bos, (std::vector<int32_t>{18435, 995}));

  const testing::TempDir plain("gpt2_slow_map");
  ASSERT_TRUE(write_gpt2_slow_files(plain, nullptr));
  testing::write_text(plain.file("special_tokens_map.json"), R"({"eos_token": "<|endoftext|>"})");
  auto mapped = Tokenizer::load(plain.str());
  ASSERT_TRUE(mapped.has_value()) << mapped.status().to_string();
  EXPECT_EQ((*mapped)->eos_ids(), std::vector<int32_t>{50256});
  auto hello = (*mapped)->encode("Hello world", true);
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(*hello, (std::vector<int32_t>{15496, 995})) << "'Hello' without a prefix space, no BOS";
}

// A merges.txt line that is not two tokens, an added_tokens_decoder key that is not an id, and a
// vocab.json id that is not an integer, are refused naming the file.
TEST(TokenizerFiles, BadVocabJsonOrMergesTxtAreClearErrors) {
  const testing::TempDir dir("gpt2_slow_bad");
  if (!write_gpt2_slow_files(dir, nullptr)) GTEST_SKIP() << "test data absent: " << kDir;
  testing::write_text(dir.file("merges.txt"), "#version: 0.2\n\u0120 t\nthree parts here\n");
  auto bad_merges = Tokenizer::load(dir.str());
  ASSERT_FALSE(bad_merges.has_value());
  EXPECT_EQ(bad_merges.status().code(), StatusCode::corrupt);
  EXPECT_NE(bad_merges.status().message().find("merges.txt: line 3 is not two tokens"), std::string::npos)
      << bad_merges.status().message();
  testing::write_text(dir.file("merges.txt"), "#version: 0.2\n");
  testing::write_text(dir.file("tokenizer_config.json"), R"({"added_tokens_decoder": {"7x": {"content": "<x>"}}})");
  auto bad_added = Tokenizer::load(dir.str());
  ASSERT_FALSE(bad_added.has_value());
  EXPECT_NE(bad_added.status().message().find("added_tokens_decoder entry '7x' is not an id"), std::string::npos)
      << bad_added.status().message();
  std::filesystem::remove(dir.file("tokenizer_config.json"));
  testing::write_text(dir.file("vocab.json"), R"({"a": 0, "b": "one"})");
  auto bad_vocab = Tokenizer::load(dir.str());
  ASSERT_FALSE(bad_vocab.has_value());
  EXPECT_EQ(bad_vocab.status().code(), StatusCode::corrupt);
  EXPECT_NE(bad_vocab.status().message().find("vocab.json: token 'b' has id \"one\""), std::string::npos)
      << bad_vocab.status().message();
}

TEST(TokenizerFiles, BadInputsAreClearErrors) {
  const std::string gpt2 = kDir + "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(gpt2)) GTEST_SKIP() << "test data absent: " << gpt2;
  auto tok = Tokenizer::load(gpt2);
  ASSERT_TRUE(tok.has_value());
  auto bad = (*tok)->encode("ok \xff\xfe", false);
  EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("UTF-8"), std::string::npos);
  EXPECT_EQ(Tokenizer::load(kDir + "nope.gguf").status().code(), StatusCode::not_found);
  EXPECT_EQ(gguf_pretokenizer_patterns("mystery").status().code(), StatusCode::unsupported);
  EXPECT_NE(gguf_pretokenizer_patterns("mystery").status().message().find("deepseek-llm"), std::string::npos);
  // LFM2's vocabularies name their pre-tokenizer lfm2, which llama.cpp runs as Llama 3's.
  auto lfm2 = gguf_pretokenizer_patterns("lfm2");
  ASSERT_TRUE(lfm2.has_value()) << lfm2.status().to_string();
  EXPECT_EQ(*lfm2, *gguf_pretokenizer_patterns("llama-bpe"));
  EXPECT_EQ(*gguf_pretokenizer_patterns("falcon-h1"), *lfm2) << "Falcon-H1's alike";
}

TEST(TokenizerFiles, VocabularyMustFitTheModel) {
  const std::string bin = kDir + "llama2c-tokenizer.bin";
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << "test data absent: " << bin;
  auto tok = Tokenizer::load(bin);
  ASSERT_TRUE(tok.has_value());
  EXPECT_TRUE(check_tokenizer_fits(**tok, 32000).is_ok());
  EXPECT_TRUE(check_tokenizer_fits(**tok, 32064).is_ok()) << "padded embedding rows are fine";
  const Status small = check_tokenizer_fits(**tok, 512);  // stories260K's vocabulary
  EXPECT_EQ(small.code(), StatusCode::invalid_argument);
  EXPECT_NE(small.message().find("32000"), std::string::npos) << small.to_string();
}

// A slow tokenizer laid out as CodeGen's repositories have it (scripts/make_vocab_merges_fixtures.py):
// vocab.json, merges.txt and added_tokens.json's runs of spaces and tabs, which tokenizer_config.json
// (without added_tokens_decoder) leaves to that file: every text's ids and decode are transformers'
// (CodeGenTokenizer); the runs are added tokens, not special ones.
TEST(TokenizerFiles, AddedTokensJsonAsTransformersReadsIt) {
  const std::string dir = std::string(BRIGADE_FIXTURES) + "/tokenizers/codegen_slow";
  auto tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  auto text = read_text_file(dir + "/vectors.json");
  ASSERT_TRUE(text.has_value());
  const auto vectors = nlohmann::json::parse(*text).at("vectors");
  ASSERT_GE(vectors.size(), 9u);
  for (const auto& v : vectors) {
    const std::string input = v.at("text").get<std::string>();
    auto ids = (*tok)->encode(input, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, v.at("ids").get<std::vector<int32_t>>()) << "input: '" << input << "'";
    auto decoded = (*tok)->decode(*ids);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, v.at("decoded").get<std::string>());
  }
  EXPECT_FALSE((*tok)->is_special(701)) << "9 spaces: an added token, not a special one";
  EXPECT_TRUE((*tok)->is_special(700)) << "<|endoftext|>";
  EXPECT_EQ((*tok)->vocab_size(), 712);

  // An entry without an id >= 0 is refused naming the file.
  const testing::TempDir bad("codegen_slow_bad");
  for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"})
    std::filesystem::copy_file(dir + "/" + f, bad.file(f));
  testing::write_text(bad.file("added_tokens.json"), R"({"  ": -3})");
  auto refused = Tokenizer::load(bad.str());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("added_tokens.json: entry '  ' is not a token with an id >= 0"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace brigade
