// Internal to models/: a byte-level BPE tokenizer from the slow GPT-2 tokenizer's files
// (vocab.json, merges.txt, with tokenizer_config.json and special_tokens_map.json when present), as
// transformers' GPT2Converter turns them into a tokenizer.json: the GPT-2 split then ByteLevel
// (tokenizer_config.json's add_prefix_space, false by default), the ByteLevel decoder, the tokens
// added_tokens_decoder lists (or, without it, added_tokens.json's: CodeGen's whitespace runs) and
// the special tokens the configs name (bos, eos, unk, pad) as added tokens that are never split, and the BOS first in a prompt where add_bos_token is true. OPT's and
// many older GPT-2-family repositories ship these files and no tokenizer.json.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "models/tokenizer.h"

namespace brigade {

// Whether `dir` holds vocab.json and merges.txt.
bool has_vocab_merges_files(const std::string& dir);

// The tokenizer of `dir`'s vocab.json and merges.txt. corrupt naming the file for a vocab.json
// that is not an object of token -> id, a merges.txt line that is not two tokens separated by one
// space, or a configuration file that is not a JSON object.
Expected<std::unique_ptr<Tokenizer>> load_vocab_merges_tokenizer(const std::string& dir);

}  // namespace brigade
