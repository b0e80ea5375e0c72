// tiktoken vocabularies (models/tokenizer_tiktoken.h) against OpenAI's `tiktoken` library:
// tests/fixtures/tokenizers/tiktoken/ holds a small learned ranks file laid out as Kimi K2's
// directory (tiktoken.model, tokenizer_config.json with added_tokens_decoder and a chat template)
// and as Hunyuan-A13B's (hy.tiktoken with a repeated line, HYTokenizer), and vectors.json: for
// each family (and Qwen v1 over the Kimi ranks) tiktoken's ids and decodes of texts with Han and
// kana, NFC-sensitive letters, digits, emoji, whitespace runs, contractions, special tokens in the
// text, and tokens whose rank is below their parts' (scripts/make_tiktoken_fixtures.py); glm4/ the
// same ranks as GLM-4's tokenizer.model (ChatGLM4Tokenizer).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf_vocab.h"
#include "model_test_util.h"
#include "models/detokenizer.h"
#include "models/mapped_file.h"
#include "models/model_chat_template.h"
#include "models/tokenizer.h"
#include "models/tokenizer_gguf.h"
#include "models/tokenizer_precompiled.h"
#include "models/tokenizer_tiktoken.h"
#include "models/utf8.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/tiktoken/";

const json& vectors() {
  static const json v = read_json(kDir + "vectors.json");
  return v;
}

std::unique_ptr<Tokenizer> load(const std::string& dir) {
  auto tok = Tokenizer::load(dir);
  EXPECT_TRUE(tok.has_value()) << dir << ": " << tok.status().to_string();
  return tok ? std::move(*tok) : nullptr;
}

// A Qwen (v1) directory: the Kimi fixture's ranks as qwen.tiktoken, QWenTokenizer's config.
void write_qwen_directory(const testing::TempDir& dir) {
  fs::copy_file(kDir + "kimi/tiktoken.model", dir.file("qwen.tiktoken"));
  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"auto_map": {"AutoTokenizer": ["tokenization_qwen.QWenTokenizer", null]}, "tokenizer_class": "QWenTokenizer"})";
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Each case's ids (encode with and without add_bos: the Python classes add no special tokens),
// decode, and the streaming detokenizer's text.
void expect_matches_tiktoken(const Tokenizer& tok, const std::string& family) {
  SCOPED_TRACE(family);
  const json& v = vectors()[family];
  ASSERT_GT(v["cases"].size(), 10u);
  const std::vector<int32_t> eos = tok.eos_ids();
  for (const json& c : v["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    auto plain = tok.encode(text, /*add_bos=*/false), special = tok.encode(text, /*add_bos=*/true);
    ASSERT_TRUE(plain.has_value() && special.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, want) << "input " << escaped(text);
    EXPECT_EQ(*special, want) << "input " << escaped(text);
    auto decoded = tok.decode(want);
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << "input " << escaped(text);
    IncrementalDetokenizer stream(tok, /*skip_special=*/false);
    std::string streamed, want_streamed;
    for (int32_t id : want) {
      streamed += stream.push(id);
      if (std::find(eos.begin(), eos.end(), id) == eos.end()) want_streamed += tok.token_to_piece(id);
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, want_streamed) << "input " << escaped(text);
  }
}

TEST(TiktokenKimi, EncodesAndDecodesAsTiktoken) {
  auto tok = load(kDir + "kimi");
  ASSERT_TRUE(tok);
  expect_matches_tiktoken(*tok, "kimi");
}

TEST(TiktokenHunyuan, EncodesAndDecodesAsTiktoken) {
  auto tok = load(kDir + "hunyuan");
  ASSERT_TRUE(tok);
  expect_matches_tiktoken(*tok, "hunyuan");
}

TEST(TiktokenQwen, EncodesAndDecodesAsTiktoken) {
  const testing::TempDir dir("tiktoken_qwen");
  write_qwen_directory(dir);
  auto tok = load(dir.str());
  ASSERT_TRUE(tok);
  expect_matches_tiktoken(*tok, "qwen");
  const int32_t n = vectors()["qwen"]["n_ranks"];
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{n});  // <|endoftext|>
  EXPECT_EQ(tok->vocab_size(), n + 208);
}

