// BERT's WordPiece from a Hugging Face tokenizer.json (bert-base-uncased, BGE, MiniLM, E5 and the
// ms-marco cross-encoders): model.type "WordPiece", as the `tokenizers` library encodes and
// decodes it.
//
// encode: added tokens ([CLS], [SEP], [MASK], ...) are split out of the raw text first (exact
// match, leftmost then longest, as the BPE tokenizer does); the rest goes through the
// normalizer (BertNormalizer: clean_text, handle_chinese_chars, strip_accents, lowercase) and the
// pre-tokenizer (BertPreTokenizer: split on whitespace, each punctuation character a word), and
// each word becomes its longest vocabulary prefix, then "##"-prefixed longest pieces of the rest;
// a word with no such split, or longer than max_input_chars_per_word characters, is unk_token.
// add_bos adds the post-processor's tokens ([CLS] $A [SEP]); there is no BOS or EOS of its own.
//
// decode: the WordPiece decoder: tokens joined by spaces, a "##" piece glued to the one before,
// and Hugging Face's cleanup (" ." -> ".", " n't" -> "n't", ...) of each token.
// token_to_piece gives a token as it follows another in decode (" word", "ing" for "##ing",
// "." for "."), so IncrementalDetokenizer's text is decode's but for a leading space.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/tokenizer.h"

namespace brigade {

// tokenizer_json: a parsed tokenizer.json whose model.type is "WordPiece"; origin names the file
// in errors. corrupt for a malformed file (no vocab, unk_token not in the vocab, ...); unsupported,
// naming it, for a normalizer, pre-tokenizer, decoder or post-processor type not implemented.
Expected<std::unique_ptr<Tokenizer>> load_wordpiece_tokenizer(const nlohmann::json& tokenizer_json,
                                                              const std::string& origin);

}  // namespace brigade
