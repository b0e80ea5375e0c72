// A deterministic byte-level BPE vocabulary for synthetic checkpoints (brigade make-model).
//
// Ids: 0 "<unk>", 1 "<s>" (bos), 2 "</s>" (eos) as special added tokens; 3..258 the 256 byte
// tokens in GPT-2's byte-to-unicode mapping (byte b is id 3 + b); then one token per merge:
// common English words (with and without a leading space) built left to right, digit pairs and
// whitespace runs, then tokens extended letter by letter until exactly vocab_size ids exist.
// Every merge joins two existing tokens into a new, distinct one.
#pragma once

#include <string>

#include "core/status.h"

namespace brigade {

inline constexpr int kSyntheticUnkId = 0;
inline constexpr int kSyntheticBosId = 1;
inline constexpr int kSyntheticEosId = 2;
inline constexpr int kSyntheticMinVocab = 259;  // specials + 256 bytes

// tokenizer.json text in Hugging Face's exact layout; invalid_argument when vocab_size < 259.
Expected<std::string> synthetic_tokenizer_json(int vocab_size);
// tokenizer_config.json text naming the special tokens (bos added by default, as Llama does).
std::string synthetic_tokenizer_config_json(int max_position);

}  // namespace brigade