// Every special id the family's Python defines: its content, special, matched in text; the rank
// ids decode to the ranks file's bytes.
void expect_special_tokens(const Tokenizer& tok, const std::string& family, size_t n_special) {
  SCOPED_TRACE(family);
  const json& v = vectors()[family];
  const int32_t n = v["n_ranks"];
  ASSERT_EQ(v["special"].size(), n_special);
  EXPECT_EQ(tok.vocab_size(), n + static_cast<int32_t>(n_special));
  const int32_t a = tok.encode("a", false)->at(0), b = tok.encode("b", false)->at(0);
  for (const auto& [content, id] : v["special"].items()) {
    EXPECT_EQ(tok.token_to_piece(id), content);
    EXPECT_EQ(tok.token_string(id), content);
    EXPECT_TRUE(tok.is_special(id)) << content;
    EXPECT_EQ(*tok.encode("a" + content + "b", false), (std::vector<int32_t>{a, id.get<int32_t>(), b})) << content;
  }
  EXPECT_FALSE(tok.is_special(n - 1));
}

TEST(TiktokenKimi, FillsReservedTokensAndNamesBosEos) {
  auto tok = load(kDir + "kimi");
  ASSERT_TRUE(tok);
  expect_special_tokens(*tok, "kimi", 258);
  const int32_t n = vectors()["kimi"]["n_ranks"];
  EXPECT_EQ(tok->bos_id(), n);                            // [BOS]
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{n + 1});  // [EOS]
  EXPECT_EQ(tok->token_to_piece(n + 17), "<|im_middle|>");
  EXPECT_EQ(tok->token_to_piece(n + 5), "<|reserved_token_" + std::to_string(n + 5) + "|>");
  EXPECT_EQ(tok->token_to_piece(n + 257), "<|reserved_token_" + std::to_string(n + 257) + "|>");
  // The rank ids are the ranks file's tokens.
  auto ranks = read_text_file(kDir + "kimi/tiktoken.model");
  ASSERT_TRUE(ranks.has_value());
  auto tokens = parse_tiktoken_ranks(*ranks, /*by_line=*/false, "tiktoken.model");
  ASSERT_TRUE(tokens.has_value()) << tokens.status().to_string();
  ASSERT_EQ(tokens->size(), static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) EXPECT_EQ(tok->token_to_piece(id), (*tokens)[static_cast<size_t>(id)]) << id;
}

// Kimi K2 defines 258 special ids after its ranks but its embedding stops 2 short of them
// (163,584 ranks, vocab_size 163,840): the reserved fillers past config.json's vocab_size are
// dropped, as llama.cpp's converter drops them, so check_tokenizer_fits takes the tokenizer; a
// named special token past it is kept, and the check refuses it.
TEST(TiktokenKimi, DropsReservedIdsPastTheModelsVocabulary) {
  const int32_t n = vectors()["kimi"]["n_ranks"];
  const testing::TempDir dir("tiktoken_vocab");
  for (const char* f : {"tiktoken.model", "tokenizer_config.json"}) fs::copy_file(kDir + "kimi/" + f, dir.file(f));
  write_file(dir.file("config.json"), json{{"vocab_size", n + 256}}.dump());
  auto tok = load(dir.str());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), n + 256);
  EXPECT_TRUE(check_tokenizer_fits(*tok, n + 256).is_ok());
  EXPECT_EQ(tok->token_to_piece(n + 255), "[PAD]");
  const std::string past = "<|reserved_token_" + std::to_string(n + 256) + "|>";
  auto ids = tok->encode(past, false);
  ASSERT_TRUE(ids.has_value());
  EXPECT_GT(ids->size(), 1u) << "no longer a special token";
  write_file(dir.file("config.json"), json{{"vocab_size", n + 100}}.dump());
  tok = load(dir.str());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), n + 256);  // [PAD] at n + 255 is named
  EXPECT_FALSE(check_tokenizer_fits(*tok, n + 100).is_ok());
}

TEST(TiktokenHunyuan, DefinesHYTokenizersSpecialTokens) {
  auto tok = load(kDir + "hunyuan");
  ASSERT_TRUE(tok);
  expect_special_tokens(*tok, "hunyuan", 210);
  const int32_t n = vectors()["hunyuan"]["n_ranks"];
  EXPECT_EQ(tok->bos_id(), n + 2);                         // <|bos|>
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{n + 3});  // <|eos|>
  EXPECT_EQ(tok->token_to_piece(n + 209), "<|extra_204|>");
}

