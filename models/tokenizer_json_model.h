// What the tokenizer.json tokenizers with a post-processor (WordPiece, Unigram) share around their
// model: the id -> string table with the added tokens (special ones marked), splitting those out of
// the text (normalized ones out of the normalized text between the others, tokenizer_json_vocab.h),
// the post-processor's special tokens and token type ids, and the Tokenizer overrides on top of
// these. A subclass normalizes, encodes the normalized text between added tokens, and decodes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"
#include "models/tokenizer_json_vocab.h"
#include "models/tokenizer_post_processor.h"

namespace brigade {

class JsonModelTokenizer : public Tokenizer {
 public:
  // invalid_argument when text is not valid UTF-8; else the added tokens' ids and encode_text's
  // ids of the text between them, with the post-processor's tokens when add_bos.
  Expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const final;
  Expected<std::vector<int32_t>> encode_pair(std::string_view a, std::string_view b,
                                             std::vector<int32_t>* type_ids = nullptr) const final;
  std::string token_string(int32_t id) const final {
    return id >= 0 && id < vocab_size() ? strings_[static_cast<size_t>(id)] : std::string();
  }
  bool is_special(int32_t id) const final { return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)]; }
  int vocab_size() const final { return static_cast<int>(strings_.size()); }
  int32_t bos_id() const final { return -1; }  // the post-processor adds [CLS] / <s>
  const std::vector<int32_t>& eos_ids() const final { return eos_; }

 protected:
  // Reads added_tokens (placed into strings_, which the model's vocab filled; a normalized one's
  // string is its normalized content, as Hugging Face's id_to_token) and the post_processor. The
  // normalizer must be ready: normalized tokens are matched by normalize(content).
  Status parse_added_tokens_and_post(const nlohmann::json& tokenizer_json, const std::string& origin);
  // The normalizer's output for valid UTF-8 `text` (the text itself without a normalizer).
  virtual std::string normalize(std::string_view text) const = 0;
  // Appends the ids of normalized `text` between added tokens; `at_start`: it begins the input.
  virtual Status encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const = 0;
  // invalid_argument naming the first id outside [0, vocab_size()).
  Status check_ids(std::span<const int32_t> ids) const;

  std::vector<std::string> strings_;  // id -> token string, added tokens' content included

 private:
  std::vector<uint8_t> special_;      // id -> is a special added token
  AddedTokens added_;                 // normalized false: matched in the raw text; longest content first
  AddedTokens normalized_added_;      // normalized true: by normalized content, in the normalized text
  PostProcessor post_;
  std::vector<int32_t> eos_;          // none: an encoder does not generate
};

// A T (a JsonModelTokenizer with Status parse(tokenizer_json, origin)) from a parsed tokenizer.json
// whose model.type is `type`; corrupt, naming `origin`, when it is not one.
template <class T>
Expected<std::unique_ptr<Tokenizer>> load_json_model(const nlohmann::json& tokenizer_json, const std::string& type,
                                                     const std::string& origin) {
  if (!tokenizer_json.is_object() || !tokenizer_json.contains("model") || !tokenizer_json["model"].is_object() ||
      tokenizer_json["model"].value("type", "") != type)
    return corrupt(origin + ": not a " + type + " tokenizer.json (model.type must be \"" + type + "\")");
  auto tok = std::make_unique<T>();
  BRIGADE_RETURN_IF_ERROR(tok->parse(tokenizer_json, origin));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace brigade
