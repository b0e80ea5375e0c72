// SentencePiece-style BPE over a scored vocabulary (Llama 1/2, TinyLlama, Mistral v0.1): the
// algorithm of SentencePiece's BPE model as llama.cpp and llama2.c run it, fed from a GGUF
// vocabulary (tokenizer.ggml.model = "llama") or a llama2.c tokenizer.bin. For a tokenizer.model
// file, tokenizer_sentencepiece.h calls libsentencepiece itself.
//
// encode: spaces become U+2581 "▁", one "▁" is prepended (add_space_prefix) at the start and
// after every special token, each UTF-8 character starts as a symbol, and the adjacent pair whose
// concatenation is the highest-scoring vocabulary piece merges first (ties: leftmost) until no
// pair is in the vocabulary. Characters without a piece fall back to <0xXX> byte tokens (or
// <unk> when the vocabulary has none). A GGUF gemma4 vocabulary (Gemma 4) runs the same way with
// merge ranks instead of scores (SpmVocab::merges), as llama.cpp's BPE runs it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/tokenizer.h"

namespace brigade {

// Token kinds, numbered as GGUF's tokenizer.ggml.token_type.
enum class SpmTokenType : int { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct SpmVocab {
  std::vector<std::string> pieces;  // id -> piece, spaces written as "▁", bytes as "<0xXX>"
  std::vector<float> scores;        // id -> merge priority (higher merges first)
  std::vector<SpmTokenType> types;  // id -> kind; control and user_defined are matched in text
  bool add_space_prefix = true;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  bool add_eos = false;  // encode(add_bos) also appends eos_id (a GGUF's tokenizer.ggml.add_eos_token)
  // Non-empty: llama.cpp's SentencePiece-style BPE of a gemma4 vocabulary instead (tokenizer.ggml.merges,
  // "a b" each, rank = position): the adjacent pair of lowest merge rank merges first (ties:
  // leftmost), scores unused; the escaped text is cut into newline runs and the rest first, and a
  // newline run that is a vocabulary piece is that piece; unknown-type pieces are matched in the
  // text too (llama.cpp's special-token partition).
  std::vector<std::string> merges;
  std::vector<int32_t> eos_ids;  // non-empty: what eos_ids() returns (every end-of-generation id) instead of {eos_id}
};

// Checks the vocabulary (sizes agree, ids in range) and builds the tokenizer; `origin` names the
// source file in errors.
Expected<std::unique_ptr<Tokenizer>> make_spm_tokenizer(SpmVocab vocab, const std::string& origin);

// llama2.c tokenizer.bin: i32 max_token_length, then per token f32 score, i32 length, bytes.
// Ids 0, 1, 2 are <unk>, <s>, </s>; "<0xXX>" pieces are byte tokens; spaces (which the export
// wrote for "▁") are mapped back. corrupt on truncation.
Expected<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path);

}  // namespace brigade