// hy.tiktoken repeats a line mid-file and numbers its rank column by line: HYTokenizer ranks the
// unique tokens in file order, so the file reads as the Kimi fixture's ranks.
TEST(TiktokenHunyuan, RanksUniqueTokensInFileOrder) {
  auto hy = read_text_file(kDir + "hunyuan/hy.tiktoken"), kimi = read_text_file(kDir + "kimi/tiktoken.model");
  ASSERT_TRUE(hy.has_value() && kimi.has_value());
  auto by_line = parse_tiktoken_ranks(*hy, /*by_line=*/true, "hy.tiktoken");
  auto by_rank = parse_tiktoken_ranks(*kimi, /*by_line=*/false, "tiktoken.model");
  ASSERT_TRUE(by_line.has_value() && by_rank.has_value());
  EXPECT_EQ(*by_line, *by_rank);
  auto strict = parse_tiktoken_ranks(*hy, /*by_line=*/false, "hy.tiktoken");
  ASSERT_FALSE(strict.has_value());
  EXPECT_NE(strict.status().message().find("repeats line"), std::string::npos) << strict.status().to_string();
}

// The fixture swapped a few long tokens' ranks below their parts': a replay only up to a token's
// own rank (transformers' TikTokenConverter, llama.cpp's converter) finds no merge for them, yet
// tiktoken produces them inside longer words where its replay of the token's bytes reaches them;
// the full replay's merges do too. One whose replay gets stuck is made only as a whole piece.
TEST(TiktokenKimi, KeepsTokensRankedBelowTheirParts) {
  auto tok = load(kDir + "kimi");
  ASSERT_TRUE(tok);
  auto ranks = read_text_file(kDir + "kimi/tiktoken.model");
  ASSERT_TRUE(ranks.has_value());
  const std::vector<std::string> tokens = *parse_tiktoken_ranks(*ranks, false, "tiktoken.model");
  const std::vector<size_t> splits = tiktoken_merge_splits(tokens);
  ASSERT_GE(vectors()["inverted"].size(), 3u);
  int n_reached = 0;
  for (const json& b64 : vectors()["inverted"]) {
    const std::string word = *decode_base64_text(b64.get<std::string>());
    const auto id = static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), word) - tokens.begin());
    ASSERT_LT(id, static_cast<int32_t>(tokens.size()));
    const std::string text = "pre" + word + "post";
    const json* ref = nullptr;
    for (const json& c : vectors()["kimi"]["cases"])
      if (c["text"] == text) ref = &c;
    ASSERT_NE(ref, nullptr) << text;
    const auto want = (*ref)["ids"].get<std::vector<int32_t>>();
    const bool reached = std::find(want.begin(), want.end(), id) != want.end();
    EXPECT_EQ(reached, splits[static_cast<size_t>(id)] > 0) << word;
    EXPECT_EQ(*tok->encode(text, false), want) << word;
    EXPECT_EQ(*tok->encode(word, false), std::vector<int32_t>{id}) << word;  // a whole piece
    n_reached += reached;
  }
  EXPECT_GE(n_reached, 3);
}

