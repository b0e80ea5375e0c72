// Llama 3, Qwen2, Qwen3.5, llama.cpp's refact (Granite 3), Seed-Coder's (Seed-OSS) and DeepSeek-V3's
// (Hunyuan dense) pre-tokenizers against Hugging Face
// `tokenizers` (Rust, Oniguruma regexes): tests/fixtures/tokenizers/<family>/ holds a small
// byte-level BPE whose pre_tokenizer is the family's real one (Split regexes + ByteLevel), and
// vectors.json the reference library's pieces, ids and decoded text for tricky inputs
// (scripts/make_tokenizer_fixtures.py wrote both).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/mapped_file.h"
#include "models/pretokenizer.h"
#include "models/tokenizer.h"
#include "models/tokenizer_gguf.h"
#include "gguf_vocab.h"
#include "model_test_util.h"

namespace brigade {
namespace {

using json = nlohmann::json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/";

using testing::escaped;
using testing::read_json;

class HfPreTokenizer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    vectors_ = read_json(kDir + GetParam() + "/vectors.json");
    ASSERT_TRUE(vectors_.is_object() && vectors_["cases"].is_array());
    ASSERT_GT(vectors_["cases"].size(), 100u);
  }
  // The family's patterns, applied in turn ("pattern", or "patterns" for refact's two).
  std::vector<std::string> patterns() const {
    if (vectors_.contains("patterns")) return vectors_["patterns"].get<std::vector<std::string>>();
    return {vectors_["pattern"].get<std::string>()};
  }
  json vectors_;
};

TEST_P(HfPreTokenizer, FixtureUsesTheFamilysPattern) {
  const json tok = read_json(kDir + GetParam() + "/tokenizer.json");
  const json& steps = tok["pre_tokenizer"]["pretokenizers"];
  const std::vector<std::string> want = patterns();
  ASSERT_EQ(steps.size(), want.size() + 1);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(steps[i]["pattern"]["Regex"], want[i]);
  EXPECT_EQ(steps[want.size()]["type"], "ByteLevel");
  EXPECT_FALSE(steps[want.size()]["use_regex"].get<bool>());
}

TEST_P(HfPreTokenizer, SplitsEveryTextIntoTheReferencePieces) {
  // Each pattern splits every piece the one before it left.
  std::vector<std::unique_ptr<PreTokenizer>> pres;
  for (const std::string& p : patterns()) {
    auto pre = make_regex_pretokenizer(p);
    ASSERT_TRUE(pre.has_value()) << pre.status().to_string();
    pres.push_back(std::move(*pre));
  }
  for (const json& c : vectors_["cases"]) {
    const std::string text = c["text"];
    std::vector<std::string> pieces{text};
    for (const auto& pre : pres) {
      std::vector<std::string> next;
      for (const std::string& piece : pieces)
        for (std::string_view p : pre->split(piece)) next.emplace_back(p);
      pieces = std::move(next);
    }
    EXPECT_EQ(pieces, c["pieces"].get<std::vector<std::string>>()) << "input " << escaped(text);
  }
}

