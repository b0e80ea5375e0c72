// Tokenizers from a tiktoken vocabulary: a model directory that ships a ranks file (each line
// `base64(token bytes) rank`) and the Python class that gives it a split pattern and special
// tokens, instead of a tokenizer.json. The family is named by tokenizer_config.json's auto_map
// ("tokenization_kimi.TikTokenTokenizer") or tokenizer_class:
//
//   Kimi K2 / K2-Instruct / K2-Thinking   tiktoken.model  TikTokenTokenizer  258 special ids after
//       the ranks, named by added_tokens_decoder, the rest <|reserved_token_{id}|>; Han runs split
//       from other letters (kKimiK2Pattern)
//   Hunyuan-A13B                           hy.tiktoken     HYTokenizer  NFC first; Qwen2's pattern;
//       unique tokens ranked in file order (the rank column is ignored, as HYTokenizer does);
//       <|endoftext|> <|startoftext|> <|bos|> <|eos|> <|pad|> <|extra_0..204|> after them
//   Qwen (v1)                              qwen.tiktoken   QWenTokenizer  NFC first; Qwen2's
//       pattern; <|endoftext|> <|im_start|> <|im_end|> <|extra_0..204|> after the ranks
//   GLM-4 (glm-4-9b-chat, glm-4-9b, glm-4v-9b; tokenization_chatglm)  tokenizer.model
//       ChatGLM4Tokenizer  cl100k's pattern (kLlama3Pattern); <|endoftext|> [MASK] [gMASK] [sMASK]
//       <sop> <eop> <|system|> <|user|> <|assistant|> <|observation|> <|begin_of_image|>
//       <|end_of_image|> <|begin_of_video|> <|end_of_video|> after the ranks; add_special_tokens
//       puts [gMASK] <sop> first. Its ranks file has SentencePiece's name: a tokenizer.model is
//       taken as tiktoken ranks only when its first line is one and tokenizer_config.json is
//       beside it (else it is read as SentencePiece)
//
// Any other family is refused by name: its split pattern and special tokens live in its Python.
// The ranks become the byte-level BPE a tokenizer.json holds (tokenizer_bpe.h): the vocabulary in
// GPT-2's byte-to-unicode form with id = rank, one merge per multi-byte token ordered by its
// rank, whole pieces taken as one token first (tiktoken's shortcut, model.ignore_merges), the
// special tokens as added tokens (every one special, matched anywhere in the text, as the model's
// encode(allowed_special="all") does), and no BOS added (the Python classes add none; GLM-4's
// prefix is its post-processor's). Reserved
// fillers past config.json's vocab_size are dropped (Kimi K2 names 258 special ids, its embedding
// holds 256 of them), as llama.cpp's converter drops them. Kimi's TikTokenTokenizer.encode cuts the
// text before tiktoken sees it (tiktoken_run_pieces: 400,000-character chunks, runs of whitespace
// or non-whitespace longer than 25,000 characters) and encodes each piece alone, special tokens
// matched inside each piece: so does brigade for that family (a GGUF of it follows llama.cpp's
// kimi-k2 pre-tokenizer, which does not cut). transformers' PreTrainedTokenizer.tokenize splits at
// the added tokens first and cuts each stretch between them; the two differ only when a cut falls
// within 25,000 characters of a special token with no whitespace between.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"