// TikTokenTokenizer.encode's cut (400,000-character chunks, runs longer than 25,000 characters)
// against the same algorithm run in Python over tiktoken (kimi_long.json, `python3
// scripts/make_tiktoken_fixtures.py long`): a 497,091-character text rebuilt here from the
// fixture's segments (runs of exactly 25,000, of 25,001 and more, of Python-only whitespace
// U+001C, a special token the cut falls inside, a chunk boundary inside a run). The script checks
// that the ids differ without the cut and without the chunks.
TEST(TiktokenKimi, CutsLongRunsAsTikTokenTokenizer) {
  const json ref = read_json(kDir + "kimi_long.json");
  std::u32string chars;
  for (const json& seg : ref["segments"]) {
    const std::u32string pattern = utf8_to_u32(seg[0].get<std::string>());
    const auto n = seg[1].get<size_t>();
    for (size_t i = 0; i < n; ++i) chars += pattern[i % pattern.size()];
  }
  ASSERT_EQ(chars.size(), ref["characters"].get<size_t>());
  const std::string text = u32_to_utf8(chars);
  std::vector<size_t> lengths;
  for (std::string_view p : tiktoken_run_pieces(text, ref["chunk_chars"].get<size_t>(), ref["run_chars"].get<size_t>()))
    lengths.push_back(utf8_to_u32(p).size());
  EXPECT_EQ(lengths, ref["pieces"].get<std::vector<size_t>>());
  std::vector<int32_t> want;
  for (const json& run : ref["ids_rle"])
    for (int r = 0; r < run[1].get<int>(); ++r)
      for (const json& id : run[0]) want.push_back(id.get<int32_t>());
  ASSERT_EQ(want.size(), ref["n_ids"].get<size_t>());
  auto tok = load(kDir + "kimi");
  ASSERT_TRUE(tok);
  auto ids = tok->encode(text, false);
  ASSERT_TRUE(ids.has_value()) << ids.status().message();
  ASSERT_EQ(ids->size(), want.size());
  const auto diff = std::mismatch(ids->begin(), ids->end(), want.begin());
  EXPECT_EQ(diff.first, ids->end()) << "first difference at id " << (diff.first - ids->begin());
  EXPECT_TRUE(tiktoken_run_pieces("", 400000, 25000).empty());
}

TEST(TiktokenKimi, ChatTemplateFromTokenizerConfig) {
  auto tok = load(kDir + "kimi");
  ASSERT_TRUE(tok);
  auto t = load_chat_template(kDir + "kimi", "", ChatSpecialTokens{"[BOS]", "[EOS]"});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "你好, Kimi!"}};
  auto prompt = t->apply(messages, {}, /*add_generation_prompt=*/true, "");
  ASSERT_TRUE(prompt.has_value()) << prompt.status().to_string();
  EXPECT_EQ(*prompt,
            "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>你好, Kimi!<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>");
  auto ids = tok->encode(*prompt, false);
  ASSERT_TRUE(ids.has_value());
  const int32_t n = vectors()["kimi"]["n_ranks"];
  EXPECT_EQ(ids->front(), n + 10);  // <|im_system|>
  EXPECT_EQ(ids->back(), n + 17);   // <|im_middle|>
  EXPECT_EQ(std::count(ids->begin(), ids->end(), n + 2), 2);  // <|im_end|>
  EXPECT_EQ(*tok->decode(*ids), *prompt);
}

// llama.cpp's kimi-k2 pre-tokenizer name: Kimi's pattern. A gpt2 GGUF vocabulary made from the
// converted Kimi fixture (as llama.cpp's converter writes one, special tokens as control) encodes
// as tiktoken.
TEST(TiktokenGguf, KimiK2PreTokenizerSplitsAsKimi) {
  auto patterns = gguf_pretokenizer_patterns("kimi-k2");
  ASSERT_TRUE(patterns.has_value()) << patterns.status().to_string();
  EXPECT_EQ(*patterns, std::vector<std::string>{kKimiK2Pattern});
  auto converted = convert_tiktoken_directory(kDir + "kimi");
  ASSERT_TRUE(converted.has_value()) << converted.status().to_string();
  const testing::TempDir dir("tiktoken_gguf");
  const int32_t n = vectors()["kimi"]["n_ranks"];
  const std::string path = dir.file("kimi.gguf");
  ASSERT_TRUE(testing::write_tiny_llama_gguf(dir.file("hf"), path, n + 258,
                                             testing::gguf_vocab_from_tokenizer_json(converted->tokenizer.dump(), "kimi-k2",
                                                                                     "[BOS]", "[EOS]", false))
                  .is_ok());
  auto tok = load(path);
  ASSERT_TRUE(tok);
  // llama.cpp takes no whole piece as one token for kimi-k2 (no ignore_merges): a token that only
  // tiktoken's whole-piece shortcut makes (its replay gets stuck) is left out of the comparison.
  const std::vector<std::string> tokens =
      *parse_tiktoken_ranks(*read_text_file(kDir + "kimi/tiktoken.model"), false, "tiktoken.model");
  const std::vector<size_t> splits = tiktoken_merge_splits(tokens);
  size_t n_compared = 0;
  for (const json& c : vectors()["kimi"]["cases"]) {
    const auto want = c["ids"].get<std::vector<int32_t>>();
    if (std::any_of(want.begin(), want.end(), [&](int32_t id) {
          return id < n && tokens[static_cast<size_t>(id)].size() > 1 && splits[static_cast<size_t>(id)] == 0;
        }))
      continue;
    ++n_compared;
    EXPECT_EQ(*tok->encode(c["text"].get<std::string>(), false), want) << "input " << escaped(c["text"]);
  }
  EXPECT_GT(n_compared, vectors()["kimi"]["cases"].size() * 3 / 4);
}

