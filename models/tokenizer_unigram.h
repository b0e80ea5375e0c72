// SentencePiece's Unigram model from a Hugging Face tokenizer.json (XLM-RoBERTa: BAAI/bge-m3, the
// bge-reranker family, intfloat/multilingual-e5-*; and Llama-style byte-fallback models):
// model.type "Unigram", as the `tokenizers` library encodes and decodes it.
//
// encode: added tokens (<s>, </s>, <mask>, ...) are split out of the raw text first
// (tokenizer_json_vocab.h); each stretch between them goes through the normalizer
// (tokenizer_normalizer.h: XLM-R's Precompiled nmt_nfkc rules, then runs of spaces made one) and
// the pre-tokenizer (tokenizer_metaspace.h: spaces become "▁", a "▁" is prepended, a word starts at
// each "▁"), and each word becomes the segmentation that maximises the sum of piece scores
// (Viterbi; ties go to the path found first, as in Hugging Face's encode_optimized). A character
// no piece covers is unk_id, with score min_score - 10, and unknown characters next to each other
// are one unk; with byte_fallback they become <0xXX> byte pieces instead (when all exist).
// add_bos adds the post-processor's tokens (<s> $A </s>); there is no BOS or EOS of its own.
//
// decode: the decoder (tokenizer_metaspace.h's PieceDecoder) over the tokens' strings.
// token_to_piece gives a token as it follows another in decode (" world" for "▁world", the raw byte
// of "<0xE3>"), so IncrementalDetokenizer's text is decode's but for a leading space.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/tokenizer.h"

namespace brigade {

// tokenizer_json: a parsed tokenizer.json whose model.type is "Unigram"; origin names the file in
// errors. corrupt, naming the field, for a malformed file (a vocab entry that is not [string,
// number], unk_id outside the vocab, a corrupt precompiled_charsmap, ...); unsupported, naming
// it, for a normalizer, pre-tokenizer, decoder or post-processor type not implemented.
Expected<std::unique_ptr<Tokenizer>> load_unigram_tokenizer(const nlohmann::json& tokenizer_json, const std::string& origin);

}  // namespace brigade