TEST_P(HfPreTokenizer, EncodesAndDecodesEveryTextExactly) {
  auto tok = Tokenizer::load(kDir + GetParam());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  for (const json& c : vectors_["cases"]) {
    const std::string text = c["text"];
    auto ids = (*tok)->encode(text, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << "input " << escaped(text);
    auto decoded = (*tok)->decode(*ids);
    ASSERT_TRUE(decoded.has_value()) << decoded.status().to_string();
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << "input " << escaped(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfPreTokenizer,
                         ::testing::Values("llama3", "qwen2", "qwen35", "refact", "seed_coder", "hunyuan_dense",
                                           "tekken"));

// A GGUF vocabulary's pre-tokenizer name (llama.cpp's qwen2, hunyuan (Hunyuan MoE's, qwen2's regex),
// qwen35, refact, command-r (Cohere's, refact's regexes), seed-coder, hunyuan-dense, deepseek-v3)
// splits with its
// family's tokenizer.json patterns, which the cases above hold to Hugging Face's splits; and
// SmolLM3's smaug-bpe with Llama 3's.
TEST(HfPreTokenizerGguf, NamesAreTheirFamilysPatterns) {
  // (GGUF name, fixture family): Cohere's command-r, which is refact's; Seed-OSS's seed-coder;
  // Hunyuan's, which is DeepSeek-V3's.
  for (const auto& [name, family] : std::vector<std::pair<std::string, std::string>>{
           {"qwen2", "qwen2"}, {"hunyuan", "qwen2"}, {"qwen35", "qwen35"}, {"refact", "refact"}, {"command-r", "refact"},
           {"seed-coder", "seed_coder"}, {"hunyuan-dense", "hunyuan_dense"}, {"deepseek-v3", "hunyuan_dense"},
           {"tekken", "tekken"}, {"starcoder", "refact"}, {"stablelm2", "qwen2"}}) {  // (llama.cpp's STARCODER and
                                                                                  // STABLELM2 regexes)
    const json vectors = read_json(kDir + family + "/vectors.json");
    auto patterns = gguf_pretokenizer_patterns(name);
    ASSERT_TRUE(patterns.has_value()) << patterns.status().to_string();
    const std::vector<std::string> want = vectors.contains("patterns")
                                              ? vectors["patterns"].get<std::vector<std::string>>()
                                              : std::vector<std::string>{vectors["pattern"].get<std::string>()};
    EXPECT_EQ(*patterns, want) << name;
  }
  const json llama3 = read_json(kDir + "llama3/vectors.json");
  for (const char* name : {"smaug-bpe", "dbrx"})  // SmolLM3's; OLMo 2 / 3's cl100k vocabulary
    EXPECT_EQ(*gguf_pretokenizer_patterns(name), std::vector<std::string>{llama3["pattern"].get<std::string>()}) << name;
  for (const char* name : {"olmo", "exaone4", "phi-2"})  // llama.cpp splits these as GPT-2
    EXPECT_EQ(*gguf_pretokenizer_patterns(name), *gguf_pretokenizer_patterns("gpt-2")) << name;
}

// A GGUF vocabulary of tekken's fixture tokenizer (as llama.cpp's converter writes one, with
// tokenizer.ggml.pre "tekken") encodes every text as Hugging Face's tokenizer.json does, BOS
// first where llama.cpp's TEKKEN adds it (no add_bos_token key: its default, true).
TEST(HfPreTokenizerGguf, TekkenVocabularyEncodesAsTokenizerJson) {
  const json vectors = read_json(kDir + "tekken/vectors.json");
  const std::string text = *read_text_file(kDir + "tekken/tokenizer.json");
  std::vector<testing::GgufKv> kvs = testing::gguf_vocab_from_tokenizer_json(text, "tekken", "<s>", "</s>", true);
  ASSERT_FALSE(kvs.empty());
  std::erase_if(kvs, [](const testing::GgufKv& kv) { return kv.key == "tokenizer.ggml.add_bos_token"; });
  const testing::TempDir dir("tekken_gguf");
  const int vocab = static_cast<int>(json::parse(text)["model"]["vocab"].size() + 8);
  ASSERT_TRUE(testing::write_tiny_llama_gguf(dir.file("hf"), dir.file("tekken.gguf"), vocab, kvs).is_ok());
  auto tok = Tokenizer::load(dir.file("tekken.gguf"));
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const int32_t bos = json::parse(text)["added_tokens"][1]["id"];  // <s>
  for (const json& c : vectors["cases"]) {
    const std::string t = c["text"];
    auto ids = (*tok)->encode(t, /*add_bos=*/true);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    std::vector<int32_t> want = {bos};
    for (int32_t id : c["ids"].get<std::vector<int32_t>>()) want.push_back(id);
    EXPECT_EQ(*ids, want) << "input " << escaped(t);
  }
}

// add_bos adds what Hugging Face's add_special_tokens=True adds under the tokenizer.json
// post-processor (tokenizers/post_processor/: Llama 3's BOS first inside a Sequence, and
// Qwen3-Embedding's <|endoftext|> last, the token its last-token pooling reads), and nothing
// without it.
TEST(HfPostProcessor, AddsWhatAddSpecialTokensAdds) {
  const json vectors = read_json(kDir + "post_processor/vectors.json");
  ASSERT_TRUE(vectors.is_object());
  for (const std::string name : {"llama3_bos", "qwen3_embedding"}) {
    auto tok = Tokenizer::load(kDir + "post_processor/" + name + ".json");
    ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
    ASSERT_TRUE(vectors.contains(name));
    for (const json& c : vectors[name]) {
      const std::string text = c["text"];
      auto plain = (*tok)->encode(text, /*add_bos=*/false);
      auto special = (*tok)->encode(text, /*add_bos=*/true);
      ASSERT_TRUE(plain.has_value() && special.has_value());
      EXPECT_EQ(*plain, c["plain"].get<std::vector<int32_t>>()) << name << " " << escaped(text);
      EXPECT_EQ(*special, c["special"].get<std::vector<int32_t>>()) << name << " " << escaped(text);
    }
  }
}

// encode_pair gives what Hugging Face's tokenizer(text=a, text_pair=b) gives (a cross-encoder's
// /score input), ids and token type ids: the pair templates of Llama 3's and Qwen3-Embedding's post-processors, BERT's
// [CLS] A [SEP] B [SEP], RoBERTa's <s> A </s></s> B </s>, and the two encodings joined without
// a post-processor (pairs.json, scripts/make_tokenizer_fixtures.py pairs).
TEST(HfPostProcessor, EncodesAPairAsTheTokenizerDoes) {
  const json cases = read_json(kDir + "post_processor/pairs.json");
  ASSERT_TRUE(cases.is_object());
  const testing::TempDir dir("pairs");
  for (const std::string name : {"llama3_bos", "qwen3_embedding", "bert", "roberta", "none"}) {
    ASSERT_TRUE(cases.contains(name)) << name;
    const json& c = cases[name];
    std::string path = name == "none" ? kDir + "qwen2/tokenizer.json" : kDir + "post_processor/" + name + ".json";
    if (!c["post_processor"].is_null()) {  // the qwen2 fixture under this post-processor
      auto base = read_text_file(kDir + "qwen2/tokenizer.json");
      ASSERT_TRUE(base.has_value());
      json t = json::parse(*base);
      t["post_processor"] = c["post_processor"];
      path = dir.file(name + ".json");
      testing::write_text(path, t.dump());
    }
    auto tok = Tokenizer::load(path);
    ASSERT_TRUE(tok.has_value()) << name << ": " << tok.status().to_string();
    ASSERT_EQ(c["pairs"].size(), 3u);
    for (const json& p : c["pairs"]) {
      std::vector<int32_t> type_ids;
      auto ids = (*tok)->encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>(), &type_ids);
      ASSERT_TRUE(ids.has_value()) << name << ": " << ids.status().to_string();
      EXPECT_EQ(*ids, p["ids"].get<std::vector<int32_t>>()) << name << " " << p["a"].dump() << " | " << p["b"].dump();
      EXPECT_EQ(type_ids, p["type_ids"].get<std::vector<int32_t>>()) << name << " " << p["a"].dump() << " | " << p["b"].dump();
    }
  }
  // A template with a single form only cannot encode a pair.
  auto base = read_text_file(kDir + "post_processor/qwen3_embedding.json");
  ASSERT_TRUE(base.has_value());
  json t = json::parse(*base);
  t["post_processor"].erase("pair");
  testing::write_text(dir.file("single_only.json"), t.dump());
  auto single = Tokenizer::load(dir.file("single_only.json"));
  ASSERT_TRUE(single.has_value()) << single.status().to_string();
  auto refused = (*single)->encode_pair("a", "b");
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("no pair template"), std::string::npos) << refused.status().message();
}

TEST(HfPostProcessor, MalformedOnesAreRefusedWithTheReason) {
  auto base = read_text_file(kDir + "post_processor/qwen3_embedding.json");
  ASSERT_TRUE(base.has_value());
  const json good = json::parse(*base);
  const testing::TempDir dir("post_processor");
  auto refused = [&](json post, const std::string& why) {
    json t = good;
    t["post_processor"] = std::move(post);
    testing::write_text(dir.file("tokenizer.json"), t.dump());
    auto tok = Tokenizer::load(dir.file("tokenizer.json"));
    ASSERT_FALSE(tok.has_value()) << why;
    EXPECT_NE(tok.status().message().find(why), std::string::npos) << tok.status().message();
  };
  json outside = good["post_processor"];
  outside["special_tokens"]["<|endoftext|>"]["ids"] = {1 << 20};
  refused(outside, "outside the vocabulary");
  json no_a = good["post_processor"];
  no_a["single"] = json::array({no_a["single"][1]});
  refused(no_a, "no $A");
  refused(json{{"type", "WordPieceProcessing"}}, "is not supported");
  refused(json{{"type", "BertProcessing"}, {"cls", json::array({"<s>", 1 << 20})}, {"sep", json::array({"</s>", 0})}},
          "outside the vocabulary");
  json pair_without_b = good["post_processor"];
  pair_without_b["pair"] = pair_without_b["single"];
  refused(pair_without_b, "$A and $B once each");
  json two = json{{"type", "Sequence"}, {"processors", json::array({good["post_processor"], good["post_processor"]})}};
  refused(two, "two templates");
}

}  // namespace
}  // namespace brigade