// The merge of each token is the last join of tiktoken's replay of its own bytes, run to the end
// (the lowest-ranked adjacent pair first). "abc" ranks below "ab": a replay stopped at the token's
// own rank (transformers', llama.cpp's) never joins "ab" and finds no merge for it. "xyz" has no
// ranked pair (only a whole piece makes it). "ab" ranks below "aa", so "aab" is "a" + "ab".
TEST(TiktokenRanks, MergeSplitsReplayToTheEnd) {
  const std::vector<std::string> tokens = {"a", "b", "c", "x", "y", "z", "abc", "ab", "xyz", "aa", "aab", "bc"};
  const std::vector<size_t> splits = tiktoken_merge_splits(tokens);
  ASSERT_EQ(splits.size(), tokens.size());
  for (size_t r = 0; r < 6; ++r) EXPECT_EQ(splits[r], 0u) << "a single byte has no merge";
  EXPECT_EQ(splits[6], 2u);   // abc = ab + c
  EXPECT_EQ(splits[7], 1u);   // ab = a + b
  EXPECT_EQ(splits[8], 0u);   // xyz: stuck
  EXPECT_EQ(splits[9], 1u);   // aa = a + a
  EXPECT_EQ(splits[10], 1u);  // aab = a + ab
  EXPECT_EQ(splits[11], 1u);  // bc = b + c
}

