// Mistral's tekken.json (models/tokenizer_tekken.h) against mistral-common's Tekkenizer:
// tests/fixtures/tokenizers/tekken_json/ holds a small learned vocabulary written as a v13
// tekken.json (300 special ids, 200 of them listed, the vocab cut from 1,600 ranks to 1,500, some
// tokens ranked below their parts), the chat template mistral-common writes for it, and
// vectors.json: Tekkenizer's ids (with and without BOS) and decodes (IGNORE and KEEP) of texts with
// Han and kana, accents, digits, emoji, slashes, whitespace runs; the special ids; texts holding
// special-token strings; conversations as MistralTokenizer.encode_chat_completion encodes them
// (scripts/make_tekken_fixtures.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "models/chat_template.h"
#include "models/detokenizer.h"
#include "models/mapped_file.h"
#include "models/model_chat_template.h"
#include "models/tokenizer.h"
#include "models/tokenizer_precompiled.h"
#include "models/tokenizer_tekken.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::escaped;
using testing::read_json;

const std::string kDir = std::string(BRIGADE_FIXTURES) + "/tokenizers/tekken_json/";

const json& vectors() {
  static const json v = read_json(kDir + "vectors.json");
  return v;
}

const json& tekken() {
  static const json t = read_json(kDir + "tekken.json");
  return t;
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::unique_ptr<Tokenizer> load(const std::string& path) {
  auto tok = Tokenizer::load(path);
  EXPECT_TRUE(tok.has_value()) << path << ": " << tok.status().to_string();
  return tok ? std::move(*tok) : nullptr;
}

// The text an IncrementalDetokenizer streams for `ids`.
std::string streamed(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer stream(tok, skip_special);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  return out + stream.flush();
}

TEST(TekkenFile, EncodesAndDecodesAsMistralCommon) {
  auto tok = load(kDir);  // the directory: no tokenizer.json, so tekken.json
  ASSERT_TRUE(tok);
  const json& v = vectors();
  ASSERT_GT(v["cases"].size(), 60u);
  for (const json& c : v["cases"]) {
    const std::string text = c["text"];
    const auto ids = c["ids"].get<std::vector<int32_t>>(), ids_bos = c["ids_bos"].get<std::vector<int32_t>>();
    auto plain = tok->encode(text, /*add_bos=*/false), with_bos = tok->encode(text, /*add_bos=*/true);
    ASSERT_TRUE(plain.has_value() && with_bos.has_value()) << plain.status().to_string();
    EXPECT_EQ(*plain, ids) << "input " << escaped(text);
    EXPECT_EQ(*with_bos, ids_bos) << "input " << escaped(text);
    // skip_special: SpecialTokenPolicy.IGNORE (Tekkenizer's default); without: KEEP.
    EXPECT_EQ(*tok->decode(ids_bos, /*skip_special=*/true), c["decoded"].get<std::string>()) << escaped(text);
    EXPECT_EQ(*tok->decode(ids_bos, /*skip_special=*/false), c["decoded_keep"].get<std::string>()) << escaped(text);
    EXPECT_EQ(streamed(*tok, ids_bos, true), c["decoded"].get<std::string>()) << escaped(text);
    EXPECT_EQ(streamed(*tok, ids_bos, false), c["decoded_keep"].get<std::string>()) << escaped(text);
  }
}

// Special token i is id i (fillers named <SPECIAL_i>), the vocabulary after them, cut to
// default_vocab_size; <s> is BOS, </s> EOS; every special id is special, decodes to its name and is
// matched in text.
TEST(TekkenFile, MapsSpecialTokensFirstAndCutsTheVocabulary) {
  auto tok = load(kDir + "tekken.json");  // the file itself
  ASSERT_TRUE(tok);
  const json& v = vectors();
  const int32_t n_special = v["n_special"];
  EXPECT_EQ(tok->vocab_size(), v["vocab_size"].get<int>());
  EXPECT_EQ(tok->bos_id(), v["bos"].get<int32_t>());
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{v["eos"].get<int32_t>()});
  const int32_t a = tok->encode("a", false)->at(0), b = tok->encode("b", false)->at(0);
  EXPECT_EQ(a, n_special + 'a');  // rank 97 is the byte 'a'
  for (const auto& [name, id] : v["specials"].items()) {
    EXPECT_EQ(tok->token_to_piece(id), name);
    EXPECT_TRUE(tok->is_special(id)) << name;
    EXPECT_EQ(*tok->encode("a" + name + "b", false), (std::vector<int32_t>{a, id.get<int32_t>(), b})) << name;
  }
  for (int32_t id = 0; id < n_special; ++id) EXPECT_TRUE(tok->is_special(id)) << id;
  EXPECT_FALSE(tok->is_special(n_special));
  // The cut ranks are gone: rank 1500 of the file would be id 1800.
  const std::string cut = *decode_base64_text(tekken()["vocab"][1500]["token_bytes"].get<std::string>());
  EXPECT_EQ(tok->token_to_piece(n_special + 1500), "");
  for (int32_t id = n_special; id < tok->vocab_size(); ++id) EXPECT_NE(tok->token_to_piece(id), cut) << id;
}

