// SentencePiece tokenizer.model files through libsentencepiece (the reference implementation),
// so normalization, byte fallback and piece scoring are exactly the original's.
#pragma once

#include <memory>
#include <string>

#include "models/tokenizer.h"

namespace brigade {

// Loads a SentencePiece model file; corrupt naming the file when libsentencepiece rejects it.
// Control pieces (<s>, </s>, ...) written in the text become their ids, as in the other tokenizers.
Expected<std::unique_ptr<Tokenizer>> load_sentencepiece_tokenizer(const std::string& path);

}  // namespace brigade
