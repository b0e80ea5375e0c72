// A tokenizer.json's vocabulary, as the BPE and WordPiece loaders read it: model.vocab, and the
// added_tokens ([CLS], <|im_start|>, ...), which are matched in the raw text before the
// normalizer and pre-tokenizer run, each becoming its own id (exact match, leftmost then longest;
// lstrip/rstrip take the whitespace beside a match into it, as XLM-RoBERTa's <mask> does; a
// single_word token matches only where no word character is beside it). Every loader (BPE,
// WordPiece, Unigram) also applies "normalized": as Hugging Face's AddedVocabulary, it matches
// tokens with normalized true, by their normalized content, in the normalized text between the
// others (take_normalized).
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "models/added_token_matcher.h"

namespace brigade {

struct ModelVocab {
  std::unordered_map<std::string, int32_t> ids;  // token string -> id
  std::vector<std::string> strings;              // id -> token string; empty for an id no entry has
};

// model.vocab (an object of token string -> id). corrupt, naming `origin` and the entry, for an
// id outside [0, 2^24]; the caller checks that model.vocab is an object.
Expected<ModelVocab> parse_model_vocab(const nlohmann::json& vocab, const std::string& origin);

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false, rstrip = false;  // the token takes the whitespace before / after it
  bool normalized = false;              // matched in the normalized text (absent: false)
  bool single_word = false;             // matched only with no word character (Rust regex \w) beside it
};

// The tokens of tokenizer.json's "added_tokens" (absent or null: none), longest content first.
// corrupt, naming `origin`, for an entry without an id in [0, 2^24] or a non-empty content, or with
// a special/lstrip/rstrip/normalized/single_word that is not a boolean.
Expected<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& tokenizer_json, const std::string& origin);

// Takes the tokens with normalized true out of `added` (its order kept) and returns them with
// their content normalized (what Hugging Face matches in the normalized text, and its
// id_to_token), longest first; one whose content normalizes to nothing is dropped (it would
// match everywhere).
template <class Normalize>
std::vector<AddedToken> take_normalized(std::vector<AddedToken>& added, const Normalize& normalize) {
  auto first = std::stable_partition(added.begin(), added.end(), [](const AddedToken& a) { return !a.normalized; });
  std::vector<AddedToken> out;
  for (auto it = first; it != added.end(); ++it) {
    AddedToken a = *it;
    a.content = normalize(a.content);
    if (!a.content.empty()) out.push_back(std::move(a));
  }
  added.erase(first, added.end());
  std::stable_sort(out.begin(), out.end(), [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  return out;
}

// A stretch of text between added tokens (id -1), or one added token (its id; text its content
// and the whitespace its lstrip/rstrip took).
struct TextPiece {
  std::string_view text;
  int32_t id = -1;
};

// A list of added tokens and the matcher (added_token_matcher.h) that finds them in a text.
class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // `text` cut at each occurrence of an added token (the leftmost, the longest there; of tokens
  // with the same content, the first in the list): the pieces cover it in order, no text piece is
  // empty.
  std::vector<TextPiece> split(std::string_view text) const;

 private:
  std::vector<AddedToken> tokens_;
  AddedTokenMatcher matcher_;  // index = position in tokens_
};

}  // namespace brigade