// Tekkenizer.encode takes "[INST]" in text as plain text; brigade matches special-token strings
// (its chat templates write them as text), as transformers' tokenizer.json of the same file does:
// the ids are the special ids with mistral-common's ids of the text between.
TEST(TekkenFile, MatchesSpecialTokenStringsInText) {
  auto tok = load(kDir);
  ASSERT_TRUE(tok);
  for (const json& c : vectors()["special_cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(*tok->encode(text, false), c["ids"].get<std::vector<int32_t>>()) << escaped(text);
    EXPECT_NE(c["ids"], c["plain_ids"]) << escaped(text);  // Tekkenizer.encode's reading differs
    EXPECT_EQ(*tok->decode(c["plain_ids"].get<std::vector<int32_t>>()), text);
  }
}

// A directory as Mistral ships one: tekken.json and chat_template.jinja, no tokenizer.json or
// tokenizer_config.json. The template renders what MistralTokenizer.encode_chat_completion
// encodes, and the prompt's ids are its ids (but where a message types a special-token string).
TEST(TekkenFile, ChatTemplateBesideTekkenJson) {
  auto tok = load(kDir);
  ASSERT_TRUE(tok);
  ASSERT_FALSE(fs::exists(kDir + "tokenizer.json"));
  ASSERT_FALSE(fs::exists(kDir + "tokenizer_config.json"));
  const ChatSpecialTokens names{tok->token_to_piece(tok->bos_id()), tok->token_to_piece(tok->eos_ids().at(0))};
  auto t = load_chat_template(kDir, "", names);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->origin, "chat_template.jinja");
  size_t n_typed = 0;
  for (const json& c : vectors()["chats"]) {
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"]) messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    auto prompt = t->apply(messages, {}, /*add_generation_prompt=*/true, "");
    ASSERT_TRUE(prompt.has_value()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["text"].get<std::string>());
    auto ids = tok->encode(*prompt, /*add_bos=*/false);
    ASSERT_TRUE(ids.has_value());
    EXPECT_EQ(*ids, c["matched_ids"].get<std::vector<int32_t>>()) << escaped(*prompt);
    if (c["matched_ids"] != c["ids"]) ++n_typed;  // a message typed "[INST]": mistral-common keeps it text
  }
  EXPECT_EQ(n_typed, 1u);
}

// Files without special_tokens (v7 and before: Mistral Nemo, Pixtral) take Tekkenizer's fixed list.
TEST(TekkenFile, OldFilesUseTheFixedSpecialTokens) {
  json old = tekken();
  old.erase("special_tokens");
  old["config"]["version"] = "v3";
  const testing::TempDir dir("tekken_v3");
  write_file(dir.file("tekken.json"), old.dump());
  auto tok = load(dir.str());
  ASSERT_TRUE(tok);
  const json& v3 = vectors()["v3"];
  for (const auto& [name, id] : v3["specials"].items()) EXPECT_EQ(tok->token_to_piece(id), name);
  EXPECT_EQ(tok->bos_id(), v3["bos"].get<int32_t>());
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{v3["eos"].get<int32_t>()});
  // A later version must list its special tokens.
  old["config"]["version"] = "v11";
  write_file(dir.file("tekken.json"), old.dump());
  auto refused = Tokenizer::load(dir.str());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("special_tokens is missing"), std::string::npos) << refused.status().to_string();
}

// tokenizer.json wins when a directory has both (transformers' and vLLM's default Hugging Face mode).
TEST(TekkenFile, TokenizerJsonWinsOverTekkenJson) {
  const testing::TempDir dir("tekken_both");
  fs::copy_file(kDir + "tekken.json", dir.file("tekken.json"));
  auto converted = convert_tekken(tekken(), "tekken.json");
  ASSERT_TRUE(converted.has_value()) << converted.status().to_string();
  converted->tokenizer["added_tokens"].push_back({{"id", 1800}, {"content", "<only-in-tokenizer.json>"}, {"special", true}});
  write_file(dir.file("tokenizer.json"), converted->tokenizer.dump());
  auto tok = load(dir.str());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 1801);
  EXPECT_EQ(*tok->encode("<only-in-tokenizer.json>", false), std::vector<int32_t>{1800});
}

// The vocabulary a real file ships (mistral-common's tekken_240911.json: 150,000 ranks cut to
// 130,072, 1,000 special ids), when the fixtures' virtual environment holds it.
TEST(TekkenFile, RealMistralFileWhenPresent) {
  const json& real = vectors().value("real", json());
  if (real.is_null()) GTEST_SKIP() << "vectors.json has no real-file cases";
  const fs::path lib = fs::path(BRIGADE_FIXTURES).parent_path().parent_path() / ".brigade/fixtures-venv/lib";
  fs::path path = lib / "python3/site-packages" / real["file"].get<std::string>();
  std::error_code ec;
  if (fs::is_directory(lib, ec))
    for (const auto& entry : fs::directory_iterator(lib, ec))  // python3.N
      if (fs::exists(entry.path() / "site-packages" / real["file"].get<std::string>()))
        path = entry.path() / "site-packages" / real["file"].get<std::string>();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent (python3 scripts/make_tekken_fixtures.py installs it)";
  auto tok = load(path.string());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), real["vocab_size"].get<int>());
  for (const json& c : real["cases"])
    EXPECT_EQ(*tok->encode(c["text"].get<std::string>(), true), c["ids_bos"].get<std::vector<int32_t>>()) << c["text"];
}