namespace brigade {

// tokenization_kimi.py's pat_str in PCRE2 syntax: runs of Han (Script=Han, as Rust's \p{Han}, not
// PCRE2's script extensions, which would take 、 and 。 along), then GPT-4o-style words whose
// letter classes exclude Han (Rust's [...&&[^\p{Han}]] as a lookahead before each letter), up to
// three digits, punctuation runs, newlines and whitespace. Also llama.cpp's kimi-k2
// pre-tokenizer (tokenizer_gguf.h).
inline constexpr const char* kKimiK2Pattern =
    R"(\p{sc:Han}+)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Whether model directory `dir` holds a ranks file of a known family (tiktoken.model, hy.tiktoken,
// qwen.tiktoken, or a tokenizer.model of tiktoken ranks beside tokenizer_config.json).
bool has_tiktoken_vocabulary(const std::string& dir);

// The tokenizer of model directory `dir` (its ranks file and tokenizer_config.json). not_found
// without a ranks file; unsupported, listing the known classes, for a family not above; corrupt,
// naming the file and line, for a malformed ranks file or tokenizer_config.json.
Expected<std::unique_ptr<Tokenizer>> load_tiktoken_tokenizer(const std::string& dir);

// The same vocabulary as a tokenizer.json and the tokenizer_config.json (bos_token, eos_token)
// that load_bpe_tokenizer reads.
struct TiktokenConversion {
  nlohmann::json tokenizer;
  nlohmann::json config;
  // The family's tiktoken_run_pieces cut before encoding (Kimi: 400,000 and 25,000); 0: none.
  size_t chunk_chars = 0, max_run_chars = 0;
};
Expected<TiktokenConversion> convert_tiktoken_directory(const std::string& dir);

// The tokens of a ranks file, index = rank. by_line false (tiktoken's load_tiktoken_bpe): each
// token at its rank, ranks 0..n-1 each once, tokens distinct. by_line true (HYTokenizer): the rank
// column must be an integer but is ignored; unique tokens are ranked in file order, repeats
// skipped. Blank lines are skipped. corrupt, naming `origin` and the line, for a line that is not
// `base64 rank`, bad base64, an empty token, a repeated or missing rank, a repeated token.
Expected<std::vector<std::string>> parse_tiktoken_ranks(std::string_view text, bool by_line, const std::string& origin);

// For each token (index = rank) of two or more bytes, the byte offset splitting it into the two
// parts tiktoken joins last when it encodes the token's bytes alone; 0 when that never joins them
// (the replay gets stuck). Replaying to the end, not only up to the token's own rank as
// transformers' and llama.cpp's converters do, keeps the tokens a vocabulary ranks below their
// parts: BPE with these merges, ordered by rank, joins exactly what tiktoken joins, since every
// pair tiktoken joins inside a word is the pair its token's own replay joins last.
std::vector<size_t> tiktoken_merge_splits(const std::vector<std::string>& tokens);

// One special token of a converted vocabulary.
struct TiktokenSpecial {
  int32_t id = 0;
  std::string content;
};

// The tokenizer.json (tokenizer_bpe.h) of ranked tokens (index = rank): tokens[r] at id
// first_rank_id + r in GPT-2's byte-to-unicode form, one merge per multi-byte token ordered by
// rank (tiktoken_merge_splits), whole pieces taken as one token first (model.ignore_merges),
// `specials` as special added tokens matched anywhere in the text (in its NFC form when nfc), the
// split `pattern` then ByteLevel, and the ByteLevel decoder. No post_processor: the caller adds
// the one its format needs (or none: encode(add_bos) puts bos_token first).
nlohmann::json tiktoken_tokenizer_json(const std::vector<std::string>& tokens, int32_t first_rank_id,
                                       const std::vector<TiktokenSpecial>& specials, const std::string& pattern,
                                       bool nfc);

// The pieces TikTokenTokenizer.encode (Kimi K2's tokenization_kimi.py) gives tiktoken one at a
// time: `text` (valid UTF-8) in chunks of `chunk_chars` characters (code points, as Python's str
// counts them), each cut before every character that would make a run of whitespace (Python's
// str.isspace, which also holds for U+001C..U+001F) or of non-whitespace characters longer than
// `max_run` characters. The pieces cover the text in order; none for an empty text.
std::vector<std::string_view> tiktoken_run_pieces(std::string_view text, size_t chunk_chars, size_t max_run);

// Whether `head` (a file's first bytes) reads as a tiktoken ranks file: base64, one space,
// digits. Meta's original Llama 3 tokenizer.model is one, where a SentencePiece model is protobuf.
bool looks_like_tiktoken_ranks(std::string_view head);

}  // namespace brigade