// A ranks file that is truncated or corrupt is refused naming the file and line.
TEST(TiktokenRanks, RefusesCorruptFiles) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"YQ== 0\n!!!! 1\n", "line 2: '!!!!' is not base64"},
      {"YQ== 0\nYg==\n", "line 2: expected 'base64-token rank'"},
      {"YQ== 0\nYg== 1 2\n", "line 2: expected"},
      {"YQ== 0\nYg== one\n", "line 2: rank 'one' is not an integer"},
      {"YQ== 0\nYg== -1\n", "line 2: rank '-1'"},
      {"YQ== 0\nYg== 0\n", "line 2: rank 0 repeats line 1's"},
      {"YQ== 0\nYQ== 1\n", "line 2: the token repeats line 1's"},
      {"YQ== 0\nYg== 2\n", "rank 1 is missing"},
      {"YQ== 0\nYg== 99999\n", "line 2: rank 99999 is beyond the file's 3 lines"},
      {"YQ== 0\n= 1\n", "line 2: the token is empty"},
      {"", "no ranks"},
  };
  for (const auto& [text, want] : cases) {
    auto r = parse_tiktoken_ranks(text, /*by_line=*/false, "f.tiktoken");
    ASSERT_FALSE(r.has_value()) << escaped(text);
    EXPECT_EQ(r.status().code(), StatusCode::corrupt) << escaped(text);
    EXPECT_NE(r.status().message().find("f.tiktoken"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find(want), std::string::npos) << escaped(text) << ": " << r.status().to_string();
  }
  // HYTokenizer's reading: repeats skipped, the rank column ignored but still a number.
  EXPECT_EQ(*parse_tiktoken_ranks("YQ== 5\nYg== 5\nYQ== 7\r\n\n", true, "hy"), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(parse_tiktoken_ranks("YQ== 0\nYg== x\n", true, "hy").has_value());
}

// The same through a model directory: a ranks file cut short mid-line fails to load, naming it.
TEST(TiktokenRanks, TruncatedFileFailsToLoad) {
  auto ranks = read_text_file(kDir + "kimi/tiktoken.model");
  ASSERT_TRUE(ranks.has_value());
  const testing::TempDir dir("tiktoken_truncated");
  fs::copy_file(kDir + "kimi/tokenizer_config.json", dir.file("tokenizer_config.json"));
  const size_t cut = ranks->find(' ', ranks->size() / 2);
  write_file(dir.file("tiktoken.model"), ranks->substr(0, cut));
  auto tok = Tokenizer::load(dir.str());
  ASSERT_FALSE(tok.has_value());
  EXPECT_EQ(tok.status().code(), StatusCode::corrupt);
  EXPECT_NE(tok.status().message().find("tiktoken.model line"), std::string::npos) << tok.status().to_string();
  write_file(dir.file("tiktoken.model"), ranks->substr(0, ranks->find('\n', ranks->size() / 2) + 1));
  tok = Tokenizer::load(dir.str());  // whole lines, but the specials' ids move: the config's no longer fit
  ASSERT_FALSE(tok.has_value());
  EXPECT_NE(tok.status().message().find("added_tokens_decoder id"), std::string::npos) << tok.status().to_string();
}

// Families brigade does not know are refused by name, listing the known ones; so are a config
// that names a class whose file is absent, one whose bos/eos is not a special token, and Meta's
// original Llama 3 tokenizer.model (tiktoken ranks, no pattern or special tokens).
TEST(TiktokenFamilies, RefusesUnknownAndInconsistentDirectories) {
  const testing::TempDir dir("tiktoken_families");
  fs::copy_file(kDir + "kimi/tiktoken.model", dir.file("tiktoken.model"));
  const json kimi_config = read_json(kDir + "kimi/tokenizer_config.json");
  auto kimi_with = [&](const json& changes) {
    json c = kimi_config;
    c.erase("auto_map");
    c.merge_patch(changes);
    return c.dump();
  };
  auto load_status = [&](const std::string& config) {
    if (config.empty()) fs::remove(dir.file("tokenizer_config.json"));
    else write_file(dir.file("tokenizer_config.json"), config);
    auto tok = Tokenizer::load(dir.str());
    return tok ? Status::ok() : tok.status();
  };
  Status st = load_status(R"({"tokenizer_class": "FooTokenizer"})");
  EXPECT_EQ(st.code(), StatusCode::unsupported);
  EXPECT_NE(st.message().find("'FooTokenizer'"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("tokenization_kimi.TikTokenTokenizer"), std::string::npos) << st.to_string();
  st = load_status(R"({"auto_map": {"AutoTokenizer": ["tokenization_other.TikTokenTokenizer", null]}})");
  EXPECT_EQ(st.code(), StatusCode::unsupported);
  EXPECT_NE(st.message().find("tokenization_other.TikTokenTokenizer"), std::string::npos) << st.to_string();
  st = load_status("");
  EXPECT_EQ(st.code(), StatusCode::not_found) << st.to_string();
  st = load_status(R"({"tokenizer_class": null})");
  EXPECT_EQ(st.code(), StatusCode::unsupported);
  EXPECT_NE(st.message().find("no tokenizer_class"), std::string::npos) << st.to_string();
  st = load_status(R"({"tokenizer_class": "HYTokenizer"})");
  EXPECT_EQ(st.code(), StatusCode::not_found);
  EXPECT_NE(st.message().find("hy.tiktoken"), std::string::npos) << st.to_string();
  st = load_status(kimi_with({{"eos_token", "</s>"}}));
  EXPECT_EQ(st.code(), StatusCode::corrupt);
  EXPECT_NE(st.message().find("eos_token '</s>'"), std::string::npos) << st.to_string();
  st = load_status(kimi_with({{"added_tokens_decoder", {{"3", {{"content", "x"}}}}}}));
  EXPECT_EQ(st.code(), StatusCode::corrupt);
  EXPECT_NE(st.message().find("added_tokens_decoder id '3'"), std::string::npos) << st.to_string();
  // Without auto_map the class name alone says Kimi; [BOS] and [EOS] by default, which its
  // added_tokens_decoder must name (TikTokenTokenizer looks them up among its special tokens).
  EXPECT_TRUE(load_status(kimi_with({{"bos_token", nullptr}, {"eos_token", nullptr}})).is_ok());
  st = load_status(R"({"tokenizer_class": "TikTokenTokenizer"})");
  EXPECT_EQ(st.code(), StatusCode::corrupt);
  EXPECT_NE(st.message().find("bos_token '[BOS]'"), std::string::npos) << st.to_string();

  const testing::TempDir llama3("tiktoken_llama3");
  fs::copy_file(kDir + "kimi/tiktoken.model", llama3.file("tokenizer.model"));
  auto tok = Tokenizer::load(llama3.str());
  ASSERT_FALSE(tok.has_value());
  EXPECT_EQ(tok.status().code(), StatusCode::unsupported);
  EXPECT_NE(tok.status().message().find("Llama 3"), std::string::npos) << tok.status().to_string();
  EXPECT_FALSE(Tokenizer::load(llama3.file("tokenizer.model")).has_value());
}

// GLM-4's ChatGLM4Tokenizer (glm4/: the Kimi ranks as tokenizer.model): tiktoken's ids over cl100k's
// pattern, its fourteen special tokens, and [gMASK] <sop> first with add_special_tokens.
TEST(TiktokenGlm4, EncodesAndDecodesAsTiktokenWithItsPrefix) {
  auto tok = load(kDir + "glm4");
  ASSERT_TRUE(tok);
  const json& v = vectors()["glm4"];
  const auto prefix = v["prefix"].get<std::vector<int32_t>>();
  ASSERT_GT(v["cases"].size(), 10u);
  for (const json& c : v["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    auto plain = tok->encode(text, /*add_bos=*/false), special = tok->encode(text, /*add_bos=*/true);
    ASSERT_TRUE(plain.has_value() && special.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, want) << "input " << escaped(text);
    std::vector<int32_t> with_prefix = prefix;
    with_prefix.insert(with_prefix.end(), want.begin(), want.end());
    EXPECT_EQ(*special, with_prefix) << "input " << escaped(text);
    EXPECT_EQ(*tok->decode(want), c["decoded"].get<std::string>()) << "input " << escaped(text);
  }
  expect_special_tokens(*tok, "glm4", 14);
  const int32_t n = v["n_ranks"];
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{n});  // <|endoftext|>
  EXPECT_EQ(tok->token_to_piece(n + 2), "[gMASK]");
  EXPECT_EQ(tok->token_to_piece(n + 13), "<|end_of_video|>");
  // The chat template writes the prefix itself (the chat path encodes without special tokens).
  auto t = load_chat_template(kDir + "glm4", "", ChatSpecialTokens{"", "<|endoftext|>"});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  const std::vector<ChatMessage> messages = {{"user", "hi"}};
  auto prompt = t->apply(messages, {}, /*add_generation_prompt=*/true, "");
  ASSERT_TRUE(prompt.has_value()) << prompt.status().to_string();
  auto ids = tok->encode(*prompt, false);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(std::vector<int32_t>(ids->begin(), ids->begin() + 3), (std::vector<int32_t>{n + 2, n + 4, n + 7}));
  EXPECT_EQ(ids->back(), n + 8);  // <|assistant|>
}

// tokenizer.model is SentencePiece's name too: a SentencePiece model beside a tokenizer_config.json
// stays SentencePiece, and GLM-4's ranks without tokenizer_config.json are refused as before, the
// refusal naming GLM-4's directory.
TEST(TiktokenGlm4, TokenizerModelIsTiktokenOnlyWhenItHoldsRanks) {
  EXPECT_TRUE(has_tiktoken_vocabulary(kDir + "glm4"));
  const testing::TempDir bare("glm4_bare");
  fs::copy_file(kDir + "glm4/tokenizer.model", bare.file("tokenizer.model"));
  EXPECT_FALSE(has_tiktoken_vocabulary(bare.str()));
  auto refused = Tokenizer::load(bare.str());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("GLM-4"), std::string::npos) << refused.status().to_string();
  // A real SentencePiece model (../shared/testdata's, absent from a bare clone) beside GLM-4's config.
  const std::string llama2 = std::string(BRIGADE_TESTDATA) + "/tokenizers/llama2-tokenizer.model";
  if (!fs::exists(llama2)) GTEST_SKIP() << llama2 << " is not here";
  const testing::TempDir spm("glm4_spm");
  fs::copy_file(llama2, spm.file("tokenizer.model"));
  fs::copy_file(kDir + "glm4/tokenizer_config.json", spm.file("tokenizer_config.json"));
  EXPECT_FALSE(has_tiktoken_vocabulary(spm.str()));
  auto tok = load(spm.str());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 32000) << "Llama 2's SentencePiece model";
}

}  // namespace
}  // namespace brigade