// A corrupt or truncated tekken.json is refused naming the field, never loaded half-way.
TEST(TekkenFile, RefusesCorruptFiles) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j.erase("config"); }, "config is missing"},
      {[](json& j) { j["config"].erase("pattern"); }, "config.pattern is missing"},
      {[](json& j) { j["config"]["default_vocab_size"] = "1800"; }, "config.default_vocab_size must be an integer"},
      {[](json& j) { j["config"].erase("default_num_special_tokens"); }, "config.default_num_special_tokens is missing"},
      {[](json& j) { j["config"]["version"] = "13"; }, "config.version '13' is not a tokenizer version"},
      {[](json& j) { j["config"]["default_vocab_size"] = 400; }, "leaves fewer than 256 vocabulary tokens"},
      {[](json& j) { j["config"]["pattern"] = "(unclosed"; }, "tekken.json"},
      {[](json& j) { j.erase("vocab"); }, "vocab is missing"},
      {[](json& j) { j["vocab"].erase(j["vocab"].begin() + 1000, j["vocab"].end()); }, "vocab has 1000 entries but"},
      {[](json& j) { j["vocab"][700]["token_bytes"] = "!!not base64"; }, "vocab[700].token_bytes '!!not base64' is not base64"},
      {[](json& j) { j["vocab"][700].erase("token_bytes"); }, "vocab[700].token_bytes is missing"},
      {[](json& j) { j["vocab"][700]["rank"] = 701; }, "vocab[700].rank is 701, not its index"},
      {[](json& j) { std::swap(j["vocab"][3], j["vocab"][4]); }, "vocab[3].rank is 4"},
      {[](json& j) { j["vocab"][700]["token_bytes"] = j["vocab"][600]["token_bytes"]; }, "vocab[700].token_bytes repeats vocab[600]'s"},
      {[](json& j) { j["vocab"][65]["token_bytes"] = "Qg=="; }, "vocab[65].token_bytes must be the single byte 65"},
      {[](json& j) { j["vocab"][700]["token_bytes"] = ""; }, "vocab[700].token_bytes must be a non-empty string"},
      {[](json& j) { j["special_tokens"] = "none"; }, "special_tokens is not an array"},
      {[](json& j) { j["special_tokens"][5]["rank"] = 7; }, "special_tokens[5].rank is 7, not its index"},
      {[](json& j) { j["special_tokens"][5].erase("token_str"); }, "special_tokens[5].token_str is missing"},
      {[](json& j) { j["special_tokens"][5]["token_str"] = "[INST]"; }, "special token '[INST]' (id 5) repeats id 3"},
      {[](json& j) { j["special_tokens"][5]["token_str"] = "<SPECIAL_250>"; }, "special token '<SPECIAL_250>' (id 250) repeats id 5"},
      {[](json& j) { j["config"]["default_num_special_tokens"] = 100; j["config"]["default_vocab_size"] = 1600; }, "200 special tokens but config.default_num_special_tokens is 100"},
  };
  const testing::TempDir dir("tekken_corrupt");
  for (const auto& [edit, want] : cases) {
    json j = tekken();
    edit(j);
    write_file(dir.file("tekken.json"), j.dump());
    auto tok = Tokenizer::load(dir.str());
    ASSERT_FALSE(tok.has_value()) << want;
    EXPECT_NE(tok.status().message().find("tekken.json"), std::string::npos) << tok.status().to_string();
    EXPECT_NE(tok.status().message().find(want), std::string::npos) << want << " <- " << tok.status().to_string();
  }
  // Cut short mid-file: not JSON any more.
  const std::string text = *read_text_file(kDir + "tekken.json");
  write_file(dir.file("tekken.json"), text.substr(0, text.size() / 2));
  auto tok = Tokenizer::load(dir.str());
  ASSERT_FALSE(tok.has_value());
  EXPECT_EQ(tok.status().code(), StatusCode::corrupt);
  EXPECT_NE(tok.status().message().find("truncated"), std::string::npos) << tok.status().to_string();
  // A file named otherwise is still read as tekken when it has config and vocab but no model.
  write_file(dir.file("vocab.json"), tekken().dump());
  EXPECT_TRUE(Tokenizer::load(dir.file("vocab.json")).has_value());
  write_file(dir.file("my-tekken.json"), R"({"model": {"type": "BPE"}})");
  auto named = Tokenizer::load(dir.file("my-tekken.json"));
  ASSERT_FALSE(named.has_value());
  EXPECT_NE(named.status().message().find("config is missing"), std::string::npos) << named.status().to_string();
}

}  // namespace
}  // namespace brigade
