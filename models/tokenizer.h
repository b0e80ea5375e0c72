// Tokenizer: text <-> token ids (DESIGN.md §4). Implementations: byte-level BPE, BERT's
// WordPiece and SentencePiece's Unigram from Hugging Face tokenizer.json (tokenizer_bpe.h,
// tokenizer_wordpiece.h, tokenizer_unigram.h);
// SentencePiece and GGUF vocabularies slot in behind the same interface. IncrementalDetokenizer
// (detokenizer.h) turns a stream of ids into complete UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads a tokenizer from a model directory (tokenizer.json, with bos/eos names from
  // tokenizer_config.json when present, else Mistral's tekken.json (tokenizer_tekken.h), else a
  // tiktoken vocabulary of a known family (tokenizer_tiktoken.h), else tokenizer.model), or from a
  // file: tokenizer.json, a tekken.json, a SentencePiece *.model, a GGUF file's vocabulary (*.gguf) or a llama2.c tokenizer *.bin.
  // not_found when there is no tokenizer; unsupported for tokenizer types not implemented.
  static Expected<std::unique_ptr<Tokenizer>> load(const std::string& path);

  // Encodes UTF-8 text; special/added tokens in the text become their ids. add_bos adds the
  // special tokens Hugging Face's add_special_tokens does: a tokenizer.json post-processor's
  // (Llama 3's BOS first, Qwen3-Embedding's <|endoftext|> last), else bos_id() first (when
  // there is one). invalid_argument when text is not valid UTF-8.
  // Thread-safe: may be called concurrently.
  virtual Expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const = 0;
  // Encodes a pair of texts with the special tokens Hugging Face's tokenizer(text=a, text_pair=b)
  // adds (what a cross-encoder scores): a tokenizer.json post-processor's pair template
  // (Llama 3's "<|begin_of_text|> $A <|begin_of_text|> $B", BERT's "[CLS] $A [SEP] $B [SEP]",
  // RoBERTa's "<s> $A </s> </s> $B </s>"); by default encode(a, true) then encode(b, true), which
  // is a SentencePiece Llama tokenizer's "<s> $A <s> $B" and, for a tokenizer that adds nothing,
  // the two encodings joined. unsupported for a post-processor with a single template only.
  // When type_ids is not null it receives one token type id per returned id, as the tokenizer's
  // token_type_ids: the template's (BERT's 0 for [CLS] A [SEP], 1 for B [SEP]; RoBERTa's all 0),
  // by default 0 for the first text's ids and 1 for the second's.
  virtual Expected<std::vector<int32_t>> encode_pair(std::string_view a, std::string_view b,
                                                     std::vector<int32_t>* type_ids = nullptr) const;
  // The bytes of one token (special tokens give their text; may be a partial UTF-8 sequence).
  // Empty for an id outside [0, vocab_size()).
  virtual std::string token_to_piece(int32_t id) const = 0;
  // The vocabulary's own string for one token, as Hugging Face's convert_ids_to_tokens gives it
  // (byte-level BPE's "Ġworld", SentencePiece's "▁world" and "<0x0A>"); empty for an id outside
  // [0, vocab_size()). The default is token_to_piece, for tokenizers whose strings are the bytes.
  virtual std::string token_string(int32_t id) const { return token_to_piece(id); }
  // Concatenated bytes of ids (not necessarily valid UTF-8; use IncrementalDetokenizer for text
  // to show). invalid_argument naming the first id outside the vocabulary.
  virtual Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;
  virtual bool is_special(int32_t id) const = 0;
  virtual int vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;                   // -1 when none
  virtual const std::vector<int32_t>& eos_ids() const = 0;
};

// The bytes of every token id (token_to_piece), with special tokens empty: what constrained
// decoding may emit (core/token_trie.h).
std::vector<std::string> token_pieces(const Tokenizer& tokenizer);

// invalid_argument when the tokenizer can produce ids the model has no embedding for (its
// vocabulary is larger than the model's vocab_size), or its BOS/EOS ids are outside the model's;
// the message gives both sizes. A model vocabulary larger than the tokenizer's (padding rows) is
// fine. `model_vocab` is ModelConfig::vocab_size.
Status check_tokenizer_fits(const Tokenizer& tokenizer, int model_vocab);

}  // namespace brigade
