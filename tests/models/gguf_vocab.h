// Vocabulary metadata for test GGUF files (tokenizer.ggml.*), as llama.cpp's converter writes
// it from a model's own tokenizer files, without brigade's readers: from a SentencePiece
// tokenizer.model (libsentencepiece) a "llama" vocabulary, from a byte-level BPE tokenizer.json a
// "gpt2" one. Pass the result to write_gguf_from_checkpoint's `extra`.
#pragma once

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_test_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/gguf.h"
#include "models/tokenizer_gguf.h"

namespace brigade::testing {

// llama.cpp's token types (llama_token_type / gguf-py TokenType).
enum GgufTokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// convert_hf_to_gguf.py's _create_vocab_sentencepiece: every piece with its score and type;
// bos/eos/unk from the model; add_space_prefix true (Llama 2's normalizer adds the dummy prefix).
// Empty when the model does not load.
inline std::vector<GgufKv> gguf_vocab_from_sentencepiece(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(model_path).ok()) return {};
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < sp.GetPieceSize(); ++i) {
    tokens.push_back(sp.IdToPiece(i));
    scores.push_back(sp.GetScore(i));
    types.push_back(sp.IsUnknown(i) ? kUnknown : sp.IsControl(i) ? kControl : sp.IsByte(i) ? kByte
                    : sp.IsUnused(i) ? kUnused : kNormal);
  }
  return {gguf_str("tokenizer.ggml.model", "llama"),
          gguf_strs("tokenizer.ggml.tokens", std::move(tokens)),
          gguf_f32s("tokenizer.ggml.scores", std::move(scores)),
          gguf_i32s("tokenizer.ggml.token_type", std::move(types)),
          gguf_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(sp.bos_id())),
          gguf_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(sp.eos_id())),
          gguf_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(sp.unk_id())),
          gguf_bool("tokenizer.ggml.add_space_prefix", true)};
}

// convert_hf_to_gguf.py's get_vocab_base for a BPE tokenizer.json: tokens in id order (model
// vocab, then added tokens), type control for special added tokens and user-defined for the
// others, merges as "a b" strings; `pre` names the pre-tokenizer (tokenizer.ggml.pre), `bos` and
// `eos` the special tokens by text (empty: no key), add_bos whether prompts start with BOS. Empty
// when the JSON is not a BPE tokenizer.json.
inline std::vector<GgufKv> gguf_vocab_from_tokenizer_json(const std::string& json_text, const std::string& pre,
                                                          const std::string& bos, const std::string& eos, bool add_bos) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.contains("model") || !j["model"].contains("vocab")) return {};
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](const std::string& text, int64_t id, int32_t type) {
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(static_cast<size_t>(id) + 1);
      types.resize(static_cast<size_t>(id) + 1, kUnused);
    }
    tokens[static_cast<size_t>(id)] = text;
    types[static_cast<size_t>(id)] = type;
  };
  for (const auto& [text, id] : j["model"]["vocab"].items()) put(text, id.get<int64_t>(), kNormal);
  for (const auto& a : j.value("added_tokens", nlohmann::json::array()))
    put(a["content"].get<std::string>(), a["id"].get<int64_t>(), a.value("special", false) ? kControl : kUserDefined);
  std::vector<std::string> merges;
  for (const auto& m : j["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  auto id_of = [&](const std::string& text) {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == text) return static_cast<uint32_t>(i);
    return static_cast<uint32_t>(-1);
  };
  std::vector<GgufKv> out;
  if (!bos.empty()) out.push_back(gguf_u32("tokenizer.ggml.bos_token_id", id_of(bos)));
  if (!eos.empty()) out.push_back(gguf_u32("tokenizer.ggml.eos_token_id", id_of(eos)));
  out.push_back(gguf_str("tokenizer.ggml.model", "gpt2"));
  out.push_back(gguf_str("tokenizer.ggml.pre", pre));
  out.push_back(gguf_strs("tokenizer.ggml.tokens", std::move(tokens)));
  out.push_back(gguf_i32s("tokenizer.ggml.token_type", std::move(types)));
  out.push_back(gguf_strs("tokenizer.ggml.merges", std::move(merges)));
  out.push_back(gguf_bool("tokenizer.ggml.add_bos_token", add_bos));
  return out;
}

// The GGUF test fixture `fixture`'s tokenizer (load_gguf_tokenizer) against llama.cpp's
// tokenization of the same strings (tests/fixtures/<fixture>/llamacpp.json, written by
// scripts/make_gguf_fixtures.py --llamacpp): `n` strings, each to the ids llama.cpp gave.
inline void expect_tokenizes_as_llamacpp(const std::string& fixture, size_t n) {
  SCOPED_TRACE(fixture);
  auto g = GgufFile::open(fixture_dir(fixture) + "/model.gguf");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto tok = load_gguf_tokenizer(**g);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const auto ref = load_fixture_json(fixture + "/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded()) << "run scripts/make_gguf_fixtures.py --llamacpp " << fixture;
  ASSERT_EQ(ref["tokenize"].size(), n);
  for (const auto& c : ref["tokenize"]) {
    const std::string text = c["text"].get<std::string>();
    auto ids = (*tok)->encode(text, c["add_bos"].get<bool>());
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << text;
  }
}

}  // namespace brigade::testing
