// Mistral's tekken.json: mistral-common's Tekkenizer format (Mistral Nemo, Pixtral, Ministral,
// Mistral Small 3.x, Devstral, Magistral, Voxtral), which some checkpoints ship instead of a
// tokenizer.json (vLLM's --tokenizer-mode mistral reads it). One JSON object:
//
//   config          {pattern (tiktoken's pat_str), default_vocab_size, default_num_special_tokens,
//                    version ("v3", "v7", "v11", "v13", ...), num_vocab_tokens (not used, as
//                    Tekkenizer does not use it)}
//   vocab           [{rank, token_bytes (base64), token_str}], rank = index, ranks 0..255 the
//                    single bytes; only the first default_vocab_size - default_num_special_tokens
//                    are kept (Tekkenizer cuts the rest)
//   special_tokens  [{rank, token_str, is_control}], rank = index (v7 and later; older files have
//                    none and use Tekkenizer's fixed list <unk> <s> </s> [INST] [/INST] ...
//                    [TOOL_CONTENT]); ids past the list up to default_num_special_tokens are
//                    named <SPECIAL_{id}>, as Tekkenizer names them
//   image / audio / multimodal / model_settings_builder: not read (a processor's concern)
//
// Ids: special token i is id i; vocabulary rank r is id num_special + r. The vocabulary becomes
// the byte-level BPE a tokenizer.json holds (tiktoken_tokenizer_json: merges replayed from the
// ranks, whole pieces first). BOS is <s>, EOS </s>; encode(add_bos) puts <s> first, as
// Tekkenizer.encode(bos=True) does.
//
// Special tokens in text: Tekkenizer.encode takes "[INST]" in the text as plain text; mistral-common
// (and vLLM's mistral mode) insert control tokens by id when they encode a chat request, never
// by matching text. brigade renders a Jinja chat template (chat_template.jinja) into text, so the
// special tokens are matched in the text as added tokens, as the tokenizer.json transformers
// converts from the same file does (its MistralConverter: every special token an AddedToken with
// special true). A message that types "[INST]" gets the control token, as with Hugging Face
// tokenizers. Every special token is special: decode(skip_special = true) drops them, as
// Tekkenizer's default SpecialTokenPolicy.IGNORE does (by id < num_special, is_control aside);
// skip_special false keeps their text (SpecialTokenPolicy.KEEP).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/tokenizer.h"
#include "models/tokenizer_tiktoken.h"

namespace brigade {

// The file name mistral-common and transformers look for in a model directory.
inline constexpr const char* kTekkenFile = "tekken.json";

// Whether model directory `dir` holds a tekken.json.
bool has_tekken_vocabulary(const std::string& dir);

// Whether a parsed JSON file, named `path`, is a tekken file rather than a tokenizer.json:
// mistral-common's rule (the name holds "tekken"), or no "model" but a "config" and a "vocab".
bool looks_like_tekken(const std::string& path, const nlohmann::json& j);

// The tokenizer.json and the tokenizer_config.json (bos_token, eos_token) of a parsed tekken.json.
// corrupt, naming `origin` and the field, for a missing or mistyped field, bad base64, a rank that
// is not its index, a vocabulary shorter than default_vocab_size needs, special tokens that repeat
// or outnumber default_num_special_tokens, or a v8+ file without special_tokens.
Expected<TiktokenConversion> convert_tekken(const nlohmann::json& tekken, const std::string& origin);

// The tokenizer of a tekken.json file, or of a parsed one (`origin` names it in errors).
Expected<std::unique_ptr<Tokenizer>> load_tekken_tokenizer(const std::string& path);
Expected<std::unique_ptr<Tokenizer>> load_tekken_tokenizer(const nlohmann::json& tekken, const std::string& origin);

}  // namespace brigade
