// Tokenizers from the vocabulary a GGUF file carries (tokenizer.ggml.*): model "gpt2" is
// byte-level BPE (tokens, merges, and the pre-tokenizer named by tokenizer.ggml.pre), model
// "llama" is SentencePiece BPE (tokens, scores, token types), "gemma4" (Gemma 4) the same vocabulary
// with merges, run as llama.cpp runs it (tokenizer_spm.h's SpmVocab::merges).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "models/tokenizer.h"

namespace brigade {

Expected<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const GgufFile& gguf);

// The regex steps of a llama.cpp pre-tokenizer name (tokenizer.ggml.pre), applied in order with
// Split/Isolated semantics; unsupported listing the known names otherwise.
Expected<std::vector<std::string>> gguf_pretokenizer_patterns(const std::string& name);

}  // namespace brigade
